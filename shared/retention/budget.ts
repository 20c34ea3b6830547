/**
 * Deletions one prune run sends at once, over all its tenants and threads. Prune is background
 * work on the storage account and the connection pool that the instance's requests use: without a
 * bound, tenants × threads × deletions per thread (4 × 8 × 16) would be in flight, and a storage
 * that answers slowly would keep them queued past the SDK's per-try timeout, whose retries only
 * add to the queue.
 */
export const MAX_DELETES_IN_FLIGHT = 32;

/**
 * What one prune run may still do: a number of deletions and a deadline, so that a large tenant
 * never runs into the Functions timeout; what is left waits for the next run. Shared by every
 * tenant of the run, as is the bound on deletions in flight ({@link PruneBudget.deleting}).
 * Deletions are counted when attempted (work, not results).
 */
export class PruneBudget {
  private deletesLeft: number;
  private inFlight = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(
    maxDeletes: number,
    private readonly deadline: number,
    private readonly clock: () => number = () => performance.now(),
    private readonly maxInFlight: number = MAX_DELETES_IN_FLIGHT,
  ) {
    this.deletesLeft = maxDeletes;
  }

  /** A budget that ends `ms` from now on the monotonic clock. */
  static of(maxDeletes: number, ms: number): PruneBudget {
    return new PruneBudget(maxDeletes, performance.now() + ms);
  }

  /** Runs one storage deletion once fewer than the run's bound are in flight (first come, first served). */
  async deleting<T>(operation: () => Promise<T>): Promise<T> {
    if (this.inFlight >= this.maxInFlight) {
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    } else {
      this.inFlight += 1;
    }
    try {
      return await operation();
    } finally {
      // The slot passes to the next waiter as it is, or is freed.
      const next = this.waiting.shift();
      if (next === undefined) this.inFlight -= 1;
      else next();
    }
  }

  get exhausted(): boolean {
    return this.deletesLeft <= 0 || this.clock() >= this.deadline;
  }

  /** Deletions left (0 once the deadline passed). */
  remaining(): number {
    return this.exhausted ? 0 : this.deletesLeft;
  }

  /** Counts `n` deletions done elsewhere (e.g. by a store that deletes in batches). */
  spend(n: number): void {
    this.deletesLeft -= n;
  }

  /** Takes one deletion; false (and nothing taken) when the budget is spent. */
  take(): boolean {
    if (this.exhausted) return false;
    this.deletesLeft -= 1;
    return true;
  }
}

/** What a prune run did for one tenant. Each item is counted by the run whose delete removed it. */
export interface PruneCounts {
  /** Threads whose last change was older than the policy allows, deleted with all their data. */
  threadsDeleted: number;
  /** Threads the policy would have deleted or pruned, skipped because a live run held them. */
  threadsBusy: number;
  /** Checkpoint records removed from threads that were kept (keepCheckpoints, dropBranches). */
  checkpointsDeleted: number;
  /** Expired memory facts removed (whatever the policy). */
  memoryItemsDeleted: number;
  /** Archive sessions deleted (sessionTtlSeconds). */
  sessionsDeleted: number;
  /** Stored objects removed: records, values, pending writes, archive objects, snapshot parts, logs. */
  objectsDeleted: number;
  /** Their bytes. */
  bytesFreed: number;
}

export function emptyCounts(): PruneCounts {
  return {
    threadsDeleted: 0,
    threadsBusy: 0,
    checkpointsDeleted: 0,
    memoryItemsDeleted: 0,
    sessionsDeleted: 0,
    objectsDeleted: 0,
    bytesFreed: 0,
  };
}

/** Counts one removed object of `bytes`. */
export function countObject(counts: PruneCounts, bytes: number): void {
  counts.objectsDeleted += 1;
  counts.bytesFreed += bytes;
}
