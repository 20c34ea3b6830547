import { describe, expect, it } from 'vitest';

import { PART_BYTES } from '../../shared/protocol/snapshots/identifiers';
import { apiKeysSetting, backendSettings, client, newTenant } from '../support/app';
import { appOnOwnStorage, expectStorageUnavailable } from '../support/faults';
import { buildSnapshot, newKeyPair } from '../support/snapshotTestKit';

/**
 * Storage faults on the snapshot routes: with the app's own Azurite stopped (the Blob backend holds
 * every snapshot byte and the trusted keys), every route answers 503 storage_unavailable with
 * Retry-After, never 404, within 10 s, for snapshots that exist and for ones that do not; the app
 * serves again once Azurite is back on the same ports. (On the local backend the snapshot store is
 * the filesystem, whose faults the contract tests cover.)
 */
describe('snapshot faults on the blob backend', () => {
  const admin = newTenant('admin', true);
  const key = newKeyPair();
  const suite = appOnOwnStorage((storage) => ({
    CAIRN_API_KEYS: apiKeysSetting([suite.tenant, admin]),
    CAIRN_STORAGE_TIMEOUT_MS: '2000',
    ...backendSettings('blob', storage.blobEndpoint),
  }));

  it('answers 503, never 404, while the storage is down, and serves again when it is back', async () => {
    const call = suite.call;
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
    await suite.stopStorage();

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
    const asAdmin = client(suite.app.url, admin.key);
    const keysRoute = `/api/snapshot-keys/${suite.tenant.tenant}`;
    await expectStorageUnavailable(asAdmin, keysRoute, { method: 'GET' });
    await expectStorageUnavailable(asAdmin, keysRoute, { method: 'PUT', body: '{"keys":[]}' });
    await expectStorageUnavailable(asAdmin, keysRoute, { method: 'DELETE' });

    await suite.restartStorage();
    // The restarted emulator is empty (in memory): the app makes its container again.
    expect((await call(partRoute, { method: 'PUT', body: bytes })).status).toBe(201);
    expect((await call('/api/workspaces/w1/snapshots', { method: 'POST', body: publish })).status).toBe(201);
    expect((await call(`/api/snapshots/${built.id}`)).status).toBe(200);
  });
});
