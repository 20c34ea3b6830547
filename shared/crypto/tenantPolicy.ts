import { isValidTenantId } from '../protocol/tenants/tenantIds';

/**
 * The tenants whose own-format bytes are sealed (`CAIRN_ENCRYPT_TENANTS`): their key/value spaces
 * (sealedKeyValueStore.ts) and their session archives (shared/archive/sealedArchive.ts). A list of
 * tenant ids, or `*` for every tenant.
 */
export type TenantPolicy = '*' | ReadonlySet<string>;

/** Whether `policy` seals the key/value space and session archives of `tenant` (never the system namespace's). */
export function sealsTenant(policy: TenantPolicy, tenant: string): boolean {
  return isValidTenantId(tenant) && (policy === '*' || policy.has(tenant));
}
