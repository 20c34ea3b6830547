import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import {
  apiKeysSetting,
  backendSettings,
  client,
  newTenant,
  type RunningApp,
  startApp,
} from '../support/app';
import { azurite } from '../support/azurite';

/**
 * A part of Cairn that a deployment leaves off answers the same way on every one of its routes:
 * 501 `not_configured`, with `setting` and the message naming what to set (docs/api.md). Never 400
 * (the request was right), never 500 `internal` (nothing is broken), never 409. Every answer is
 * also checked against the OpenAPI document, which lists the 501 for each of these operations.
 */

interface Request {
  readonly path: string;
  readonly init?: RequestInit;
}

async function expectNotConfigured(
  call: ReturnType<typeof client>,
  { path, init }: Request,
  setting: string,
): Promise<void> {
  const route = `${init?.method ?? 'GET'} ${path}`;
  const response = await call(path, init);
  const body = (await response.json()) as { error: { code: string; message: string; setting: string } };
  expect({ route, status: response.status, code: body.error.code, setting: body.error.setting }).toEqual({
    route,
    status: 501,
    code: 'not_configured',
    setting,
  });
  expect(body.error.message, route).toContain(setting);
  expect(response.headers.get('retry-after'), route).toBeNull();
}

const json = (method: string, body: unknown): RequestInit => ({ method, body: JSON.stringify(body) });
const fact = `/api/memory/facts?${new URLSearchParams({ namespace: 'notes', key: 'k1' }).toString()}`;

describe('parts left off on the Blob backend: no table service, no audit trail, no encryption keys', () => {
  const tenant = newTenant('unconfigured');
  const ops = newTenant('unconfigured-ops', true);
  let app: RunningApp;

  beforeAll(async () => {
    app = await startApp({
      CAIRN_API_KEYS: apiKeysSetting([tenant, ops]),
      ...backendSettings('blob', azurite().blobEndpoint),
    });
  });
  afterAll(() => app.stop());

  it('memory routes answer 501 naming CAIRN_TABLE_ENDPOINT', async () => {
    const call = client(app.url, tenant.key);
    const requests: Request[] = [
      { path: fact, init: json('PUT', { value: { a: 1 } }) },
      { path: fact },
      { path: fact, init: { method: 'DELETE' } },
      { path: '/api/memory/search', init: json('POST', { namespace: 'notes', text: 'a' }) },
      { path: '/api/memory/namespaces' },
      { path: '/api/memory/namespaces?namespace=notes', init: { method: 'DELETE' } },
    ];
    for (const request of requests) await expectNotConfigured(call, request, 'CAIRN_TABLE_ENDPOINT');
  });

  it('session archive routes answer 501 naming CAIRN_TABLE_ENDPOINT, and nothing is written', async () => {
    const call = client(app.url, tenant.key);
    const tail = Buffer.from('one tail of a session\n');
    const requests: Request[] = [
      { path: '/api/sessions' },
      { path: '/api/sessions/s-off' },
      { path: '/api/sessions/s-off/objects/tails/c1/g1', init: { method: 'PUT', body: tail } },
      { path: '/api/sessions/s-off/objects/tails/c1/g1' },
      {
        path: '/api/sessions/s-off/checkpoints',
        init: json('POST', { checkpointId: 'c1', parent: null, files: [] }),
      },
      { path: '/api/sessions/s-off/checkpoints/latest' },
      { path: '/api/sessions/s-off/checkpoints/c1/files/events.jsonl' },
    ];
    for (const request of requests) await expectNotConfigured(call, request, 'CAIRN_TABLE_ENDPOINT');
    // The tenant wrote nothing anywhere: its key/value space is as empty as a new tenant's.
    expect(await (await call('/api/keys')).json()).toEqual({ keys: [], cursor: null });
  });

  it('audit routes answer 501 naming CAIRN_AUDIT', async () => {
    const call = client(app.url, tenant.key);
    for (const path of ['/api/audit/records', '/api/audit/verify', '/api/audit/heads']) {
      await expectNotConfigured(call, { path }, 'CAIRN_AUDIT');
    }
  });

  it('a rewrap answers 501 naming CAIRN_ENCRYPTION_KEYS', async () => {
    await expectNotConfigured(
      client(app.url, ops.key),
      { path: '/api/encryption/rewraps', init: json('POST', {}) },
      'CAIRN_ENCRYPTION_KEYS',
    );
  });
});

describe('parts left off on the local backend', () => {
  const tenant = newTenant('unconfigured-local');
  const ops = newTenant('unconfigured-local-ops', true);
  let app: RunningApp;

  beforeAll(async () => {
    app = await startApp({
      CAIRN_API_KEYS: apiKeysSetting([tenant, ops]),
      ...backendSettings('local', ''),
    });
  });
  afterAll(() => app.stop());

  it('a migration answers 501 naming CAIRN_BLOB_ENDPOINT: its target must be the Blob backend', async () => {
    await expectNotConfigured(
      client(app.url, ops.key),
      {
        path: '/api/migrations',
        init: json('POST', { tenant: 't', sources: [{ root: '/tmp', prefix: '' }] }),
      },
      'CAIRN_BLOB_ENDPOINT',
    );
  });

  it('audit routes answer 501 naming CAIRN_AUDIT; memory and sessions are not among them here', async () => {
    const call = client(app.url, tenant.key);
    await expectNotConfigured(call, { path: '/api/audit/records' }, 'CAIRN_AUDIT');
    // The local backend keeps memory facts on its own disk: configured, so not 501.
    expect((await call(fact)).status).toBe(404);
  });
});
