import { lru } from '../lru';
import { PreconditionFailedError } from '../protocol/errors';
import { checkTenantId, isValidTenantId } from '../protocol/tenants/tenantIds';
import type { KeyValueStore, KeyValueStoreFactory } from '../storage/keyValueStore';
import { SYSTEM_NAMESPACE } from './systemNamespace';

/**
 * The tenant directory: every tenant that has stored anything, and in which domains. Retention
 * (`retentionPrune`) and `cairn verify` walk it to find every tenant's data without listing
 * containers or folders. (It says nothing about a tenant's encryption or other settings.)
 *
 * One key per tenant and domain, `tenant-directory/<tenant>/<domain>`, in the system namespace of
 * the key/value store (so it works the same on both backends and lists with the store's paging).
 * Each domain records the tenant before the tenant's first write there: a create-only write, never
 * contended and never rewritten, remembered per process, so it costs one request per tenant and
 * domain per process. A failed recording fails the write it precedes (never data nobody can find).
 */

export const TENANT_DOMAINS = ['kv', 'threads', 'memory', 'sessions', 'snapshots'] as const;
export type TenantDomain = (typeof TENANT_DOMAINS)[number];

export interface DirectoryEntry {
  readonly tenant: string;
  readonly domains: ReadonlySet<TenantDomain>;
}

const PREFIX = 'tenant-directory/';
const PAGE_SIZE = 5000;
/** Pairs remembered per process (about 100 bytes each). */
const REMEMBERED = 100_000;

function isDomain(value: string): value is TenantDomain {
  return (TENANT_DOMAINS as readonly string[]).includes(value);
}

export class TenantDirectory {
  private readonly store: KeyValueStore;
  private readonly recorded = lru<string, true>(REMEMBERED);
  private readonly recording = new Map<string, Promise<void>>();

  constructor(kvStores: KeyValueStoreFactory) {
    this.store = kvStores.forTenant(SYSTEM_NAMESPACE);
  }

  /**
   * Records that `tenant` stores data of `domain`. Idempotent; concurrent calls of one process share
   * one write. Names that are not tenant ids (Cairn's own namespace) are not recorded. Throws the
   * store's errors, so that the write it precedes fails too.
   */
  async record(tenant: string, domain: TenantDomain): Promise<void> {
    if (!isValidTenantId(tenant)) return;
    const key = `${PREFIX}${tenant}/${domain}`;
    if (this.recorded.get(key) === true) return;
    let pending = this.recording.get(key);
    if (pending === undefined) {
      pending = this.write(key, tenant, domain).finally(() => this.recording.delete(key));
      this.recording.set(key, pending);
    }
    await pending;
  }

  /** Every tenant with its domains, in key order (each tenant once), page by page. */
  async *entries(): AsyncGenerator<DirectoryEntry> {
    let tenant: string | null = null;
    let domains = new Set<TenantDomain>();
    for await (const key of this.keys(PREFIX)) {
      const [name = '', domain = ''] = key.slice(PREFIX.length).split('/');
      if (!isValidTenantId(name) || !isDomain(domain)) continue;
      if (name !== tenant) {
        if (tenant !== null) yield { tenant, domains };
        tenant = name;
        domains = new Set();
      }
      domains.add(domain);
    }
    if (tenant !== null) yield { tenant, domains };
  }

  /** One tenant's entry, or null when it never stored anything. */
  async entry(tenant: string): Promise<DirectoryEntry | null> {
    checkTenantId(tenant);
    const domains = new Set<TenantDomain>();
    for await (const key of this.keys(`${PREFIX}${tenant}/`)) {
      const domain = key.slice(`${PREFIX}${tenant}/`.length);
      if (isDomain(domain)) domains.add(domain);
    }
    return domains.size === 0 ? null : { tenant, domains };
  }

  private async write(key: string, tenant: string, domain: TenantDomain): Promise<void> {
    const record = JSON.stringify({ tenant, domain, recordedAt: new Date().toISOString() }) + '\n';
    try {
      await this.store.write(key, Buffer.from(record), { ifAbsent: true });
    } catch (error) {
      if (!(error instanceof PreconditionFailedError)) throw error;
    }
    this.recorded.set(key, true);
  }

  private async *keys(prefix: string): AsyncGenerator<string> {
    let cursor: string | undefined;
    do {
      const page = await this.store.list({
        prefix,
        limit: PAGE_SIZE,
        ...(cursor === undefined ? {} : { cursor }),
      });
      yield* page.keys;
      cursor = page.cursor ?? undefined;
    } while (cursor !== undefined);
  }
}
