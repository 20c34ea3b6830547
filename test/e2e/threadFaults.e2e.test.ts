import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import type { Azurite } from '../../dev/azurite';
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

/**
 * Storage faults on the thread routes: with the app's own Azurite stopped (Blob backend), every
 * route answers 503 storage_unavailable with Retry-After, never 404 and never a 409 made up from
 * a missing record, within 10 s; the app serves again once Azurite is back on the same ports.
 */
describe('thread routes while the storage is down', () => {
  const tenant = newTenant('faulty');
  let storage: Azurite;
  let app: RunningApp;
  let call: ReturnType<typeof client>;

  afterEach(() => {
    if (storage.pid !== 0) process.kill(storage.pid, 'SIGCONT');
  });
  beforeAll(async () => {
    storage = await startAzurite();
    app = await startApp({
      CAIRN_API_KEYS: apiKeysSetting([tenant]),
      ...backendSettings('blob', storage.blobEndpoint),
    });
    call = client(app.url, tenant.key);
  });
  afterAll(async () => {
    await app.stop();
    await storage.stop();
  });

  it('answers 503, never 404, and serves again when the storage is back', async () => {
    const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64');
    const checkpoint = (id: string, parent: string | null, runId?: string) =>
      JSON.stringify({
        checkpointId: id,
        parent,
        ...(runId === undefined ? {} : { runId }),
        checkpoint: { type: 'json', data: b64({ id }) },
        channelVersions: { m: id },
        values: { m: { type: 'json', data: b64(id) } },
      });
    expect(
      (await call('/api/threads/known/checkpoints', { method: 'POST', body: checkpoint('c1', null) })).status,
    ).toBe(201);
    const run = await call('/api/threads/known/runs', { method: 'POST', body: '{"onBusy":"reject"}' });
    const { runId } = (await run.json()) as { runId: string };
    await storage.stop();

    const requests: [string, RequestInit][] = [
      ['/api/threads', { method: 'GET' }],
      ['/api/threads/known', { method: 'GET' }],
      ['/api/threads/unknown', { method: 'GET' }],
      ['/api/threads/new', { method: 'PUT' }],
      ['/api/threads/known', { method: 'DELETE' }],
      ['/api/threads/known/checkpoints', { method: 'POST', body: checkpoint('c2', 'c1', runId) }],
      ['/api/threads/unknown/checkpoints', { method: 'POST', body: checkpoint('c1', null) }],
      ['/api/threads/known/checkpoints', { method: 'GET' }],
      ['/api/threads/known/checkpoints/latest', { method: 'GET' }],
      ['/api/threads/known/checkpoints/c1', { method: 'GET' }],
      ['/api/threads/unknown/checkpoints/latest', { method: 'GET' }],
      [
        '/api/threads/known/checkpoints/c1/writes',
        {
          method: 'POST',
          body: JSON.stringify({
            taskId: 't',
            runId,
            writes: [{ channel: 'm', idx: 0, type: 'json', data: b64(1) }],
          }),
        },
      ],
      ['/api/threads/known/rewind', { method: 'POST', body: JSON.stringify({ checkpointId: 'c1', runId }) }],
      ['/api/threads/known/runs', { method: 'POST', body: '{"onBusy":"wait","busyTimeout":5}' }],
      [`/api/threads/known/runs/${runId}`, { method: 'GET' }],
      [`/api/threads/known/runs/${runId}/heartbeat`, { method: 'POST' }],
      [`/api/threads/known/runs/${runId}/finish`, { method: 'POST', body: '{"status":"finished"}' }],
    ];
    for (const [path, init] of requests) await expectStorageUnavailable(call, path, init);

    storage = await startAzurite({ ports: storage.ports });
    // The restarted emulator is empty (in memory): the thread space's container is made again.
    expect((await call('/api/threads/known', { method: 'PUT' })).status).toBe(201);
    expect(
      (await call('/api/threads/known/checkpoints', { method: 'POST', body: checkpoint('c1', null) })).status,
    ).toBe(201);
    const latest = await call('/api/threads/known/checkpoints/latest');
    expect(latest.status).toBe(200);
    expect(app.output()).toContain('storage_unavailable');
  });
});
