import { InternalError, PreconditionFailedError } from '../protocol/errors';
import { isValidTenantId } from '../protocol/tenants/tenantIds';
import type { KeyValueStore, KeyValueStoreFactory } from '../storage/keyValueStore';
import { SYSTEM_NAMESPACE } from './systemNamespace';

/**
 * Registries of tenants: e.g. the tenants whose email cursor the `emailWindowPoll` timer serves
 * (coordination/emailPollTenants.ts), and the tenants that stored sealed values (encryption at
 * rest: the `rewrap` job's list).
 *
 * A registry lives in the key/value store itself, in a namespace of its own, so that it works the
 * same on both backends, needs no further service, and lists with the store's paging (every key
 * exactly once across pages). The namespace is {@link SYSTEM_NAMESPACE}, a name that can never be a
 * tenant id (tenant ids are `[A-Za-z0-9._-]`), so no caller can read or write it through the API.
 * Locally it is the folder `<CAIRN_DATA_DIR>/kv/@cairn/`; on Blob, the container of that name's hash.
 */
const PAGE_SIZE = 1000;

/**
 * A set of tenants kept in the system namespace under one key prefix, one create-only key per
 * tenant (`<prefix><tenant>`, holding `{"tenant","registeredAt"}`): registering never contends and
 * never rewrites, and listing pages through the store (every key exactly once).
 */
export class TenantRegistry {
  private readonly store: KeyValueStore;

  constructor(
    kvStores: KeyValueStoreFactory,
    private readonly prefix: string,
  ) {
    this.store = kvStores.forTenant(SYSTEM_NAMESPACE);
  }

  /**
   * Records `tenant`; idempotent (a tenant already registered is left as it is). Throws the store's
   * errors (e.g. StorageUnavailableError), so that a caller never goes on believing it registered.
   */
  async register(tenant: string, now: Date = new Date()): Promise<void> {
    if (!isValidTenantId(tenant)) throw new InternalError(`not a tenant id: ${tenant}`);
    // Times as Cairn writes them: UTC, milliseconds, `Z`.
    const record = JSON.stringify({ tenant, registeredAt: now.toISOString() }) + '\n';
    try {
      await this.store.write(this.prefix + tenant, Buffer.from(record), { ifAbsent: true });
    } catch (error) {
      if (!(error instanceof PreconditionFailedError)) throw error;
    }
  }

  /** Every registered tenant, ascending, page by page. Throws when a page cannot be listed. */
  async *tenants(pageSize = PAGE_SIZE): AsyncGenerator<string> {
    let cursor: string | undefined;
    do {
      const page = await this.store.list({
        prefix: this.prefix,
        limit: pageSize,
        ...(cursor === undefined ? {} : { cursor }),
      });
      for (const key of page.keys) {
        const tenant = key.slice(this.prefix.length);
        if (isValidTenantId(tenant)) yield tenant;
      }
      cursor = page.cursor ?? undefined;
    } while (cursor !== undefined);
  }
}
