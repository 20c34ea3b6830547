import type { PruneBudget, PruneCounts } from './budget';
import type { RetentionPolicy } from './policy';
import type { PruneState } from './pruneState';
import type { HashSample, VerifyCollector } from './verifyReport';

/**
 * What the retention jobs (shared/jobs/) ask of each domain, as the rewrap job asks a
 * `RewrapTarget`: a domain gives a {@link PrunePart} and a {@link VerifyPart}, the composition root
 * (services.ts) hands them to the jobs, and neither the jobs nor the domains import each other.
 */

/** One tenant's pass of the `retentionPrune` run, as the run hands it to each part. */
export interface TenantPrunePass {
  readonly tenant: string;
  /** The domains the tenant stored data in (the tenant directory's entry). */
  readonly domains: ReadonlySet<string>;
  /** The tenant's effective policy. */
  readonly policy: RetentionPolicy;
  /** Wall-clock time of the pass (ms); the storage's modification times are compared with it. */
  readonly now: number;
  /** The run's clock (ms), for times recorded during the pass. */
  readonly clock: () => number;
  /** Nothing younger than this is collected. */
  readonly graceMs: number;
  /** Slack for clocks and the storage's time resolution. */
  readonly clockMarginMs: number;
  /** A full pass (about once a day): everything is visited. */
  readonly full: boolean;
  /** When this pass started (a resumed pass keeps the time of its start), RFC 3339. */
  readonly passStartedAt: string;
  /** The deletions of the whole run, shared by every tenant and part. */
  readonly budget: PruneBudget;
  /** This tenant's counts, which the part adds to. */
  readonly counts: PruneCounts;
  /** The tenant's prune state as the pass read it at its start. */
  readonly state: PruneState;
  /** Changes the tenant's prune state (compare-and-swap; `change` returns null for no change). */
  updateState(change: (state: PruneState) => PruneState | null): Promise<unknown>;
}

export interface PrunePartOutcome {
  /** False when work is left for the next run (the budget ran out, objects not old enough yet). */
  readonly complete: boolean;
  /**
   * What the pass's last update of the prune state records for this part (a cursor, a day done):
   * the state with the part's fields changed, or the same object for no change. Applied only when
   * the part did not throw.
   */
  readonly settle?: (state: PruneState) => PruneState;
}

/** A domain's part of the `retentionPrune` run. */
export interface PrunePart {
  /** The name the report's `left` gives this part (`threads`, `sessions`, ...). */
  readonly name: string;
  /** Prunes the tenant's data of this domain (or does nothing when it has none). */
  prune(pass: TenantPrunePass): Promise<PrunePartOutcome>;
}

/** A domain's part of `cairn verify`: checks what the tenant keeps in it, read only. */
export interface VerifyPart {
  readonly name: string;
  /** Adds findings and orphans to `collector`; throws on a storage fault. */
  verify(
    tenant: string,
    domains: ReadonlySet<string>,
    collector: VerifyCollector,
    sample: HashSample,
  ): Promise<void>;
}
