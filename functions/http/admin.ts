import { ForbiddenError } from '#shared/protocol/errors';

import type { AuthenticatedCall } from './pipeline';

/**
 * Refuses a caller whose key is not an admin's (403), before anything is read or written. `what`
 * names the routes in the message: "`what` are for admins".
 */
export function requireAdmin(call: AuthenticatedCall, what: string): void {
  if (!call.principal.admin) throw new ForbiddenError(`${what} are for admins`);
}
