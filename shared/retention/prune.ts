import type { ArchiveStorage } from '../archive/sealedArchive';
import { pruneSessions } from '../archive/sessionRetention';
import { pruneInteractions } from '../coordination/interactionRetention';
import type { Logger } from '../logging';
import type { MemoryFacts } from '../memory/memory';
import { forEachLimited } from '../pool';
import { collectSnapshotGarbage } from '../snapshots/snapshotRetention';
import type { SnapshotStores } from '../snapshots/workspaceSnapshots';
import type { KeyValueStore, KeyValueStoreFactory } from '../storage/keyValueStore';
import type { DirectoryEntry, TenantDirectory } from '../tenants/tenantDirectory';
import type { ThreadRecord } from '../threads/records';
import { pruneThreads } from '../threads/threadRetention';
import { emptyCounts, PruneBudget, type PruneCounts } from './budget';
import { effectivePolicy, type RetentionPolicies, type RetentionPolicy } from './policy';
import {
  type PruneState,
  type PruneStates,
  withoutSessionIntent,
  withoutThreadIntents,
  withSessionIntent,
  withThreadIntents,
} from './pruneState';

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
/** Expired memory facts one call deletes at most. */
const MEMORY_BATCH = 1000;

export interface RetentionStores {
  /** Every tenant's key/value and thread spaces. */
  readonly kvStores: KeyValueStoreFactory;
  /**
   * A tenant's thread space as the thread store reads it (sealed when encryption keys are set);
   * default: `kvStores.forSpace('threads', tenant)`.
   */
  readonly threadSpaceOf?: (tenant: string) => KeyValueStore;
  /** True when thread values are sealed: their keys carry random ids, not digests (verify opens them). */
  readonly threadsSealed?: boolean;
  /**
   * Deletes a thread record whose time to live ran out, compare-and-swap on `etag`
   * (PreconditionFailedError when it changed; false when it was gone): the thread store's own
   * deletion, which records `thread.deleted` in the audit trail. Default: the space's delete.
   */
  readonly deleteThreadRecord?: (
    tenant: string,
    threadId: string,
    record: ThreadRecord,
    etag: string,
  ) => Promise<boolean>;
  readonly directory: TenantDirectory;
  readonly policies: RetentionPolicies;
  readonly states: PruneStates;
  readonly memory?: MemoryFacts;
  /** The session archive's objects and index (absent without a table service). */
  readonly sessions?: ArchiveStorage;
  readonly snapshots: SnapshotStores;
}

/** A tenant's thread space, as the thread store reads it. */
export function threadSpaceOf(
  stores: Pick<RetentionStores, 'kvStores' | 'threadSpaceOf'>,
  tenant: string,
): KeyValueStore {
  return stores.threadSpaceOf?.(tenant) ?? stores.kvStores.forSpace('threads', tenant);
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
    private readonly stores: RetentionStores,
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

    const memory = this.stores.memory;
    if (domains.has('memory') && memory !== undefined) {
      await guarded('memory', async () => {
        for (;;) {
          const room = Math.min(MEMORY_BATCH, budget.remaining());
          if (room <= 0) return false;
          const { deleted, more } = await memory.pruneExpired(tenant, room);
          budget.spend(deleted);
          counts.memoryItemsDeleted += deleted;
          if (!more) return true;
        }
      });
    }

    /** Null: no thread pass ran, or it failed (the cursor stays as it was). */
    let threads: { complete: boolean; resumeAfter: string | null } | null = null;
    if (domains.has('threads') || current.threadIntents.length > 0) {
      await guarded('threads', async () => {
        const previous =
          current.threadsPassStartedAt === null ? null : Date.parse(current.threadsPassStartedAt);
        const { deleteThreadRecord } = this.stores;
        threads = await pruneThreads({
          store: threadSpaceOf(this.stores, tenant),
          ...(deleteThreadRecord === undefined
            ? {}
            : {
                deleteRecord: (threadId: string, record: ThreadRecord, etag: string) =>
                  deleteThreadRecord(tenant, threadId, record, etag),
              }),
          policy: {
            threadTtlMs: policy.threadTtlSeconds === null ? null : policy.threadTtlSeconds * 1000,
            keepCheckpoints: policy.keepCheckpoints,
            dropBranches: policy.dropBranches,
          },
          graceMs: this.graceMs,
          now,
          budget,
          counts,
          unchangedBefore:
            full || previous === null
              ? null
              : previous - this.graceMs - (this.options.clockMarginMs ?? CLOCK_MARGIN_MS),
          full,
          after: cursor === null || cursor.after === '' ? null : cursor.after,
          intents: current.threadIntents,
          intentLog: {
            add: async (intents) => void (await states.update(tenant, (s) => withThreadIntents(s, intents))),
            remove: async (intents) =>
              void (await states.update(tenant, (s) => withoutThreadIntents(s, intents))),
          },
        });
        return threads.complete;
      });
    } else {
      threads = { complete: true, resumeAfter: null };
    }

    const sessions = this.stores.sessions;
    if (sessions !== undefined && (domains.has('sessions') || current.sessionIntents.length > 0)) {
      await guarded('sessions', () =>
        pruneSessions({
          objects: sessions.objectsOf(tenant),
          index: sessions.index,
          tenant,
          ttlMs: policy.sessionTtlSeconds === null ? null : policy.sessionTtlSeconds * 1000,
          graceMs: this.graceMs,
          now,
          budget,
          counts,
          full,
          intents: current.sessionIntents.map((intent) => intent.sessionId),
          intentLog: {
            add: async (sessionId) =>
              void (await states.update(tenant, (s) =>
                withSessionIntent(s, sessionId, new Date(this.now()).toISOString()),
              )),
            remove: async (sessionId) =>
              void (await states.update(tenant, (s) => withoutSessionIntent(s, sessionId))),
          },
        }),
      );
    }

    if (full && domains.has('snapshots')) {
      await guarded('snapshots', () =>
        collectSnapshotGarbage({
          store: this.stores.snapshots.forTenant(tenant),
          graceMs: this.graceMs,
          now,
          budget,
          counts,
        }),
      );
    }

    const today = new Date(now).toISOString().slice(0, 10);
    let interactionsDone = false;
    const days = policy.interactionDays;
    if (domains.has('kv') && days !== null && current.interactionsPrunedOn !== today) {
      await guarded('interactions', async () => {
        interactionsDone = await pruneInteractions({
          store: this.stores.kvStores.forTenant(tenant),
          days,
          now,
          budget,
          counts,
        });
        return interactionsDone;
      });
    }

    await guarded('state', async () => {
      const fullComplete = full && left.length === 0;
      const pass: { complete: boolean; resumeAfter: string | null } | null = threads;
      await states.update(tenant, (s) => {
        let next: PruneState = s;
        if (pass?.complete === true) {
          if (s.threadsPassStartedAt === null || s.threadsPassStartedAt < passStartedAt) {
            next = { ...next, threadsPassStartedAt: passStartedAt };
          }
          if (s.threadsCursor !== null && s.threadsCursor.startedAt <= passStartedAt) {
            next = { ...next, threadsCursor: null };
          }
        } else if (
          pass !== null &&
          (s.threadsCursor === null || s.threadsCursor.startedAt <= passStartedAt)
        ) {
          next = {
            ...next,
            threadsCursor: { after: pass.resumeAfter ?? '', startedAt: passStartedAt, full },
          };
        }
        if (fullComplete && (s.fullPassStartedAt === null || s.fullPassStartedAt < passStartedAt)) {
          next = { ...next, fullPassStartedAt: passStartedAt };
        }
        if (interactionsDone && s.interactionsPrunedOn !== today)
          next = { ...next, interactionsPrunedOn: today };
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
