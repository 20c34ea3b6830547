import type { HttpRequest } from '@azure/functions';

import { chatIdProblem } from '#shared/coordination/chatIds';
import { InvalidArgumentError } from '#shared/errors';
import type { KeyValueStore } from '#shared/storage/keyValueStore';

import type { AuthenticatedCall } from '../http/pipeline';

/**
 * What the fleet-coordination routes share (docs/coordination.md): everything lives in the caller's
 * tenant's key/value space; handlers parse and validate (400 naming the field, 413 first), call
 * shared/coordination, and shape the answer; reads that fail report `unresolved` rather than 503.
 */

/** Body limits, checked before anything else about a body (413, nothing written). */
export const BODY_LIMITS = {
  emailCursor: 16 * 1024,
  watchedChats: 256 * 1024,
  chatClaims: 128 * 1024,
  promise: 16 * 1024,
  interaction: 64 * 1024,
} as const;

export { chatId, text, timestamp } from '#shared/coordination/wire';

export function storeOf(call: AuthenticatedCall): KeyValueStore {
  return call.services.kvStores.forTenant(call.principal.tenant);
}

/** The chat id in the route, validated (400 `chatId`). */
export function chatIdOf(request: HttpRequest): string {
  const id = request.params['chatId'] ?? '';
  const problem = chatIdProblem(id);
  if (problem !== null) throw new InvalidArgumentError('chatId', problem);
  return id;
}

export function logUnresolved(call: AuthenticatedCall, what: string, problem: string | undefined): void {
  call.log.warn({ what, problem }, 'coordination state unresolved; nothing was claimed or written');
}
