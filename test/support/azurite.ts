import { inject } from 'vitest';

import type { AzuriteInfo } from './globalSetup';

/** The endpoints of the run's Azurite, started by the global setup. */
export function azurite(): AzuriteInfo {
  return inject('azurite' as never);
}
