import { randomInt } from 'node:crypto';

import type { AuditChainCheck } from '../audit/auditChainCheck';
import { checkTenantId } from '../protocol/tenants/tenantIds';
import type { VerifyPart } from '../retention/parts';
import {
  type HashSample,
  samplingNote,
  type TenantVerifyReport,
  VerifyCollector,
} from '../retention/verifyReport';
import type { DirectoryEntry, TenantDirectory } from '../tenants/tenantDirectory';
import { GRACE_MS } from './retentionPrune';

/**
 * `cairn verify` (docs/retention.md): checks what a tenant keeps, read only. Per tenant of the
 * directory, in the domains it stores data in: every thread head, session `latest` and snapshot
 * `latest` names a stored checkpoint or manifest; every value and object they reference is stored
 * with its size (and hash, sampled or every byte); what nothing references is reported as an
 * orphan (collectable once older than the grace); and the audit chain is checked when auditing is
 * on. A storage fault throws: a verification that could not read is no verification. What each
 * domain checks is its own {@link VerifyPart}, handed over by the composition root in order
 * (threads, sessions, snapshots).
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

export interface VerifierStores {
  readonly directory: TenantDirectory;
  /** The domains' parts, run in this order for each tenant. */
  readonly parts: readonly VerifyPart[];
  readonly audit: AuditChainCheck;
}

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
    for (const part of this.stores.parts) await part.verify(tenant, entry.domains, collector, sample);
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
