import { failure, readJson, segment, type Transport } from './transport.js';

/**
 * Retention and verification (admin): a tenant's retention policy, a prune run now, `verify` of
 * what is kept, and the tenant directory. Every call needs an admin credential (403 otherwise).
 */

export interface RetentionPolicy {
  readonly threadTtlSeconds: number | null;
  readonly keepCheckpoints: number | null;
  readonly dropBranches: boolean;
  readonly sessionTtlSeconds: number | null;
  readonly interactionDays: number | null;
}

/** A tenant's override: each field given replaces the default (null: keep everything of that kind). */
export type RetentionOverride = Partial<RetentionPolicy>;

export interface RetentionPolicyView {
  readonly tenant: string;
  readonly override: RetentionOverride | null;
  readonly defaults: RetentionPolicy;
  readonly effective: RetentionPolicy;
}

export interface TenantPruneReport {
  readonly tenant: string;
  readonly threadsDeleted: number;
  readonly threadsBusy: number;
  readonly checkpointsDeleted: number;
  readonly memoryItemsDeleted: number;
  readonly sessionsDeleted: number;
  readonly objectsDeleted: number;
  readonly bytesFreed: number;
  /** Work is left for the next run. */
  readonly more: boolean;
  readonly left: readonly string[];
  readonly error?: string;
}

export interface PruneReport {
  readonly startedAt: string;
  readonly tenants: readonly TenantPruneReport[];
  readonly complete: boolean;
}

export interface VerifyFinding {
  readonly domain: 'threads' | 'sessions' | 'snapshots';
  readonly kind: 'missing' | 'wrong_size' | 'wrong_hash' | 'dangling_latest' | 'dangling_head' | 'unreadable';
  readonly where: string;
  readonly key: string;
  readonly detail: string;
}

export interface VerifyOrphan {
  readonly domain: 'threads' | 'sessions' | 'snapshots';
  readonly key: string;
  readonly size: number;
  readonly storedAt: string;
  readonly collectable: boolean;
}

export interface TenantVerifyReport {
  readonly tenant: string;
  readonly ok: boolean;
  readonly findings: readonly VerifyFinding[];
  readonly findingCount: number;
  readonly orphans: readonly VerifyOrphan[];
  readonly orphanCount: number;
  readonly collectableOrphans: number;
  readonly checked: Readonly<Record<string, number>>;
  readonly sampling: string;
  readonly audit: { readonly status: 'not_checked' | 'ok' | 'broken'; readonly reason?: string };
}

export interface ServiceVerifyReport {
  readonly ok: boolean;
  readonly tenants: readonly TenantVerifyReport[];
}

export interface DirectoryTenant {
  readonly tenant: string;
  readonly domains: readonly string[];
}

export class RetentionClient {
  constructor(private readonly transport: Transport) {}

  async policy(tenant: string): Promise<RetentionPolicyView> {
    return readJson(await this.transport.call('GET', policyPath(tenant)), 200);
  }

  /** Replaces the tenant's override whole (fields not given take the defaults). */
  async setPolicy(tenant: string, override: RetentionOverride): Promise<RetentionPolicyView> {
    return readJson(await this.transport.call('PUT', policyPath(tenant), { json: override }), 200);
  }

  async clearPolicy(tenant: string): Promise<void> {
    const reply = await this.transport.call('DELETE', policyPath(tenant));
    if (reply.status !== 204) throw await failure(reply);
  }

  /**
   * One prune run now, over one tenant or all. Retried after an ambiguous failure like a read: runs
   * are safe to overlap and repeat (an item is deleted and counted once).
   */
  async prune(options: { tenant?: string } = {}): Promise<PruneReport> {
    const reply = await this.transport.call('POST', '/retention/prune', { json: options, idempotent: true });
    return readJson(reply, 200);
  }

  /** Verifies one tenant, or every tenant (one long request: see {@link tenants} to go one by one). */
  async verify(options: { tenant?: string; readData?: boolean } = {}): Promise<ServiceVerifyReport> {
    const reply = await this.transport.call('GET', '/verify', {
      query: {
        tenant: options.tenant,
        readData: options.readData === undefined ? undefined : String(options.readData),
      },
    });
    return readJson(reply, 200);
  }

  /** Every tenant that stored anything, with the parts it stores data in. */
  async tenants(): Promise<DirectoryTenant[]> {
    return (await readJson<{ tenants: DirectoryTenant[] }>(await this.transport.call('GET', '/tenants'), 200))
      .tenants;
  }
}

const policyPath = (tenant: string) => `/retention/policies/${segment(tenant)}`;
