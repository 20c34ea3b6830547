import type { AuditEvent } from '../audit/auditLog';
import { pendingEvent } from '../audit/pending';
import { InvalidArgumentError, NotFoundError, PreconditionFailedError } from '../protocol/errors';
import { forEachLimited } from '../protocol/pool';
import { casPause } from '../retry';
import type { KeyValueStore } from '../storage/keyValueStore';
import { CheckpointCommits } from './commitProtocol';
import { ThreadHistory } from './history';
import { checkCheckpointId, checkNamespace, checkRunId, checkThreadId } from './identifiers';
import { KeyScan, type ScanStart } from './keyScan';
import { keysOf, threadKey } from './layout';
import {
  type RunView,
  type ThreadRecord,
  type ThreadView,
  threadView,
  type TypedBytes,
  withoutInline,
} from './records';
import { ThreadRuns } from './runs';
import { threadDeletedEventId } from './threadAudit';
import {
  busy,
  cacheKey,
  fitHeads,
  iso,
  liveRun,
  MAX_CAS_ATTEMPTS,
  newThreadRecord,
  noThread,
  ThreadRecords,
  tooBusy,
  writerRefusal,
} from './threadRecords';
import type {
  CheckpointPut,
  CheckpointTuple,
  HistoryPage,
  HistoryQuery,
  PutResult,
  RunStart,
  ThreadListQuery,
  ThreadStoreOptions,
  WritesPut,
} from './threadTypes';

export { matchesFilter } from './history';
export type * from './threadTypes';
export { SENDS_CHANNEL } from './threadTypes';

const PARALLEL_READS = 16;

/**
 * The thread store: threads, their checkpoints (as deltas), pending writes, rewinds and runs, on
 * the key/value storage contract, so that it behaves the same on the local filesystem and on Azure
 * Blob. Every rule that two instances could race on is decided by a compare-and-swap on the thread
 * record's ETag (Azure's own If-Match); nothing relies on a lock in this process.
 *
 * Threads belong to a tenant: each tenant has its own thread names, in a key space of its own
 * (`KeyValueStoreFactory.forSpace('threads', tenant)`), unreachable from the key/value API.
 *
 * Keys in a tenant's thread space:
 * - `t/<threadId>`: the thread record (see records.ts); every change is a compare-and-swap.
 * - `d/<threadId>/<incarnation>/c/<inverted checkpoint id>/<namespace>`: checkpoint records,
 *   create-only and immutable. Ascending key order is newest first across every namespace, so a
 *   thread's history is one listing.
 * - `d/.../v/<namespace>/<producer checkpoint id>/<channel>`: channel values, create-only, stored
 *   once by the checkpoint whose put changed the channel; later checkpoints refer to it.
 * - `d/.../w/<namespace>/<checkpoint id>`: the pending writes of a checkpoint (appended lines).
 * - `d/.../n/<namespace>`: marks a namespace that has had a checkpoint (answers "none yet" in one
 *   request for a namespace whose head the thread record no longer holds).
 *
 * Runs: a run holds the thread with a lease; the serving instance's clock decides whether the
 * lease has expired (`leaseExpiresAt` is compared with this process's `Date.now()`). Instances are
 * assumed to keep their clocks within a second or two of each other (NTP; Azure's hosts do): a
 * lease is therefore only as exact as that skew, and holders should renew at a fraction of it.
 *
 * The parts, one file each: threadRecords.ts (the thread record's read and compare-and-swap, the
 * writer rules), runs.ts (leases, fencing tokens), history.ts (reads and listings),
 * commitProtocol.ts (puts of checkpoints and pending writes), threadTypes.ts (what they take and
 * answer). This class holds them together and keeps the thread-wide operations (create, list,
 * delete, rewind).
 */
export class ThreadStore {
  private readonly records: ThreadRecords;
  private readonly history: ThreadHistory;
  private readonly commits: CheckpointCommits;
  private readonly runs: ThreadRuns;

  constructor(options: ThreadStoreOptions) {
    this.records = new ThreadRecords(options);
    this.history = new ThreadHistory(this.records);
    this.commits = new CheckpointCommits(this.records, this.history, options);
    this.runs = new ThreadRuns(this.records);
  }

  // Threads.

  /** Creates the thread unless it exists; idempotent. */
  async createThread(tenant: string, threadId: string): Promise<{ created: boolean; thread: ThreadView }> {
    checkThreadId(threadId);
    const store = this.records.storeOf(tenant);
    const current = await this.records.readThread(store, tenant, threadId);
    if (current !== null) return { created: false, thread: threadView(current.record, this.records.now()) };
    const now = this.records.now();
    try {
      const written = await this.records.commit(store, tenant, null, newThreadRecord(threadId, now));
      return { created: true, thread: threadView(written.record, now) };
    } catch (error) {
      if (!(error instanceof PreconditionFailedError)) throw error;
      return { created: false, thread: await this.getThread(tenant, threadId) };
    }
  }

  async getThread(tenant: string, threadId: string): Promise<ThreadView> {
    checkThreadId(threadId);
    const current = await this.records.readThread(this.records.storeOf(tenant), tenant, threadId);
    if (current === null) throw noThread(threadId);
    return threadView(current.record, this.records.now());
  }

  /** Thread names in ascending order, `prefix`-filtered, after `after` or from a `cursor`. */
  async listThreads(
    tenant: string,
    query: ThreadListQuery,
  ): Promise<{ threads: { threadId: string }[]; next: string | null }> {
    const prefix = query.prefix ?? '';
    if (prefix !== '' && !/^[A-Za-z0-9._-]{1,128}$/.test(prefix)) {
      throw new InvalidArgumentError('prefix', 'must be at most 128 characters of [A-Za-z0-9._-]');
    }
    if (query.after !== undefined) checkThreadId(query.after, 'after');
    const start: ScanStart =
      query.cursor !== undefined
        ? { cursor: query.cursor }
        : query.after !== undefined
          ? { afterKey: threadKey(query.after) }
          : {};
    const scan = new KeyScan(this.records.storeOf(tenant), `t/${prefix}`, start);
    const threads: { threadId: string }[] = [];
    while (threads.length < query.limit) {
      const key = await scan.next();
      if (key === null) return { threads, next: null };
      threads.push({ threadId: key.slice(2) });
    }
    return { threads, next: (await scan.hasMore()) ? scan.position() : null };
  }

  /**
   * Deletes the thread with its checkpoints, values and writes. Refused with `thread_busy` while a
   * live run holds it. The thread record goes first (compare-and-swap), then its data: a crash in
   * between leaves data no name reaches any more (a new thread of that name has a new
   * incarnation), for a retention job to remove.
   */
  async deleteThread(tenant: string, threadId: string, actor?: string): Promise<void> {
    checkThreadId(threadId);
    const store = this.records.storeOf(tenant);
    let deleted: ThreadRecord | undefined;
    for (let attempt = 0; deleted === undefined; attempt++) {
      if (attempt === MAX_CAS_ATTEMPTS) throw tooBusy();
      const current = await this.records.readThread(store, tenant, threadId);
      if (current === null) throw noThread(threadId);
      const now = this.records.now();
      const live = liveRun(current.record, now);
      if (live !== null) throw busy(current.record, live, now, 'finish or interrupt the run first');
      try {
        await this.deleteThreadRecord(tenant, threadId, current.record, current.etag, actor);
        deleted = current.record;
      } catch (error) {
        if (!(error instanceof PreconditionFailedError)) throw error;
        // The pause before the next attempt.
        await casPause(attempt + 1);
      }
    }
    await deleteAll(store, keysOf(deleted).data);
  }

  /**
   * Deletes the thread record `record`, read with `etag` (compare-and-swap: PreconditionFailedError
   * when it changed), recorded in the audit trail as `thread.deleted` by `actor`. The thread's data
   * is left to the caller (deleteThread, or the retention pass that found its time to live over).
   * Returns false when the record was gone already (another deleter; the event is the same).
   */
  async deleteThreadRecord(
    tenant: string,
    threadId: string,
    record: ThreadRecord,
    etag: string,
    actor?: string,
  ): Promise<boolean> {
    const store = this.records.storeOf(tenant);
    const { incarnation } = record;
    // One event id per incarnation, whoever deletes it; the outbox events not known to be in the
    // trail go into its marker: they committed with the record, which is about to go.
    const event = pendingEvent(
      {
        id: threadDeletedEventId(threadId, incarnation),
        tenant,
        action: 'thread.deleted',
        ...(actor === undefined ? {} : { actor }),
        threadId,
        outcome: 'ok',
      },
      this.records.now(),
    );
    const carried = (record.outbox ?? []).filter(
      (pending) => !this.records.audit.isKnownAppended(pending.id),
    );
    if (this.records.audit.enabled) {
      await this.records.audit.begin(tenant, [event], {
        kind: 'thread-delete',
        threadId,
        incarnation,
        carried,
      });
    }
    // A marker of a deletion refused here stays until a repair finds the thread alive and drops it
    // (another deleter of this incarnation may hold the same marker).
    const removed = await store.delete(threadKey(threadId), { ifMatch: etag });
    this.records.known.delete(cacheKey(tenant, threadId));
    if (this.records.audit.enabled) {
      // With carried events the marker stays: the repair appends them once their own appenders'
      // window has passed.
      await this.records.audit.commit(tenant, [event], { keepMarkers: carried.length > 0 });
    }
    return removed;
  }

  /**
   * The incarnation of a thread and the ids of the audit events its record carries (what the audit
   * repair needs to tell whether a change committed); null when the thread does not exist.
   */
  auditOutbox(tenant: string, threadId: string): Promise<{ incarnation: string; outbox: string[] } | null> {
    return this.records.auditOutbox(tenant, threadId);
  }

  // Checkpoints (commitProtocol.ts, history.ts).

  putCheckpoint(tenant: string, threadId: string, put: CheckpointPut): Promise<PutResult> {
    return this.commits.putCheckpoint(tenant, threadId, put);
  }

  getCheckpoint(
    tenant: string,
    threadId: string,
    ns: string,
    checkpointId?: string,
    likelyHead?: string,
  ): Promise<CheckpointTuple> {
    return this.history.getCheckpoint(tenant, threadId, ns, checkpointId, likelyHead);
  }

  /**
   * The values of a checkpoint (for a delta's base or a read's `since`), from what this instance
   * keeps when it can; null when the namespace does not store the checkpoint (see ThreadHistory).
   */
  checkpointValues(
    tenant: string,
    threadId: string,
    ns: string,
    checkpointId: string,
  ): Promise<Readonly<Record<string, TypedBytes>> | null> {
    return this.history.checkpointValues(tenant, threadId, ns, checkpointId);
  }

  listCheckpoints(tenant: string, threadId: string, query: HistoryQuery): Promise<HistoryPage> {
    return this.history.listCheckpoints(tenant, threadId, query);
  }

  putWrites(tenant: string, threadId: string, put: WritesPut): Promise<{ writes: number }> {
    return this.commits.putWrites(tenant, threadId, put);
  }

  /**
   * Moves the head of a namespace to a stored checkpoint of it (an earlier one, usually); the next
   * put names it as parent, and the checkpoints after it stay readable as an abandoned branch.
   * Allowed to the live run (named) or when no live run holds the thread.
   */
  async rewind(
    tenant: string,
    threadId: string,
    target: { ns: string; checkpointId: string; runId?: string },
    actor?: string,
  ): Promise<ThreadView> {
    checkThreadId(threadId);
    checkNamespace(target.ns);
    checkCheckpointId(target.checkpointId);
    if (target.runId !== undefined) checkRunId(target.runId);
    return this.records
      .mutate(tenant, threadId, async (store, current, now) => {
        if (current === null) throw noThread(threadId);
        const thread = current.record;
        const refusal = writerRefusal(thread, target.runId, now);
        if (refusal !== null) throw refusal;
        const record = await this.history.recordIn(store, thread, target.checkpointId, target.ns);
        if (record === null) {
          throw new NotFoundError(
            `thread ${threadId} has no checkpoint ${target.checkpointId} in namespace "${target.ns}"`,
          );
        }
        const heads = new Map(thread.heads);
        heads.delete(target.ns);
        heads.set(target.ns, { record: withoutInline(record), since: iso(now), rewound: true });
        const event: AuditEvent = {
          tenant,
          action: 'thread.rewound',
          ...(actor === undefined ? {} : { actor }),
          threadId,
          ...(target.runId === undefined ? {} : { runId: target.runId }),
          subject: target.checkpointId,
          outcome: 'ok',
          details: { ns: target.ns },
        };
        return { next: { ...thread, heads: fitHeads(heads), updatedAt: iso(now) }, events: [event] };
      })
      .then((written) => threadView(written.record, this.records.now()));
  }

  // Runs (runs.ts).

  startRun(
    tenant: string,
    threadId: string,
    start: RunStart,
    actor?: string,
  ): Promise<{ run: RunView; interrupted: string | null }> {
    return this.runs.startRun(tenant, threadId, start, actor);
  }

  heartbeat(tenant: string, threadId: string, runId: string, leaseMs?: number): Promise<RunView> {
    return this.runs.heartbeat(tenant, threadId, runId, leaseMs);
  }

  finishRun(
    tenant: string,
    threadId: string,
    runId: string,
    status: 'finished' | 'failed',
    actor?: string,
  ): Promise<RunView> {
    return this.runs.finishRun(tenant, threadId, runId, status, actor);
  }

  getRun(tenant: string, threadId: string, runId: string): Promise<RunView> {
    return this.runs.getRun(tenant, threadId, runId);
  }
}

/**
 * Deletes every key under `prefix`, in one pass through the listing (each key once, whatever is
 * written meanwhile). A key stored after its page was listed (a put of the deleted incarnation still
 * in flight) belongs to no thread record: retention collects it.
 */
async function deleteAll(store: KeyValueStore, prefix: string): Promise<void> {
  let cursor: string | undefined;
  do {
    const page = await store.list({ prefix, limit: 1000, ...(cursor === undefined ? {} : { cursor }) });
    await forEachLimited(page.keys, PARALLEL_READS, async (key) => {
      await store.delete(key);
    });
    cursor = page.cursor ?? undefined;
  } while (cursor !== undefined);
}
