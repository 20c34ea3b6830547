import type {
  PruneReport as PruneReportSchema,
  RetentionPolicy as RetentionPolicySchema,
  RetentionPolicyOverride,
  RetentionPolicyView as RetentionPolicyViewSchema,
  TenantList,
  TenantPruneReport as TenantPruneReportSchema,
  TenantVerifyReport as TenantVerifyReportSchema,
  VerifyReport,
} from '@cairn-state/protocol/retention';
import type { z } from 'zod';

import { failure, readJson, segment, type Transport } from './transport.js';
import type { Wire } from './wire.js';

/**
 * Retention and verification (admin): a tenant's retention policy, a prune run now, `verify` of
 * what is kept, and the tenant directory. Every call needs an admin credential (403 otherwise).
 */

export type RetentionPolicy = Wire<z.output<typeof RetentionPolicySchema>>;

/** A tenant's override: each field given replaces the default (null: keep everything of that kind). */
export type RetentionOverride = Wire<z.input<typeof RetentionPolicyOverride>>;

export type RetentionPolicyView = Wire<z.output<typeof RetentionPolicyViewSchema>>;

/** One tenant's part of a prune run; `more` when work is left for the next run. */
export type TenantPruneReport = Wire<z.output<typeof TenantPruneReportSchema>>;

export type PruneReport = Wire<z.output<typeof PruneReportSchema>>;

export type TenantVerifyReport = Wire<z.output<typeof TenantVerifyReportSchema>>;

export type VerifyFinding = TenantVerifyReport['findings'][number];

export type VerifyOrphan = TenantVerifyReport['orphans'][number];

export type ServiceVerifyReport = Wire<z.output<typeof VerifyReport>>;

export type DirectoryTenant = Wire<z.output<typeof TenantList>>['tenants'][number];

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
