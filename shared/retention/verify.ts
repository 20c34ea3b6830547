import { randomInt } from 'node:crypto';

import { verifySessions } from '../archive/sessionVerify';
import type { AuditChainCheck } from '../audit/auditChainCheck';
import { verifySnapshots } from '../snapshots/snapshotVerify';
import type { DirectoryEntry } from '../tenants/tenantDirectory';
import { checkTenantId } from '../tenants/tenantIds';
import { verifyThreads } from '../threads/threadVerify';
import { GRACE_MS, type RetentionStores, threadSpaceOf } from './prune';
import { type HashSample, samplingNote, type TenantVerifyReport, VerifyCollector } from './verifyReport';

/**
 * `cairn verify` (docs/retention.md): checks what a tenant keeps, read only. Per tenant of the
 * directory, in the domains it stores data in: every thread head, session `latest` and snapshot
 * `latest` names a stored checkpoint or manifest; every value and object they reference is stored
 * with its size (and hash, sampled or every byte); what nothing references is reported as an
 * orphan (collectable once older than the grace); and the audit chain is checked when auditing is
 * on. A storage fault throws: a verification that could not read is no verification.
 */

export interface VerifyOptions {
  /** Hash every byte (otherwise a sample: see {@link samplingNote}). */
  readonly readData: boolean;
}

export interface VerifierOptions {
  readonly graceMs?: number;
  readonly now?: () => number;
  /** Without `readData`, about one value or file in this many is hashed (default 16). */
  readonly sampleOneIn?: number;
  readonly random?: () => number;
}

export type VerifierStores = Pick<
  RetentionStores,
  'kvStores' | 'threadSpaceOf' | 'threadsSealed' | 'directory' | 'sessions' | 'snapshots'
> & {
  readonly audit: AuditChainCheck;
};

export class Verifier {
  constructor(
    private readonly stores: VerifierStores,
    private readonly options: VerifierOptions = {},
  ) {}

  /** Every tenant of the directory, in its order. */
  tenants(): AsyncGenerator<DirectoryEntry> {
    return this.stores.directory.entries();
  }

  async verifyTenant(tenant: string, options: VerifyOptions): Promise<TenantVerifyReport> {
    checkTenantId(tenant);
    const entry = (await this.stores.directory.entry(tenant)) ?? { tenant, domains: new Set() };
    const sample: HashSample = {
      readData: options.readData,
      oneIn: this.options.sampleOneIn ?? 16,
      random: this.options.random ?? (() => randomInt(1 << 30) / (1 << 30)),
    };
    const collector = new VerifyCollector((this.options.now ?? Date.now)(), this.options.graceMs ?? GRACE_MS);
    if (entry.domains.has('threads')) {
      await verifyThreads(threadSpaceOf(this.stores, tenant), collector, sample, {
        sealed: this.stores.threadsSealed === true,
      });
    }
    const sessions = this.stores.sessions;
    if (entry.domains.has('sessions') && sessions !== undefined) {
      await verifySessions(sessions.objectsOf(tenant), sessions.index, tenant, collector, sample);
    }
    if (entry.domains.has('snapshots')) {
      await verifySnapshots(this.stores.snapshots.forTenant(tenant), collector, sample);
    }
    const audit = await this.stores.audit.check(tenant);
    return {
      tenant,
      ok: collector.findingCount === 0 && collector.collectableOrphans === 0 && audit.status !== 'broken',
      findings: collector.findings,
      findingCount: collector.findingCount,
      orphans: collector.orphans,
      orphanCount: collector.orphanCount,
      collectableOrphans: collector.collectableOrphans,
      checked: collector.checked,
      sampling: samplingNote(sample),
      audit,
    };
  }
}
