import type { KeyValueStoreFactory } from '../storage/keyValueStore';
import { TenantRegistry } from '../tenants/tenantRegistry';

/**
 * The tenants the emailWindowPoll timer serves (every tenant that initialised its cursor,
 * `POST /api/poll/email-cursor/init`), under `email-poll-tenants/` of the tenant registry.
 */
export class EmailPollTenantRegistry extends TenantRegistry {
  constructor(kvStores: KeyValueStoreFactory) {
    super(kvStores, 'email-poll-tenants/');
  }
}
