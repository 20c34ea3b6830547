import type { Logger } from '../logging';
import { forEachLimited } from '../protocol/pool';
import { emptyCounts, PruneBudget, type PruneCounts } from '../retention/budget';
import type { PrunePart, TenantPrunePass } from '../retention/parts';
import { effectivePolicy, type RetentionPolicies, type RetentionPolicy } from '../retention/policy';
import type { PruneState, PruneStates } from '../retention/pruneState';
import type { DirectoryEntry, TenantDirectory } from '../tenants/tenantDirectory';

/**
 * The `retentionPrune` run (docs/retention.md): for every tenant of the directory (or one), applies
 * its policy and collects what no kept data references, and reports per tenant what it deleted.
 *
 * Safe to run twice at once, or on several instances (the timer may fire twice; scale-out runs it
 * on each instance): every deletion is decided by the storage (a compare-and-swap, or a delete that
 * tells whether it removed the item), and an item is counted only by the run whose delete removed
 * it, so overlapping runs delete each item once and their counts add up to one run's. A run that
 * dies leaves consistent state: deletions go from what references to what is referenced, and the
 * ones under way are recorded as intents that the next run finishes. Each run is bounded (a number
 * of deletions and a deadline, shared by all tenants): what is left waits for the next run, which
 * goes on where this one stopped.
 *
 * What makes the usual run cheap: the prune state remembers when each tenant's last complete pass
 * started; threads whose record has not been written since then (less the grace) are skipped by
 * their listing alone. Once a day a full pass visits everything (every thread, every session's and
 * snapshot's garbage, data no thread names any more).
 *
 * What each domain prunes is the domain's own {@link PrunePart} (retention/parts.ts), which the
 * composition root hands to the run in order (memory, threads, sessions, snapshots, interactions):
 * the run knows tenants, policies, budgets and the prune state, not the domains.
 */

/** Nothing younger than this is collected: the hour the instances vouch by (less their margin). */
export const GRACE_MS = 60 * 60 * 1000;
/**
 * Times compared across clocks (the storage's modification times, to the second on Blob, against
 * this instance's clock) are given this much slack, in the direction that does more work.
 */
export const CLOCK_MARGIN_MS = 5000;
/** How often a tenant gets a full pass. */
export const FULL_PASS_EVERY_MS = 24 * 60 * 60 * 1000;
/** Tenants pruned at once. */
const TENANT_CONCURRENCY = 4;

/** What the run reads besides the parts: the tenants, their policies and their prune state. */
export interface RetentionJobStores {
  readonly directory: TenantDirectory;
  readonly policies: RetentionPolicies;
  readonly states: PruneStates;
  /** The domains' parts, run in this order for each tenant. */
  readonly parts: readonly PrunePart[];
}

export interface PrunerOptions {
  readonly maxDeletes: number;
  readonly maxMs: number;
  /** Tests shorten it; production keeps {@link GRACE_MS}. */
  readonly graceMs?: number;
  readonly fullPassEveryMs?: number;
  /** Slack for clocks and the storage's time resolution (default {@link CLOCK_MARGIN_MS}). */
  readonly clockMarginMs?: number;
  /** Wall clock (ms); compared with the storage's times. */
  readonly now?: () => number;
}

export interface TenantPruneReport extends PruneCounts {
  readonly tenant: string;
  /** True when this run left work for the next one (the budget ran out, or objects are not old enough yet). */
  readonly more: boolean;
  /** The domains with work left: `threads`, `sessions`, `snapshots`, `memory`, `interactions`. */
  readonly left: string[];
  /** A failure that stopped part of this tenant's pass (the rest went on). */
  readonly error?: string;
}

export interface PruneReport {
  readonly startedAt: string;
  readonly tenants: TenantPruneReport[];
  /** False when any tenant has work left for the next run. */
  readonly complete: boolean;
}

export class RetentionPruner {
  private readonly graceMs: number;
  private readonly fullPassEveryMs: number;
  private readonly now: () => number;

  constructor(
    private readonly stores: RetentionJobStores,
    private readonly options: PrunerOptions,
  ) {
    this.graceMs = options.graceMs ?? GRACE_MS;
    this.fullPassEveryMs = options.fullPassEveryMs ?? FULL_PASS_EVERY_MS;
    this.now = options.now ?? Date.now;
  }

  /** One run over every tenant, or over `tenant` alone. Per-tenant failures are reported, not thrown. */
  async run(log: Logger, options: { tenant?: string } = {}): Promise<PruneReport> {
    const startedAt = this.now();
    const budget = PruneBudget.of(this.options.maxDeletes, this.options.maxMs);
    const overrides = await this.stores.policies.all();
    const reports: TenantPruneReport[] = [];
    const tenants =
      options.tenant === undefined
        ? this.stores.directory.entries()
        : (async function* (directory: TenantDirectory, tenant: string) {
            yield (await directory.entry(tenant)) ?? { tenant, domains: new Set() };
          })(this.stores.directory, options.tenant);
    const batch: DirectoryEntry[] = [];
    const flush = async () => {
      await forEachLimited(batch.splice(0), TENANT_CONCURRENCY, async (entry) => {
        const policy = effectivePolicy(this.stores.policies.defaults, overrides.get(entry.tenant) ?? null);
        const report = await this.pruneTenant(entry, policy, budget, log.child({ tenant: entry.tenant }));
        reports.push(report);
      });
    };
    for await (const entry of tenants) {
      batch.push(entry);
      if (batch.length >= TENANT_CONCURRENCY * 4) await flush();
    }
    await flush();
    reports.sort((a, b) => (a.tenant < b.tenant ? -1 : a.tenant > b.tenant ? 1 : 0));
    return {
      startedAt: new Date(startedAt).toISOString(),
      tenants: reports,
      complete: reports.every((report) => !report.more),
    };
  }

  private async pruneTenant(
    entry: DirectoryEntry,
    policy: RetentionPolicy,
    budget: PruneBudget,
    log: Logger,
  ): Promise<TenantPruneReport> {
    const { tenant, domains } = entry;
    const { states } = this.stores;
    const counts = emptyCounts();
    const left: string[] = [];
    const errors: string[] = [];
    const now = this.now();
    const guarded = async (domain: string, work: () => Promise<boolean>) => {
      try {
        if (!(await work())) left.push(domain);
      } catch (error) {
        left.push(domain);
        errors.push(`${domain}: ${error instanceof Error ? error.message : String(error)}`);
        log.warn({ domain, err: error }, 'retention prune failed for a domain');
      }
    };

    let state: PruneState | null = null;
    await guarded('state', async () => {
      state = await states.read(tenant);
      return true;
    });
    if (state === null) return this.report(tenant, counts, left, errors, log);
    const current: PruneState = state;
    const cursor = current.threadsCursor;
    const lastFull = current.fullPassStartedAt === null ? null : Date.parse(current.fullPassStartedAt);
    const full = cursor?.full ?? (lastFull === null || now - lastFull >= this.fullPassEveryMs);
    const passStartedAt = cursor?.startedAt ?? new Date(now).toISOString();

    const pass: TenantPrunePass = {
      tenant,
      domains,
      policy,
      now,
      clock: this.now,
      graceMs: this.graceMs,
      clockMarginMs: this.options.clockMarginMs ?? CLOCK_MARGIN_MS,
      full,
      passStartedAt,
      budget,
      counts,
      state: current,
      updateState: (change) => states.update(tenant, change),
    };
    const settles: ((state: PruneState) => PruneState)[] = [];
    for (const part of this.stores.parts) {
      await guarded(part.name, async () => {
        const outcome = await part.prune(pass);
        if (outcome.settle !== undefined) settles.push(outcome.settle);
        return outcome.complete;
      });
    }

    await guarded('state', async () => {
      const fullComplete = full && left.length === 0;
      await states.update(tenant, (s) => {
        let next: PruneState = s;
        for (const settle of settles) next = settle(next);
        if (fullComplete && (s.fullPassStartedAt === null || s.fullPassStartedAt < passStartedAt)) {
          next = { ...next, fullPassStartedAt: passStartedAt };
        }
        return next === s ? null : next;
      });
      return true;
    });
    return this.report(tenant, counts, left, errors, log);
  }

  private report(
    tenant: string,
    counts: PruneCounts,
    left: string[],
    errors: string[],
    log: Logger,
  ): TenantPruneReport {
    const report: TenantPruneReport = {
      tenant,
      ...counts,
      more: left.length > 0,
      left: [...new Set(left)].filter((domain) => domain !== 'state'),
      ...(errors.length === 0 ? {} : { error: errors.join('; ') }),
    };
    const fields = { ...counts, more: report.more, left: report.left };
    if (errors.length > 0) log.warn({ ...fields, error: report.error }, 'retention prune');
    else log.info(fields, 'retention prune');
    return report;
  }
}
