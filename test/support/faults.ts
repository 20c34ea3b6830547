import { expect } from 'vitest';

import type { client } from './app';

/**
 * Sends `init` to `path` while the storage is down and expects what the API promises for a storage
 * fault: 503 `storage_unavailable` with `Retry-After: 1`, never 404, within 10 s.
 */
export async function expectStorageUnavailable(
  call: ReturnType<typeof client>,
  path: string,
  init: RequestInit,
): Promise<void> {
  const started = Date.now();
  const response = await call(path, { ...init, signal: AbortSignal.timeout(15_000) });
  const elapsed = Date.now() - started;
  expect(response.status, `${init.method} ${path}`).toBe(503);
  expect(response.headers.get('retry-after')).toBe('1');
  expect(((await response.json()) as { error: { code: string } }).error.code).toBe('storage_unavailable');
  expect(elapsed, `${init.method} ${path} took ${elapsed} ms`).toBeLessThan(10_000);
}
