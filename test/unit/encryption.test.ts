import { generateKeyPairSync, randomBytes } from 'node:crypto';

import { beforeEach, describe, expect, it } from 'vitest';

import { loadConfig } from '../../shared/config';
import { Encryption, KEY_CHECK_KEY } from '../../shared/crypto/encryption';
import { type EncryptionKey, parseEncryptionKeys } from '../../shared/crypto/encryptionKeys';
import { RollbackWatch } from '../../shared/crypto/rollbackWatch';
import { canonicalPlace, SEAL_OVERHEAD, sealedKeyId, sealWith } from '../../shared/crypto/sealedFormat';
import type { ValuePlace } from '../../shared/crypto/valueCodec';
import { ConfigurationError, IntegrityError, InternalError } from '../../shared/protocol/errors';
import type { KeyValueStoreFactory } from '../../shared/storage/keyValueStore';
import { LocalKeyValueStoreFactory } from '../../shared/storage/local/localKeyValueStore';
import { tempDir } from '../support/cleanup';

const API_KEYS = `dev:${'a'.repeat(64)}:admin`;
const hex = () => randomBytes(32).toString('hex');
const key = (id: string): EncryptionKey => ({ id, key: randomBytes(32) });

function configError(env: Record<string, string>): ConfigurationError {
  try {
    loadConfig({ CAIRN_API_KEYS: API_KEYS, ...env }, '/srv/app');
  } catch (error) {
    if (error instanceof ConfigurationError) return error;
    throw error;
  }
  throw new Error('expected a ConfigurationError');
}

function thrown(action: () => unknown): unknown {
  try {
    action();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

describe('CAIRN_ENCRYPTION_KEYS', () => {
  it('reads <id>:<64 hex> entries in order (the first seals); blank is off', () => {
    const [a, b] = [hex(), hex()];
    const keys = parseEncryptionKeys(` k2:${a} , k1:${b.toUpperCase()} `);
    expect(keys.map((k) => k.id)).toEqual(['k2', 'k1']);
    expect(keys[0]?.key.toString('hex')).toBe(a);
    expect(keys[1]?.key.toString('hex')).toBe(b);
    expect(parseEncryptionKeys(undefined)).toEqual([]);
    expect(loadConfig({ CAIRN_API_KEYS: API_KEYS, CAIRN_ENCRYPTION_KEYS: '   ' }).encryption.keys).toEqual(
      [],
    );
  });

  it.each([
    ['no colon', () => `k1${hex()}`, /entry 1: expected <id>:<64 hex digits>/],
    ['short key', () => `k1:${'ab'.repeat(31)}`, /entry 1: expected <id>:<64 hex digits>/],
    ['not hex', () => `k1:${'zz'.repeat(32)}`, /entry 1: expected/],
    ['bad id', () => `k/1:${hex()}`, /entry 1: the key id must be 1-32 characters/],
    ['long id', () => `${'k'.repeat(33)}:${hex()}`, /the key id must be 1-32/],
    ['empty entry', () => `k1:${hex()},,k2:${hex()}`, /entry 2 is empty/],
    ['duplicate id', () => `k1:${hex()},k1:${hex()}`, /entry 2: the key id k1 is listed twice/],
    [
      'same key twice',
      () => {
        const material = hex();
        return `k1:${material},k2:${material}`;
      },
      /entry 2: the same key is listed under two ids/,
    ],
  ])('stops the app naming the setting and the entry, never the key: %s', (_name, value, message) => {
    const text = value();
    const error = configError({ CAIRN_ENCRYPTION_KEYS: text });
    expect(error.setting).toBe('CAIRN_ENCRYPTION_KEYS');
    expect(error.message).toMatch(message);
    for (const part of text.split(/[,:]/).filter((part) => part.length >= 16)) {
      expect(error.message).not.toContain(part);
    }
  });

  it('refuses an unresolved Key Vault reference in any setting, naming it', () => {
    const reference = '@Microsoft.KeyVault(SecretUri=https://vault.example/secrets/cairn-encryption-keys/)';
    for (const setting of ['CAIRN_ENCRYPTION_KEYS', 'CAIRN_AUDIT_SIGNING_KEY', 'CAIRN_API_KEYS']) {
      const error = configError({ [setting]: reference });
      expect(error.setting).toBe(setting);
      expect(error.message).toMatch(/unresolved Key Vault reference/);
    }
  });

  it('CAIRN_ENCRYPT_TENANTS: tenant ids or *, only with keys', () => {
    const keys = `k1:${hex()}`;
    expect(
      loadConfig({ CAIRN_API_KEYS: API_KEYS, CAIRN_ENCRYPTION_KEYS: keys, CAIRN_ENCRYPT_TENANTS: 'a, b.c' })
        .encryption.tenantPolicy,
    ).toEqual(new Set(['a', 'b.c']));
    expect(
      loadConfig({ CAIRN_API_KEYS: API_KEYS, CAIRN_ENCRYPTION_KEYS: keys, CAIRN_ENCRYPT_TENANTS: '*' })
        .encryption.tenantPolicy,
    ).toBe('*');
    expect(configError({ CAIRN_ENCRYPT_TENANTS: 'a' }).message).toMatch(
      /^CAIRN_ENCRYPT_TENANTS: lists tenants, but CAIRN_ENCRYPTION_KEYS is empty/,
    );
    expect(configError({ CAIRN_ENCRYPTION_KEYS: keys, CAIRN_ENCRYPT_TENANTS: 'a,b/c' }).message).toMatch(
      /^CAIRN_ENCRYPT_TENANTS: entry 2/,
    );
  });
});

describe('audit settings', () => {
  const table = {
    CAIRN_TABLE_ENDPOINT: 'http://127.0.0.1:10002/devstoreaccount1',
    CAIRN_STORAGE_ACCOUNT_KEY: 'a2V5',
  };

  it('CAIRN_AUDIT needs the table endpoint on the Blob backend (not on the local one) and is true or false', () => {
    const blob = {
      CAIRN_BLOB_ENDPOINT: 'https://acct.blob.core.windows.net/',
      CAIRN_BLOB_CONTAINER: 'cairn',
      CAIRN_STORAGE_ACCOUNT_KEY: 'a2V5',
    };
    expect(configError({ CAIRN_AUDIT: 'true', ...blob }).setting).toBe('CAIRN_TABLE_ENDPOINT');
    // The local backend keeps the trail under its data folder.
    const local = loadConfig({ CAIRN_API_KEYS: API_KEYS, CAIRN_AUDIT: 'true' }, '/srv/app');
    expect(local.audit.enabled).toBe(true);
    expect(local.audit.tableService).toBeUndefined();
    expect(configError({ CAIRN_AUDIT: 'maybe', ...table }).setting).toBe('CAIRN_AUDIT');
    const config = loadConfig({ CAIRN_API_KEYS: API_KEYS, CAIRN_AUDIT: 'yes', ...table });
    expect(config.audit).toMatchObject({
      enabled: true,
      tableName: 'cairnaudit',
      signSchedule: '0 */5 * * * *',
    });
    expect(loadConfig({ CAIRN_API_KEYS: API_KEYS }).audit.enabled).toBe(false);
  });

  it('reads the signing key as PKCS#8 PEM or base64 DER, Ed25519 only', () => {
    const { privateKey } = generateKeyPairSync('ed25519');
    const pem = privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
    const der = privateKey.export({ format: 'der', type: 'pkcs8' }).toString('base64');
    for (const text of [pem, der]) {
      const signing = loadConfig({ CAIRN_API_KEYS: API_KEYS, CAIRN_AUDIT_SIGNING_KEY: text }).audit
        .signingKey;
      expect(signing?.asymmetricKeyType).toBe('ed25519');
    }
    const rsa = generateKeyPairSync('rsa', { modulusLength: 1024 })
      .privateKey.export({ format: 'der', type: 'pkcs8' })
      .toString('base64');
    expect(configError({ CAIRN_AUDIT_SIGNING_KEY: rsa }).message).toBe(
      'CAIRN_AUDIT_SIGNING_KEY: is not an Ed25519 key',
    );
    expect(configError({ CAIRN_AUDIT_SIGNING_KEY: 'not a key' }).message).toMatch(
      /^CAIRN_AUDIT_SIGNING_KEY: is not a PKCS#8 private key/,
    );
  });
});

describe('the sealed format', () => {
  const place: ValuePlace = { tenant: 't1', kind: 'kv', key: 'notes/a', version: '3' };

  it('authenticates the place as canonical JSON (keys in code-point order, version only when set)', () => {
    expect(canonicalPlace(place)).toBe('{"key":"notes/a","kind":"kv","tenant":"t1","version":"3"}');
    expect(canonicalPlace({ tenant: 't"1', kind: 'kv', key: 'é' })).toBe(
      '{"key":"é","kind":"kv","tenant":"t\\"1"}',
    );
  });

  it('has a fixed overhead, its key id in the header and no plaintext', () => {
    const plain = Buffer.from('MARKER-plaintext-MARKER');
    const sealed = sealWith(key('k-9.x_'), plain, place);
    expect(sealed.length).toBe(plain.length + SEAL_OVERHEAD);
    expect(sealedKeyId(sealed)).toBe('k-9.x_');
    expect(sealed.includes(plain)).toBe(false);
    expect(sealedKeyId(plain)).toBeNull();
    // A fresh IV every time: the same value sealed twice differs.
    expect(sealWith(key('k1'), plain, place).equals(sealWith(key('k1'), plain, place))).toBe(false);
  });
});

describe('the codec and the key check', () => {
  let stores: KeyValueStoreFactory;
  beforeEach(() => {
    stores = new LocalKeyValueStoreFactory(tempDir('keys'), 1024 * 1024);
  });

  const ready = async (keys: EncryptionKey[]) => {
    const encryption = new Encryption({ keys, kvStores: stores });
    await encryption.check();
    return encryption.codec;
  };
  const refusal = async (keys: EncryptionKey[]) => {
    const error = await new Encryption({ keys, kvStores: stores }).check().then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(ConfigurationError);
    return (error as ConfigurationError).message;
  };
  const place: ValuePlace = { tenant: 't1', kind: 'thread.value', key: 'd/t/i/v/n/c1/cx/id' };

  it('opens only at the place it sealed for: another tenant, kind, key or version fails', async () => {
    const codec = await ready([key('k1')]);
    const sealed = codec.seal(Buffer.from('secret'), place);
    expect(codec.open(sealed, place).toString()).toBe('secret');
    for (const other of [
      { ...place, tenant: 't2' },
      { ...place, kind: 'thread.checkpoint' },
      { ...place, key: `${place.key}x` },
      { ...place, version: '1' },
    ]) {
      expect(thrown(() => codec.open(sealed, other))).toBeInstanceOf(IntegrityError);
    }
    const flipped = Buffer.from(sealed);
    flipped.writeUInt8((flipped.at(-20) ?? 0) ^ 1, flipped.length - 20);
    expect(thrown(() => codec.open(flipped, place))).toBeInstanceOf(IntegrityError);
  });

  it('refuses plain bytes when keys are configured, and sealed bytes when none is', async () => {
    const k1 = key('k1');
    const codec = await ready([k1]);
    expect(String(thrown(() => codec.open(Buffer.from('json\n"x"'), place)))).toMatch(/is not sealed/);
    const other = new LocalKeyValueStoreFactory(tempDir('keys'), 1024);
    const plainEncryption = new Encryption({ keys: [], kvStores: other });
    await plainEncryption.check();
    expect(plainEncryption.codec.encrypts).toBe(false);
    expect(plainEncryption.codec.open(Buffer.from('json\n"x"'), place).toString()).toBe('json\n"x"');
    expect(
      String(thrown(() => plainEncryption.codec.open(sealWith(k1, Buffer.from('x'), place), place))),
    ).toMatch(/is sealed, but no encryption key is configured/);
  });

  it('a value moved to another key (its header naming another configured key) fails', async () => {
    const [k2, k1] = [key('k2'), key('k1')];
    const codec = await ready([k2, k1]);
    const sealed = codec.seal(Buffer.from('secret'), place);
    expect(codec.keyIdOf(sealed)).toBe('k2');
    const moved = Buffer.from(sealed);
    moved.write('k1', 6, 'latin1');
    expect(codec.keyIdOf(moved)).toBe('k1');
    expect(thrown(() => codec.open(moved, place))).toBeInstanceOf(IntegrityError);
  });

  it('a new first key seals while values of the old key still open; the record learns the new key', async () => {
    const k1 = key('k1');
    const old = (await ready([k1])).seal(Buffer.from('old value'), place);
    const k2 = key('k2');
    const codec = await ready([k2, k1]);
    const fresh = codec.seal(Buffer.from('new value'), place);
    expect([codec.keyIdOf(fresh), codec.keyIdOf(old)]).toEqual(['k2', 'k1']);
    expect(codec.open(old, place).toString()).toBe('old value');
    const record = JSON.parse(
      (await stores.forTenant('@cairn').read(KEY_CHECK_KEY))?.value.toString() ?? '{}',
    ) as { keys: Record<string, string>; sealedWith: string[] };
    expect(Object.keys(record.keys).sort()).toEqual(['k1', 'k2']);
    expect(record.sealedWith).toEqual(['k1', 'k2']);
    // Once k1's values are re-sealed, k1 may go: k2 alone still matches the record.
    expect((await ready([k2])).open(fresh, place).toString()).toBe('new value');
  });

  it('refuses to run on keys the data was not written with, or without keys once data was', async () => {
    const k1 = key('k1');
    await ready([k1]);
    expect(await refusal([])).toMatch(
      /^CAIRN_ENCRYPTION_KEYS: is empty, but data was written with encryption keys \(ids k1\)/,
    );
    expect(await refusal([{ id: 'k1', key: randomBytes(32) }])).toMatch(
      /key k1 is not the key data was written with under that id/,
    );
    expect(await refusal([key('k3')])).toMatch(
      /none of the configured keys \(ids k3\) is a key data was written with \(ids k1\)/,
    );
    // A refused check changed nothing: the right key still passes.
    await ready([k1]);
  });

  it('runs without a record and writes none when no key is configured; seals nothing before the check', async () => {
    await ready([]);
    expect(await stores.forTenant('@cairn').read(KEY_CHECK_KEY)).toBeNull();
    const unchecked = new Encryption({ keys: [key('k1')], kvStores: stores });
    expect(thrown(() => unchecked.codec.seal(Buffer.from('x'), place))).toBeInstanceOf(InternalError);
    await unchecked.codec.prepare('t1');
    expect(unchecked.codec.seal(Buffer.from('x'), place).length).toBe(1 + SEAL_OVERHEAD);
  });

  it('registers each tenant once before its first sealed value, for the rewrap job', async () => {
    const encryption = new Encryption({ keys: [key('k1')], kvStores: stores });
    await Promise.all([encryption.prepare('b'), encryption.prepare('a'), encryption.prepare('b')]);
    const tenants: string[] = [];
    for await (const tenant of encryption.sealedTenants()) tenants.push(tenant);
    expect(tenants).toEqual(['a', 'b']);
  });

  it('refuses a policy that drops a tenant whose key/value values or archives were sealed', async () => {
    const k1 = key('k1');
    const policy = new Set(['a', 'b']);
    const encryption = new Encryption({ keys: [k1], kvStores: stores, policy });
    // `b` sealed only thread values (prepare): dropping it from the policy seals nothing less.
    await Promise.all([encryption.prepareOwnBytes('a'), encryption.prepare('b')]);
    const check = (tenants: '*' | Set<string>) =>
      new Encryption({ keys: [k1], kvStores: stores, policy: tenants }).check().then(
        () => 'started',
        (error: unknown) => (error instanceof ConfigurationError ? error.message : String(error)),
      );
    expect(await check(new Set(['a']))).toBe('started');
    expect(await check('*')).toBe('started');
    expect(await check(new Set(['b']))).toBe(
      'CAIRN_ENCRYPT_TENANTS: does not list tenant a, whose key/value values or session archives are sealed; list it again (sealing cannot be turned off for a tenant)',
    );
    expect(await check(new Set())).toMatch(/^CAIRN_ENCRYPT_TENANTS: does not list tenant a,/);
  });
});

describe('rollback watch of sealed key/value values', () => {
  const k1 = { id: 'k1', key: randomBytes(32) };
  const place: ValuePlace = { tenant: 't1', kind: 'kv', key: 'roll' };
  const seal = (text: string) => sealWith(k1, Buffer.from(text), place);
  const observe = (watch: RollbackWatch, sealed: Buffer | null) =>
    watch.observed('t1\nroll', watch.start(), sealed);
  const accused = (run: () => void) => expect(run).toThrow(/older version put back/);

  it('refuses a superseded version found again, also after the key was found absent', () => {
    const watch = new RollbackWatch();
    const [v1, v2] = [seal('one'), seal('two')];
    observe(watch, v1);
    observe(watch, v2);
    accused(() => observe(watch, v1));
    observe(watch, v2);
    observe(watch, null);
    accused(() => observe(watch, v2));
    // Another key, and the key's new versions, are not concerned.
    watch.observed('t1\nother', watch.start(), v1);
    observe(watch, seal('three'));
  });

  it('never accuses an operation that overlapped the one that saw the newer version', () => {
    const watch = new RollbackWatch();
    const [v1, v2] = [seal('one'), seal('two')];
    observe(watch, v1);
    const slowRead = watch.start();
    observe(watch, v2); // a write that completes while the read is in flight
    expect(() => watch.observed('t1\nroll', slowRead, v1)).not.toThrow();
    accused(() => observe(watch, v1));
  });
});
