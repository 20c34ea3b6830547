import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { Azurite } from '../../dev/azurite';
import { PART_BYTES } from '../../shared/snapshots/identifiers';
import {
  apiKeysSetting,
  backendSettings,
  client,
  newTenant,
  type RunningApp,
  startApp,
} from '../support/app';
import { startAzurite } from '../support/cleanup';
import { expectStorageUnavailable } from '../support/faults';
import { buildSnapshot, newKeyPair } from '../unit/snapshotTestKit';

/**
 * Storage faults on the snapshot routes: with the app's own Azurite stopped (the Blob backend holds
 * every snapshot byte and the trusted keys), every route answers 503 storage_unavailable with
 * Retry-After, never 404, within 10 s, for snapshots that exist and for ones that do not; the app
 * serves again once Azurite is back on the same ports. (On the local backend the snapshot store is
 * the filesystem, whose faults the contract tests cover.)
 */
describe('snapshot faults on the blob backend', () => {
  const tenant = newTenant('faulty');
  const admin = newTenant('admin', true);
  const key = newKeyPair();
  let storage: Azurite;
  let app: RunningApp;
  let call: ReturnType<typeof client>;

  beforeAll(async () => {
    storage = await startAzurite();
    app = await startApp({
      CAIRN_API_KEYS: apiKeysSetting([tenant, admin]),
      CAIRN_STORAGE_TIMEOUT_MS: '2000',
      ...backendSettings('blob', storage.blobEndpoint),
    });
    call = client(app.url, tenant.key);
  });
  afterAll(async () => {
    await app.stop();
    await storage.stop();
  });

  it('answers 503, never 404, while the storage is down, and serves again when it is back', async () => {
    const built = buildSnapshot('w1', [{ path: 'f', bytes: Buffer.from('content') }], key.privateKey);
    const [sha256, part, bytes] = built.parts[0]!;
    const partRoute = `/api/workspaces/w1/snapshots/objects/${sha256}/${part}`;
    expect((await call(partRoute, { method: 'PUT', body: bytes })).status).toBe(201);
    const publish = JSON.stringify({
      manifest: built.manifest.toString('base64'),
      signature: built.signature.toString('base64'),
      parent: null,
    });
    expect((await call('/api/workspaces/w1/snapshots', { method: 'POST', body: publish })).status).toBe(201);
    await storage.stop();

    const unknown = 'e'.repeat(64);
    const requests: [string, RequestInit][] = [
      [partRoute, { method: 'GET' }],
      [`/api/workspaces/w1/snapshots/objects/${unknown}/0`, { method: 'GET' }],
      [
        `/api/workspaces/w1/snapshots/objects/${unknown}/1`,
        { method: 'PUT', body: Buffer.alloc(PART_BYTES) },
      ],
      ['/api/workspaces/w1/snapshots', { method: 'GET' }],
      ['/api/workspaces/w1/snapshots', { method: 'POST', body: publish }],
      ['/api/workspaces/w1/snapshots/latest', { method: 'GET' }],
      [`/api/workspaces/w1/snapshots/${built.id}`, { method: 'GET' }],
      [`/api/workspaces/w1/snapshots/${unknown}`, { method: 'GET' }],
      [`/api/workspaces/w1/snapshots/${built.id}`, { method: 'DELETE' }],
      [`/api/snapshots/${built.id}`, { method: 'GET' }],
      [`/api/snapshots/${unknown}`, { method: 'GET' }],
    ];
    for (const [path, init] of requests) await expectStorageUnavailable(call, path, init);
    const head = await call(partRoute, { method: 'HEAD' });
    expect(head.status).toBe(503);
    const asAdmin = client(app.url, admin.key);
    await expectStorageUnavailable(asAdmin, `/api/snapshot-keys/${tenant.tenant}`, { method: 'GET' });

    storage = await startAzurite({ ports: storage.ports });
    // The restarted emulator is empty (in memory): the app makes its container again.
    expect((await call(partRoute, { method: 'PUT', body: bytes })).status).toBe(201);
    expect((await call('/api/workspaces/w1/snapshots', { method: 'POST', body: publish })).status).toBe(201);
    expect((await call(`/api/snapshots/${built.id}`)).status).toBe(200);
  });
});
