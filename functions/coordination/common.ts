import type { KeyValueStore } from '#shared/storage/keyValueStore';

import type { AuthenticatedCall } from '../http/pipeline';

/**
 * What the fleet-coordination routes share (docs/coordination.md), declared in
 * shared/protocol/coordination.ts: everything lives in the caller's tenant's key/value space;
 * handlers get the validated input, call shared/coordination, and shape the answer; reads that
 * fail report `unresolved` rather than 503.
 */

export function storeOf(call: AuthenticatedCall): KeyValueStore {
  return call.services.kvStores.forTenant(call.principal.tenant);
}

export function logUnresolved(call: AuthenticatedCall, what: string, problem: string | undefined): void {
  call.log.warn({ what, problem }, 'coordination state unresolved; nothing was claimed or written');
}
