import { describe, expect, it } from 'vitest';

import { loadConfig, readBoolean } from '../../shared/config';
import { ConfigurationError } from '../../shared/protocol/errors';

const KEYS = `dev:${'a'.repeat(64)}:admin`;

function configError(env: Record<string, string>): ConfigurationError {
  try {
    loadConfig(env, '/srv/app');
  } catch (error) {
    if (error instanceof ConfigurationError) return error;
    throw error;
  }
  throw new Error('expected a ConfigurationError');
}

describe('backend selection (fails loud, never falls back silently)', () => {
  it('uses the local backend by default, under .cairn/data of the working folder', () => {
    expect(loadConfig({ CAIRN_API_KEYS: KEYS }, '/srv/app').backend).toEqual({
      kind: 'local',
      dataDir: '/srv/app/.cairn/data',
    });
  });

  it('uses Blob when endpoint and container are both set', () => {
    const config = loadConfig(
      {
        CAIRN_API_KEYS: KEYS,
        CAIRN_BLOB_ENDPOINT: 'https://acct.blob.core.windows.net/',
        CAIRN_BLOB_CONTAINER: 'cairn',
        AZURE_CLIENT_ID: '00000000-0000-0000-0000-000000000001',
      },
      '/srv/app',
    );
    expect(config.backend).toEqual({
      kind: 'blob',
      endpoint: 'https://acct.blob.core.windows.net',
      container: 'cairn',
      accountName: 'acct',
      managedIdentityClientId: '00000000-0000-0000-0000-000000000001',
    });
  });

  it('reads the account name from an Azurite path-style endpoint', () => {
    const config = loadConfig({
      CAIRN_API_KEYS: KEYS,
      CAIRN_BLOB_ENDPOINT: 'http://127.0.0.1:10000/devstoreaccount1',
      CAIRN_BLOB_CONTAINER: 'cairn',
      CAIRN_STORAGE_ACCOUNT_KEY: 'a2V5',
    });
    expect(config.backend).toMatchObject({
      kind: 'blob',
      accountName: 'devstoreaccount1',
      accountKey: 'a2V5',
    });
  });

  it.each(['true', '1', 'yes', 'YES'])(
    'CAIRN_KEEP_LOCAL=%s forces local even when blob is half-configured',
    (value) => {
      const config = loadConfig({
        CAIRN_API_KEYS: KEYS,
        CAIRN_KEEP_LOCAL: value,
        CAIRN_BLOB_CONTAINER: 'cairn',
      });
      expect(config.backend.kind).toBe('local');
    },
  );

  it('refuses an endpoint without a container, naming the missing setting', () => {
    const error = configError({
      CAIRN_API_KEYS: KEYS,
      CAIRN_BLOB_ENDPOINT: 'https://a.blob.core.windows.net',
    });
    expect(error.setting).toBe('CAIRN_BLOB_CONTAINER');
    expect(error.message).toContain('CAIRN_BLOB_CONTAINER');
  });

  it('refuses a container without an endpoint, naming the missing setting', () => {
    expect(configError({ CAIRN_API_KEYS: KEYS, CAIRN_BLOB_CONTAINER: 'cairn' }).setting).toBe(
      'CAIRN_BLOB_ENDPOINT',
    );
  });

  it('treats empty strings as unset', () => {
    expect(
      loadConfig({ CAIRN_API_KEYS: KEYS, CAIRN_BLOB_ENDPOINT: '', CAIRN_BLOB_CONTAINER: ' ' }).backend.kind,
    ).toBe('local');
  });

  it('requires a credential for Blob: the managed identity or (Azurite) an account key', () => {
    const error = configError({
      CAIRN_API_KEYS: KEYS,
      CAIRN_BLOB_ENDPOINT: 'https://a.blob.core.windows.net',
      CAIRN_BLOB_CONTAINER: 'cairn',
    });
    expect(error.setting).toBe('AZURE_CLIENT_ID');
  });

  it.each(['Cairn', 'ab', 'a--b', '-abc', 'x'.repeat(40)])(
    'refuses the container base name %s',
    (container) => {
      const error = configError({
        CAIRN_API_KEYS: KEYS,
        CAIRN_BLOB_ENDPOINT: 'https://a.blob.core.windows.net',
        CAIRN_BLOB_CONTAINER: container,
        AZURE_CLIENT_ID: 'id',
      });
      expect(error.setting).toBe('CAIRN_BLOB_CONTAINER');
    },
  );

  it('refuses an endpoint that is not a URL', () => {
    const error = configError({
      CAIRN_API_KEYS: KEYS,
      CAIRN_BLOB_ENDPOINT: 'not a url',
      CAIRN_BLOB_CONTAINER: 'cairn',
    });
    expect(error.setting).toBe('CAIRN_BLOB_ENDPOINT');
  });
});

describe('credentials and limits', () => {
  it('refuses to start with no credential configured at all', () => {
    expect(configError({}).setting).toBe('CAIRN_API_KEYS');
  });

  it('parses API key entries with an optional admin role', () => {
    const config = loadConfig({ CAIRN_API_KEYS: ` a:${'A'.repeat(64)} , b.c_d-e:${'1'.repeat(64)}:admin ` });
    expect(config.apiKeys).toEqual([
      { tenant: 'a', sha256: 'a'.repeat(64), admin: false },
      { tenant: 'b.c_d-e', sha256: '1'.repeat(64), admin: true },
    ]);
  });

  it.each([
    ['bad tenant', `a b:${'a'.repeat(64)}`],
    ['dot-dot tenant', `..:${'a'.repeat(64)}`],
    ['short hash', 'a:abc'],
    ['unknown role', `a:${'a'.repeat(64)}:root`],
    ['key hash given to two tenants', `a:${'a'.repeat(64)},b:${'A'.repeat(64)}`],
    ['key hash given twice to one tenant, once as admin', `a:${'a'.repeat(64)},a:${'a'.repeat(64)}:admin`],
  ])('refuses CAIRN_API_KEYS with a %s', (_name, value) => {
    expect(configError({ CAIRN_API_KEYS: value }).setting).toBe('CAIRN_API_KEYS');
  });

  it('needs all three Entra ID settings together', () => {
    expect(configError({ CAIRN_AUTH_ISSUER: 'https://issuer' }).setting).toBe('CAIRN_AUTH_AUDIENCE');
    const config = loadConfig({
      CAIRN_AUTH_ISSUER: 'https://issuer',
      CAIRN_AUTH_AUDIENCE: 'api://cairn',
      CAIRN_AUTH_JWKS_URI: 'https://issuer/keys',
    });
    expect(config.entra).toEqual({
      issuer: 'https://issuer',
      audience: 'api://cairn',
      jwksUri: 'https://issuer/keys',
      tenantClaim: 'oid',
    });
  });

  it('validates numbers and the log level, naming the setting', () => {
    expect(configError({ CAIRN_API_KEYS: KEYS, CAIRN_MAX_VALUE_BYTES: 'lots' }).setting).toBe(
      'CAIRN_MAX_VALUE_BYTES',
    );
    expect(configError({ CAIRN_API_KEYS: KEYS, CAIRN_STORAGE_TIMEOUT_MS: '0' }).setting).toBe(
      'CAIRN_STORAGE_TIMEOUT_MS',
    );
    expect(configError({ CAIRN_API_KEYS: KEYS, CAIRN_LOG_LEVEL: 'loud' }).setting).toBe('CAIRN_LOG_LEVEL');
    for (const bad of ['-1', '301', '2.5', 'low']) {
      expect(configError({ CAIRN_API_KEYS: KEYS, CAIRN_HEAP_GROWING_PERCENT: bad }).setting).toBe(
        'CAIRN_HEAP_GROWING_PERCENT',
      );
    }
    expect(loadConfig({ CAIRN_API_KEYS: KEYS, CAIRN_HEAP_GROWING_PERCENT: '0' }).heapGrowingPercent).toBe(0);
    const config = loadConfig({ CAIRN_API_KEYS: KEYS });
    expect(config).toMatchObject({
      maxValueBytes: 2_097_152,
      storageTimeoutMs: 8000,
      heapGrowingPercent: 30,
      logLevel: 'info',
    });
  });
});

describe('boolean settings (one parser)', () => {
  it.each([
    ['true', true],
    ['1', true],
    ['Yes', true],
    [' FALSE ', false],
    ['0', false],
    ['no', false],
  ])('reads %j as %s', (value, expected) => {
    expect(readBoolean({ CAIRN_AUDIT: value }, 'CAIRN_AUDIT')).toBe(expected);
  });

  it('gives the default when unset or blank', () => {
    expect(readBoolean({}, 'CAIRN_KEEP_LOCAL')).toBe(false);
    expect(readBoolean({ CAIRN_KEEP_LOCAL: '  ' }, 'CAIRN_KEEP_LOCAL', true)).toBe(true);
  });

  it.each(['CAIRN_KEEP_LOCAL', 'CAIRN_AUDIT', 'CAIRN_RETENTION_DROP_BRANCHES'] as const)(
    'refuses a bad value of %s at start, naming it',
    (name) => {
      for (const value of ['on', 'ture', '2', 'y']) {
        const error = configError({ CAIRN_API_KEYS: KEYS, [name]: value });
        expect(error.setting).toBe(name);
        expect(error.message).toContain(name);
        expect(error.message).toMatch(/must be true or false/);
      }
    },
  );
});
