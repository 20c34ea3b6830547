import { afterAll, afterEach, beforeAll, expect } from 'vitest';

import type { Azurite } from '../../dev/azurite';
import { apiKeysSetting, client, newTenant, type RunningApp, startApp, type TestTenant } from './app';
import { startAzurite } from './cleanup';
import { scaled } from './timeouts';

/**
 * Sends `init` to `path` while the storage is down and expects what the API promises for a storage
 * fault: 503 `storage_unavailable` with `Retry-After: 1`, never 404. That it answers at all (the
 * app's storage deadline, not a hang) is held by the request's own deadline, scaled to the machine
 * like every test timeout; how fast it answers is the bench's to measure, not a test's.
 */
export async function expectStorageUnavailable(
  call: ReturnType<typeof client>,
  path: string,
  init: RequestInit,
): Promise<void> {
  const response = await call(path, { ...init, signal: AbortSignal.timeout(scaled(15_000)) });
  expect(response.status, `${init.method} ${path}`).toBe(503);
  expect(response.headers.get('retry-after')).toBe('1');
  expect(((await response.json()) as { error: { code: string } }).error.code).toBe('storage_unavailable');
}

/** An app served on an Azurite of its own, which a test may stop, freeze and start again. */
export interface AppOnOwnStorage {
  readonly tenant: TestTenant;
  readonly storage: Azurite;
  readonly app: RunningApp;
  /** The tenant's HTTP client of the app. */
  readonly call: ReturnType<typeof client>;
  /** Stops the storage (the app keeps running). */
  stopStorage(): Promise<void>;
  /** Starts the storage again on the same ports: empty, as it keeps its data in memory. */
  restartStorage(): Promise<void>;
}

/**
 * Registers the hooks of a fault suite: before it, an Azurite of the suite's own and the app on it
 * with `settings(storage)`; after each test, a frozen Azurite is thawed (never left behind a failed
 * assertion); after the suite, both are stopped.
 */
export function appOnOwnStorage(settings: (storage: Azurite) => Record<string, string>): AppOnOwnStorage {
  const tenant = newTenant('faulty');
  let storage: Azurite | undefined;
  let app: RunningApp | undefined;
  let call: ReturnType<typeof client> | undefined;
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('the suite has not started its app');
    return value;
  };
  beforeAll(async () => {
    storage = await startAzurite();
    // The app's own storage deadline (8 s by default), which these tests measure.
    app = await startApp({
      CAIRN_API_KEYS: apiKeysSetting([tenant]),
      CAIRN_STORAGE_TIMEOUT_MS: '8000',
      ...settings(storage),
    });
    call = client(app.url, tenant.key);
  });
  afterEach(() => {
    if (storage !== undefined && storage.pid !== 0) process.kill(storage.pid, 'SIGCONT');
  });
  afterAll(async () => {
    await app?.stop();
    await storage?.stop();
  });
  return {
    tenant,
    get storage() {
      return started(storage);
    },
    get app() {
      return started(app);
    },
    get call() {
      return started(call);
    },
    stopStorage: () => started(storage).stop(),
    async restartStorage() {
      storage = await startAzurite({ ports: started(storage).ports });
    },
  };
}
