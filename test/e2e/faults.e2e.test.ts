import { describe, expect, it } from 'vitest';

import { backendSettings } from '../support/app';
import { appOnOwnStorage, expectStorageUnavailable } from '../support/faults';

/**
 * Storage faults through HTTP: with its own Azurite stopped under a running app, every key/value
 * route answers 503 storage_unavailable (never 404, never a hang past 10 s), and the same app
 * serves again once Azurite is back on the same ports, without a restart.
 */
describe('storage faults on the Blob backend', () => {
  const suite = appOnOwnStorage((storage) => backendSettings('blob', storage.blobEndpoint));

  it('answers 503 while the storage is down and recovers when it is back', async () => {
    expect((await suite.call('/api/kv/state/x', { method: 'PUT', body: 'before' })).status).toBe(201);
    await suite.stopStorage();

    const requests: [string, RequestInit][] = [
      ['/api/kv/state/x', { method: 'GET' }],
      ['/api/kv/state/missing', { method: 'GET' }],
      ['/api/kv/state/x', { method: 'PUT', body: 'during' }],
      ['/api/kv/state/x', { method: 'POST', body: 'during' }],
      ['/api/kv/state/x', { method: 'DELETE' }],
      ['/api/keys', { method: 'GET' }],
    ];
    for (const [path, init] of requests) {
      await expectStorageUnavailable(suite.call, path, init);
      const head = await suite.call(path, { method: 'HEAD' });
      if (init.method === 'GET' && path.startsWith('/api/kv')) expect(head.status).toBe(503);
    }

    await suite.restartStorage();
    // The restarted emulator is empty (in memory): the app must make the tenant's container again.
    expect((await suite.call('/api/kv/state/x', { method: 'PUT', body: 'after' })).status).toBe(201);
    const read = await suite.call('/api/kv/state/x');
    expect(read.status).toBe(200);
    expect(await read.text()).toBe('after');
    expect(suite.app.output()).toContain('storage_unavailable');
  });

  it('answers 503 within 10 s when the storage hangs, and serves again when it resumes', async () => {
    expect((await suite.call('/api/kv/state/hang', { method: 'PUT', body: 'before' })).status).toBe(201);
    process.kill(suite.storage.pid, 'SIGSTOP');
    const started = Date.now();
    const response = await suite.call('/api/kv/state/hang', { signal: AbortSignal.timeout(20_000) });
    const elapsed = Date.now() - started;
    expect(response.status).toBe(503);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('storage_unavailable');
    expect(elapsed).toBeLessThan(10_000);
    process.kill(suite.storage.pid, 'SIGCONT');
    const read = await suite.call('/api/kv/state/hang');
    expect(read.status).toBe(200);
    expect(await read.text()).toBe('before');
  });
});
