import { InvalidArgumentError } from '../errors.js';
import { isValidTenantId, TENANT_ID_RULE } from '../fields.js';

/**
 * Tenant ids, in one place: what every route, setting, job input and stored registry accepts as a
 * tenant. Tenant ids name folders (locally) and are hashed into container and blob names (on Blob).
 */

// The rule itself is the protocol's (shared/protocol/fields.ts), where the route specs check it.
export { isValidTenantId, TENANT_ID_PATTERN, TENANT_ID_RULE } from '../fields.js';

/** Throws a 400 `InvalidArgumentError` naming `field` unless `tenant` is a tenant id. */
export function checkTenantId(tenant: unknown, field = 'tenant'): asserts tenant is string {
  if (typeof tenant !== 'string' || !isValidTenantId(tenant)) {
    throw new InvalidArgumentError(field, TENANT_ID_RULE);
  }
}

/** A tenant id in a request body or query (zod), refused with {@link TENANT_ID_RULE}. */
export { TenantId as tenantIdSchema } from '../fields.js';
