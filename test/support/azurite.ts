import { inject } from 'vitest';

import type { AzuriteInfo } from './globalSetup';

/**
 * The endpoints of this worker's Azurite (the global setup starts one per vitest worker; a file
 * runs in one worker, so all its tests and the apps they start share one).
 */
export function azurite(): AzuriteInfo {
  const all = inject('azurites' as never) as AzuriteInfo[];
  const pool = Number(process.env['VITEST_POOL_ID'] ?? '1');
  const index = Number.isInteger(pool) && pool >= 1 ? (pool - 1) % all.length : 0;
  return all[index] as AzuriteInfo;
}
