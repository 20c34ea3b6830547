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
 * Storage faults through HTTP: with its own Azurite stopped under a running app, every key/value
 * route answers 503 storage_unavailable (never 404, never a hang past 10 s), and the same app
 * serves again once Azurite is back on the same ports, without a restart.
 */
describe('storage faults on the Blob backend', () => {
  afterEach(() => {
    // Never leave a frozen emulator behind a failed assertion.
    if (storage.pid !== 0) process.kill(storage.pid, 'SIGCONT');
  });

  const tenant = newTenant('faulty');
  let storage: Azurite;
  let app: RunningApp;
  let call: ReturnType<typeof client>;

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

  it('answers 503 while the storage is down and recovers when it is back', async () => {
    expect((await call('/api/kv/state/x', { method: 'PUT', body: 'before' })).status).toBe(201);
    await storage.stop();

    const requests: [string, RequestInit][] = [
      ['/api/kv/state/x', { method: 'GET' }],
      ['/api/kv/state/missing', { method: 'GET' }],
      ['/api/kv/state/x', { method: 'PUT', body: 'during' }],
      ['/api/kv/state/x', { method: 'POST', body: 'during' }],
      ['/api/kv/state/x', { method: 'DELETE' }],
      ['/api/keys', { method: 'GET' }],
    ];
    for (const [path, init] of requests) {
      await expectStorageUnavailable(call, path, init);
      const head = await call(path, { method: 'HEAD' });
      if (init.method === 'GET' && path.startsWith('/api/kv')) expect(head.status).toBe(503);
    }

    storage = await startAzurite({ ports: storage.ports });
    // The restarted emulator is empty (in memory): the app must make the tenant's container again.
    expect((await call('/api/kv/state/x', { method: 'PUT', body: 'after' })).status).toBe(201);
    const read = await call('/api/kv/state/x');
    expect(read.status).toBe(200);
    expect(await read.text()).toBe('after');
    expect(app.output()).toContain('storage_unavailable');
  });

  it('answers 503 within 10 s when the storage hangs, and serves again when it resumes', async () => {
    expect((await call('/api/kv/state/hang', { method: 'PUT', body: 'before' })).status).toBe(201);
    process.kill(storage.pid, 'SIGSTOP');
    const started = Date.now();
    const response = await call('/api/kv/state/hang', { signal: AbortSignal.timeout(20_000) });
    const elapsed = Date.now() - started;
    expect(response.status).toBe(503);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('storage_unavailable');
    expect(elapsed).toBeLessThan(10_000);
    process.kill(storage.pid, 'SIGCONT');
    const read = await call('/api/kv/state/hang');
    expect(read.status).toBe(200);
    expect(await read.text()).toBe('before');
  });
});
