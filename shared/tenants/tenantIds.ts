import { z } from 'zod';

import { InvalidArgumentError } from '../errors';

/**
 * Tenant ids, in one place: what every route, setting, job input and stored registry accepts as a
 * tenant. Tenant ids name folders (locally) and are hashed into container and blob names (on Blob).
 */

export const TENANT_ID_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;

/** What a tenant id must be, as error messages say it. */
export const TENANT_ID_RULE = 'must be 1-64 of [A-Za-z0-9._-]';

/** A tenant id: 1-64 characters of `[A-Za-z0-9._-]`; `.` and `..` are refused because tenants name folders. */
export function isValidTenantId(tenant: string): boolean {
  return TENANT_ID_PATTERN.test(tenant) && tenant !== '.' && tenant !== '..';
}

/** Throws a 400 `InvalidArgumentError` naming `field` unless `tenant` is a tenant id. */
export function checkTenantId(tenant: unknown, field = 'tenant'): asserts tenant is string {
  if (typeof tenant !== 'string' || !isValidTenantId(tenant)) {
    throw new InvalidArgumentError(field, TENANT_ID_RULE);
  }
}

/** A tenant id in a request body or query (zod), refused with {@link TENANT_ID_RULE}. */
export const tenantIdSchema = z.string().refine(isValidTenantId, TENANT_ID_RULE);
