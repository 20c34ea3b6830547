import { createHash, randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';

import type { AuditEvent } from '../audit/auditLog';
import { noTransactionalAuditLog, pendingEvent, type TransactionalAuditLog } from '../audit/pending';
import {
  type CairnError,
  ConflictError,
  IntegrityError,
  InvalidArgumentError,
  NotFoundError,
  PayloadTooLargeError,
  PreconditionFailedError,
  RunFencedError,
  StorageUnavailableError,
  ThreadBusyError,
} from '../errors';
import { lru } from '../lru';
import { forEachLimited } from '../pool';
import { casPause } from '../retry';
import type { KeyValueStore } from '../storage/keyValueStore';
import {
  checkCheckpointId,
  checkNamespace,
  checkRunId,
  checkThreadId,
  invertedId,
  namespaceSegment,
} from './identifiers';
import { KeyScan, type ScanStart } from './keyScan';
import { keysOf, namespaceOfRecordKey, threadKey } from './layout';
import { canonicalOrder, encodeWritesLine, mergeWrites, type PendingWrite } from './pendingWrites';
import {
  type ChannelVersion,
  type CheckpointRecord,
  decodeCheckpointRecord,
  decodeThreadRecord,
  decodeValue,
  encodeCheckpointRecord,
  encodeThreadRecord,
  encodeValue,
  type EndedRun,
  endedRunView,
  type EndedStatus,
  type HeadEntry,
  type LiveRun,
  liveRunView,
  MAX_RECENT_RUNS,
  ownValue,
  type RunView,
  sameCheckpoint,
  setOwn,
  type ThreadRecord,
  type ThreadView,
  threadView,
  type TypedBytes,
} from './records';
import { threadDeletedEventId } from './threadAudit';
import {
  checkLease,
  type CheckpointPut,
  checkPut,
  checkWrites,
  MAX_BUSY_TIMEOUT_MS,
  type WritesPut,
} from './validation';

/** What the store takes, with the checks of validation.ts. */
export type { CheckpointPut, WritesPut } from './validation';

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
 */

export type OnBusy = 'reject' | 'wait' | 'interrupt';

type ThreadKeys = ReturnType<typeof keysOf>;

export interface ThreadStoreOptions {
  /** The tenant's thread space; cheap, no I/O (a factory's `forSpace('threads', tenant)`). */
  readonly storeOf: (tenant: string) => KeyValueStore;
  /** The store's largest value, in bytes (a channel value must fit with its type tag). */
  readonly maxValueBytes: number;
  /**
   * True when `storeOf` seals values at rest: a value's key then carries 16 random bytes instead of
   * a digest of its content (a digest of the plaintext would let anyone who can list the storage
   * confirm a guessed value).
   */
  readonly sealed?: boolean;
  /**
   * The audit trail: run starts, finishes and interruptions, rewinds and deletions are recorded
   * (see shared/audit/pending.ts for how a record and its change never disagree). Default: off.
   */
  readonly audit?: TransactionalAuditLog;
  readonly now?: () => number;
  /** How long a put's commit retries lost compare-and-swaps; tests shorten it. Default 10 s. */
  readonly commitBudgetMs?: number;
}

export interface PutResult {
  /** False when the checkpoint was already stored with this content (a retry). */
  readonly created: boolean;
  readonly threadId: string;
  readonly ns: string;
  readonly checkpointId: string;
  /** The namespace's head after the put (this checkpoint, unless a retry found the head moved on). */
  readonly head: string;
}

export interface CheckpointTuple {
  readonly threadId: string;
  readonly ns: string;
  readonly checkpointId: string;
  readonly parent: string | null;
  readonly createdAt: string;
  readonly v: number;
  readonly checkpoint: TypedBytes;
  readonly metadata: Record<string, unknown>;
  readonly channelVersions: Record<string, ChannelVersion>;
  /** Channel → value, for every channel that has one at this checkpoint. */
  readonly values: Record<string, TypedBytes>;
  /** Merged, in (task path, task id, index) order. */
  readonly pendingWrites: PendingWrite[];
  /** For a checkpoint of format below 4 with a parent: the parent's writes to `__pregel_tasks`. */
  readonly pendingSends?: TypedBytes[];
  readonly runId?: string;
}

export interface HistoryQuery {
  /** One namespace; undefined: every namespace. */
  readonly ns?: string;
  /** Only checkpoints with a smaller id (LangGraph's `before`). */
  readonly before?: string;
  /** A `next` of an earlier page; instead of `before`. */
  readonly cursor?: string;
  /** 1-100. */
  readonly limit: number;
  /** Top-level metadata keys that must equal these JSON values. */
  readonly filter?: Readonly<Record<string, unknown>>;
}

export interface HistoryPage {
  readonly checkpoints: CheckpointTuple[];
  /** Pass as `cursor` for the next page; null when no older checkpoint is left. */
  readonly next: string | null;
}

export interface ThreadListQuery {
  readonly prefix?: string;
  readonly after?: string;
  readonly cursor?: string;
  /** 1-1000. */
  readonly limit: number;
}

export interface RunStart {
  readonly onBusy: OnBusy;
  /** How long `wait` waits for the thread, 0-60 s. */
  readonly busyTimeoutMs: number;
  readonly leaseMs: number;
}

/** LangGraph's channel of pending sends (`TASKS`), read for checkpoints of format below 4. */
export const SENDS_CHANNEL = '__pregel_tasks';

/** Heads held inline: the most recently changed namespaces, within a byte budget. */
const MAX_INLINE_HEADS = 32;
const THREAD_RECORD_BUDGET_BYTES = 1024 * 1024;
const ROOT_NAMESPACE = '';
const MAX_CAS_ATTEMPTS = 10;
/** How long a put's commit keeps retrying lost compare-and-swaps (at least MAX_CAS_ATTEMPTS times). */
const COMMIT_BUDGET_MS = 10_000;
/** Audit events a thread record's outbox may hold before the trail is asked which are appended. */
const OUTBOX_CHECK_AT = 16;
/** Audit events pending on one thread beyond which changes are refused (fail closed). */
const OUTBOX_MAX = 64;
/** A history page reads at most this many records (a filter may skip most), then hands a cursor. */
const MAX_EXAMINED_PER_PAGE = 256;
/** A history page stops adding checkpoints once their values pass this many bytes. */
const PAGE_VALUE_BUDGET_BYTES = 8 * 1024 * 1024;
const PARALLEL_READS = 16;
/** A history page lists at most this many pages of keys (a namespace may be rare among them). */
const MAX_LISTINGS_PER_PAGE = 20;
const THREADS_KEPT = 10_000;
const THREADS_KEPT_BYTES = 32 * 1024 * 1024;

/** A thread record as read, with the ETag its next compare-and-swap names. */
interface Snapshot {
  readonly etag: string;
  readonly record: ThreadRecord;
  /** Its size as stored, in bytes (what keeping it costs). */
  readonly size: number;
}

const iso = (ms: number) => new Date(ms).toISOString();

function newThreadRecord(threadId: string, now: number): ThreadRecord {
  return {
    v: 1,
    threadId,
    incarnation: randomBytes(12).toString('base64url'),
    createdAt: iso(now),
    updatedAt: iso(now),
    heads: new Map(),
    fence: 0,
    run: null,
    recentRuns: [],
  };
}

function liveRun(thread: ThreadRecord, now: number): LiveRun | null {
  const run = thread.run;
  return run !== null && Date.parse(run.leaseExpiresAt) > now ? run : null;
}

function busy(thread: ThreadRecord, holder: LiveRun, now: number, what: string): ThreadBusyError {
  const retryAfter = Math.max(1, Math.ceil((Date.parse(holder.leaseExpiresAt) - now) / 1000));
  return new ThreadBusyError(
    `${what}: thread ${thread.threadId} is held by run ${holder.runId} (its lease ends in ${retryAfter} s unless renewed)`,
    holder.runId,
    retryAfter,
  );
}

/** What is known of run `runId` of `thread` once it no longer holds it. */
function statusOf(thread: ThreadRecord, runId: string): EndedStatus | 'unknown' {
  if (thread.run?.runId === runId) return 'expired';
  return thread.recentRuns.find((run) => run.runId === runId)?.status ?? 'unknown';
}

function fenced(thread: ThreadRecord, runId: string): RunFencedError {
  const status = statusOf(thread, runId);
  return new RunFencedError(
    `run ${runId} does not hold thread ${thread.threadId} (${status}); nothing it sent was stored`,
    runId,
    status,
  );
}

/**
 * Why a writer may not change `thread` now, or null: a named run must be the live holder; a writer
 * without a run may only write while no live run holds the thread (one writer per thread).
 */
function writerRefusal(thread: ThreadRecord, runId: string | undefined, now: number): CairnError | null {
  const live = liveRun(thread, now);
  if (runId === undefined) return live === null ? null : busy(thread, live, now, 'name the run (runId)');
  if (live?.runId === runId) return null;
  return fenced(thread, runId);
}

/** Errors that refuse a put outright: its record must then not stay visible. */
function isRefusal(error: unknown): boolean {
  return (
    error instanceof ThreadBusyError ||
    error instanceof RunFencedError ||
    error instanceof NotFoundError ||
    error instanceof ConflictError
  );
}

/** The put's checkpoint was stored under an incarnation that lost the race to create the thread. */
class LostCreation extends Error {}

/** Every compare-and-swap of a put's commit lost (within the budget): it certainly did not commit. */
class CommitExhausted extends Error {}

/**
 * Equality of JSON values as JSON sees them. Not `node:util`'s `isDeepStrictEqual`: it tells -0 from
 * 0 (Object.is), while JSON writes both as `0`, so a filter holding -0 (JSON.parse('-0')) would stop
 * matching the stored metadata it was written from.
 */
function jsonEquals(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a) && Array.isArray(b)) {
    return a.length === b.length && a.every((item, index) => jsonEquals(item, b[index]));
  }
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  const keys = Object.keys(x);
  return (
    keys.length === Object.keys(y).length &&
    keys.every((key) => Object.hasOwn(y, key) && jsonEquals(x[key], y[key]))
  );
}

/** Equality on the metadata's top-level keys; values compare as JSON (objects by content). */
export function matchesFilter(
  metadata: Readonly<Record<string, unknown>>,
  filter: Readonly<Record<string, unknown>>,
): boolean {
  return Object.entries(filter).every(
    ([key, value]) => Object.hasOwn(metadata, key) && jsonEquals(metadata[key], value),
  );
}

/** A value a record names is not stored: damage, unless the thread was deleted meanwhile. */
class MissingValueError extends IntegrityError {}

/** Reads values once per request (unchanged channels of several checkpoints share one). */
class ValueReader {
  private readonly pending = new Map<string, Promise<TypedBytes>>();
  bytes = 0;

  constructor(private readonly store: KeyValueStore) {}

  read(key: string, what: string): Promise<TypedBytes> {
    let value = this.pending.get(key);
    if (value === undefined) {
      value = this.store.read(key).then((stored) => {
        if (stored === null) throw new MissingValueError(`the stored value of ${what} is missing`);
        this.bytes += stored.value.length;
        return decodeValue(stored.value, what);
      });
      this.pending.set(key, value);
    }
    return value;
  }
}

export class ThreadStore {
  private readonly storeOf: (tenant: string) => KeyValueStore;
  private readonly maxValueBytes: number;
  private readonly sealed: boolean;
  private readonly audit: TransactionalAuditLog;
  private readonly now: () => number;
  private readonly commitBudgetMs: number;
  /**
   * The thread record this instance last read or wrote, per thread: a put names its ETag in the
   * compare-and-swap without reading first. A hint only: a stale one costs a re-read and a retry.
   */
  private readonly known = lru<string, Snapshot>(THREADS_KEPT, {
    limit: THREADS_KEPT_BYTES,
    of: (snapshot) => snapshot.size,
  });

  constructor(options: ThreadStoreOptions) {
    this.storeOf = options.storeOf;
    this.maxValueBytes = options.maxValueBytes;
    this.sealed = options.sealed ?? false;
    this.audit = options.audit ?? noTransactionalAuditLog;
    this.now = options.now ?? Date.now;
    this.commitBudgetMs = options.commitBudgetMs ?? COMMIT_BUDGET_MS;
  }

  // Threads.

  /** Creates the thread unless it exists; idempotent. */
  async createThread(tenant: string, threadId: string): Promise<{ created: boolean; thread: ThreadView }> {
    checkThreadId(threadId);
    const store = this.storeOf(tenant);
    const current = await this.readThread(store, tenant, threadId);
    if (current !== null) return { created: false, thread: threadView(current.record, this.now()) };
    const now = this.now();
    try {
      const written = await this.commit(store, tenant, null, newThreadRecord(threadId, now));
      return { created: true, thread: threadView(written.record, now) };
    } catch (error) {
      if (!(error instanceof PreconditionFailedError)) throw error;
      return { created: false, thread: await this.getThread(tenant, threadId) };
    }
  }

  async getThread(tenant: string, threadId: string): Promise<ThreadView> {
    checkThreadId(threadId);
    const current = await this.readThread(this.storeOf(tenant), tenant, threadId);
    if (current === null) throw noThread(threadId);
    return threadView(current.record, this.now());
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
    const scan = new KeyScan(this.storeOf(tenant), `t/${prefix}`, start);
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
    const store = this.storeOf(tenant);
    let deleted: ThreadRecord | undefined;
    for (let attempt = 0; deleted === undefined; attempt++) {
      if (attempt === MAX_CAS_ATTEMPTS) throw tooBusy();
      const current = await this.readThread(store, tenant, threadId);
      if (current === null) throw noThread(threadId);
      const now = this.now();
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
    const store = this.storeOf(tenant);
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
      this.now(),
    );
    const carried = (record.outbox ?? []).filter((pending) => !this.audit.isKnownAppended(pending.id));
    if (this.audit.enabled) {
      await this.audit.begin(tenant, [event], { kind: 'thread-delete', threadId, incarnation, carried });
    }
    // A marker of a deletion refused here stays until a repair finds the thread alive and drops it
    // (another deleter of this incarnation may hold the same marker).
    const removed = await store.delete(threadKey(threadId), { ifMatch: etag });
    this.known.delete(cacheKey(tenant, threadId));
    if (this.audit.enabled) {
      // With carried events the marker stays: the repair appends them once their own appenders'
      // window has passed.
      await this.audit.commit(tenant, [event], { keepMarkers: carried.length > 0 });
    }
    return removed;
  }

  // Checkpoints.

  /**
   * Stores a checkpoint and makes it its namespace's head. In this order, so that a crash at any
   * point leaves the old head or the new one, never a head without its data: the changed channels'
   * values (in parallel, create-only: a retry keeps what is stored), the checkpoint record
   * (create-only), then the thread record (compare-and-swap on the ETag this instance last saw:
   * the commit point, where the writer's run is checked). A put refused at the commit removes the
   * record it created. A put of a stored checkpoint id with the same content is a retry (answered
   * as stored, `created` false); with other content it is a 409 `conflict`.
   *
   * Storage requests, when the thread record this instance holds is current and the namespace's
   * head is the parent: k (changed channels with a value) + 2. A stale thread record adds a read
   * and a retry; a parent that is not the head (a fork) adds its record's read; the first put of a
   * namespace adds its mark.
   */
  async putCheckpoint(tenant: string, threadId: string, put: CheckpointPut): Promise<PutResult> {
    checkThreadId(threadId);
    checkPut(put, this.maxValueBytes);
    const store = this.storeOf(tenant);
    for (let restart = 0; ; restart++) {
      let snapshot = this.known.get(cacheKey(tenant, threadId)) ?? null;
      if (snapshot === null || writerRefusal(snapshot.record, put.runId, this.now()) !== null) {
        // Refuse only on the current record, never on a kept one.
        snapshot = await this.readThread(store, tenant, threadId);
      }
      const now = this.now();
      const thread = snapshot?.record ?? newThreadRecord(threadId, now);
      const refusal = writerRefusal(thread, put.runId, now);
      if (refusal !== null) throw refusal;
      const keys = keysOf(thread);
      const parent = await this.parentOf(store, thread, put);
      const encoded = encodedValues(put, this.sealed);
      const record = this.recordOf(put, parent, now, encoded);
      checkRecordSize(record, this.maxValueBytes);
      const newNamespace = !thread.heads.has(put.ns);
      // Values are keyed by their digest too: bytes a refused or crashed put left behind can never
      // stand for other content sent later under the same checkpoint id.
      const [written] = await Promise.all([
        Promise.all(
          [...encoded].map(([channel, { bytes, source }]) =>
            storeValue(store, keys.value(put.ns, source, channel), bytes),
          ),
        ),
        newNamespace ? createOnly(store, keys.namespaceMark(put.ns), Buffer.alloc(0)) : Promise.resolve(),
      ]);
      const stored = await this.storeRecord(store, keys, record, encoded);
      if (!stored.created) {
        // A retry, or other content under a stored id: the values this put wrote that the stored
        // record does not name go now (a crash before leaves them to retention, as any refused put's).
        await discardUnnamed(store, keys, stored.record, written);
        if (!stored.same) {
          throw new ConflictError(
            `checkpointId: checkpoint ${record.id} of namespace "${record.ns}" is stored with other content; checkpoint ids are immutable`,
          );
        }
      }
      try {
        return await this.commitPut(
          store,
          tenant,
          snapshot,
          thread,
          stored.record,
          stored.created,
          put.runId,
        );
      } catch (error) {
        if (error instanceof LostCreation && restart === 0) continue;
        // A put that certainly did not commit (refused, or every compare-and-swap lost) leaves no
        // visible record. (A storage fault leaves it: the commit may have happened.) A crash right
        // here would leave the record in the history, never as a head.
        if (stored.created && (isRefusal(error) || error instanceof CommitExhausted)) {
          await this.removeUncommitted(store, tenant, thread, put);
        }
        if (error instanceof LostCreation || error instanceof CommitExhausted) throw tooBusy();
        throw error;
      }
    }
  }

  /** The latest checkpoint (the head) of a namespace, or the one with `checkpointId`. */
  async getCheckpoint(
    tenant: string,
    threadId: string,
    ns: string,
    checkpointId?: string,
  ): Promise<CheckpointTuple> {
    checkThreadId(threadId);
    checkNamespace(ns);
    if (checkpointId !== undefined) checkCheckpointId(checkpointId);
    const store = this.storeOf(tenant);
    const current = await this.readThread(store, tenant, threadId);
    if (current === null) throw noThread(threadId);
    const thread = current.record;
    const record =
      checkpointId === undefined
        ? await this.latestOf(store, thread, ns)
        : await this.recordIn(store, thread, checkpointId, ns);
    if (record === null) {
      throw new NotFoundError(
        checkpointId === undefined
          ? `thread ${threadId} has no checkpoint in namespace "${ns}"`
          : `thread ${threadId} has no checkpoint ${checkpointId} in namespace "${ns}"`,
      );
    }
    return this.unlessDeleted(store, tenant, thread, () =>
      this.tupleOf(store, thread, record, new ValueReader(store)),
    );
  }

  /**
   * Checkpoints newest first (by id, descending, across namespaces unless `ns` is given), each with
   * its values and pending writes. A page holds at most `limit`, reads at most 256 records (a
   * filter may skip many) and stops early past 8 MiB of values; `next` continues it. Checkpoint ids
   * are taken to be unique within a thread (LangGraph's are): `before` skips every checkpoint of
   * that id.
   */
  async listCheckpoints(tenant: string, threadId: string, query: HistoryQuery): Promise<HistoryPage> {
    checkThreadId(threadId);
    if (query.ns !== undefined) checkNamespace(query.ns);
    if (query.before !== undefined) checkCheckpointId(query.before, 'before');
    if (query.before !== undefined && query.cursor !== undefined) {
      throw new InvalidArgumentError('cursor', 'cannot be combined with before');
    }
    const store = this.storeOf(tenant);
    const current = await this.readThread(store, tenant, threadId);
    if (current === null) throw noThread(threadId);
    const thread = current.record;
    const keys = keysOf(thread);
    const start: ScanStart =
      query.cursor !== undefined
        ? { cursor: query.cursor }
        : query.before !== undefined
          ? // Every key of that id: `<inverted id>/<namespace>`, namespaces being below DEL.
            { afterKey: `${keys.checkpoints}${invertedId(query.before)}/\u007f` }
          : {};
    const scan = new KeyScan(store, keys.checkpoints, start);
    const wanted = query.ns === undefined ? undefined : namespaceSegment(query.ns);
    const reader = new ValueReader(store);
    const found: CheckpointTuple[] = [];
    let examined = 0;
    while (
      found.length < query.limit &&
      examined < MAX_EXAMINED_PER_PAGE &&
      scan.pagesRead < MAX_LISTINGS_PER_PAGE &&
      reader.bytes <= PAGE_VALUE_BUDGET_BYTES
    ) {
      // The next keys of the wanted namespace (no more than could still be answered), read in parallel.
      const batch: string[] = [];
      const room = Math.min(PARALLEL_READS, query.limit - found.length, MAX_EXAMINED_PER_PAGE - examined);
      while (batch.length < room && scan.pagesRead < MAX_LISTINGS_PER_PAGE) {
        const key = await scan.next();
        if (key === null) break;
        if (wanted === undefined || namespaceOfRecordKey(key, keys.checkpoints) === wanted) batch.push(key);
      }
      if (batch.length === 0) break;
      examined += batch.length;
      const records = await Promise.all(
        batch.map(async (key) => {
          const stored = await store.read(key);
          // Absent: removed after a refused put, between the listing and the read.
          return stored === null ? null : decodeCheckpointRecord(stored.value, key);
        }),
      );
      const matching = records.filter(
        (record): record is CheckpointRecord =>
          record !== null && (query.filter === undefined || matchesFilter(record.metadata, query.filter)),
      );
      found.push(
        ...(await this.unlessDeleted(store, tenant, thread, () =>
          Promise.all(matching.map((record) => this.tupleOf(store, thread, record, reader))),
        )),
      );
    }
    return { checkpoints: found, next: (await scan.hasMore()) ? scan.position() : null };
  }

  /**
   * Appends the pending writes of one task to a checkpoint (see pendingWrites.ts for the merge
   * rule). The writer is checked on the current thread record before the append: a run fenced in
   * the moment between that check and the append still gets its writes stored (the append itself
   * cannot be conditional on another key). They attach to a checkpoint, never move a head.
   */
  async putWrites(tenant: string, threadId: string, put: WritesPut): Promise<{ writes: number }> {
    checkThreadId(threadId);
    checkWrites(put);
    const store = this.storeOf(tenant);
    const current = await this.readThread(store, tenant, threadId);
    if (current === null) throw noThread(threadId);
    const thread = current.record;
    const refusal = writerRefusal(thread, put.runId, this.now());
    if (refusal !== null) throw refusal;
    const keys = keysOf(thread);
    if (
      thread.heads.get(put.ns)?.record.id !== put.checkpointId &&
      (await store.head(keys.record(put.checkpointId, put.ns))) === null
    ) {
      throw new NotFoundError(
        `thread ${threadId} has no checkpoint ${put.checkpointId} in namespace "${put.ns}"`,
      );
    }
    await store.append(
      keys.writes(put.ns, put.checkpointId),
      encodeWritesLine(put.taskId, put.taskPath, put.writes, put.runId),
    );
    return { writes: put.writes.length };
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
    return this.mutate(tenant, threadId, async (store, current, now) => {
      if (current === null) throw noThread(threadId);
      const thread = current.record;
      const refusal = writerRefusal(thread, target.runId, now);
      if (refusal !== null) throw refusal;
      const record = await this.recordIn(store, thread, target.checkpointId, target.ns);
      if (record === null) {
        throw new NotFoundError(
          `thread ${threadId} has no checkpoint ${target.checkpointId} in namespace "${target.ns}"`,
        );
      }
      const heads = new Map(thread.heads);
      heads.delete(target.ns);
      heads.set(target.ns, { record, since: iso(now), rewound: true });
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
    }).then((written) => threadView(written.record, this.now()));
  }

  // Runs.

  /**
   * Starts a run on the thread (creating the thread when absent). When a live run holds it:
   * `reject` answers `thread_busy` at once; `wait` polls with backoff until the thread is free or
   * `busyTimeoutMs` passed (then `thread_busy`); `interrupt` ends the holder as `interrupted` (its
   * stored checkpoints stay) and starts this run. An expired holder is ended as `expired`. Every
   * start takes the next fencing token.
   */
  async startRun(
    tenant: string,
    threadId: string,
    start: RunStart,
    actor?: string,
  ): Promise<{ run: RunView; interrupted: string | null }> {
    checkThreadId(threadId);
    checkLease(start.leaseMs);
    if (!(start.busyTimeoutMs >= 0 && start.busyTimeoutMs <= MAX_BUSY_TIMEOUT_MS)) {
      throw new InvalidArgumentError(
        'busyTimeout',
        `must be from 0 to ${MAX_BUSY_TIMEOUT_MS / 1000} seconds`,
      );
    }
    const deadline = this.now() + start.busyTimeoutMs;
    let interrupted: string | null = null;
    for (let delay = 50; ; delay = Math.min(1000, delay * 1.5)) {
      try {
        const written = await this.mutate(tenant, threadId, async (_store, current, now) => {
          const thread = current?.record ?? newThreadRecord(threadId, now);
          const live = liveRun(thread, now);
          if (live !== null && start.onBusy !== 'interrupt') {
            throw busy(thread, live, now, 'the run cannot start');
          }
          interrupted = live?.runId ?? null;
          const ended: EndedRun[] =
            thread.run === null
              ? []
              : [
                  {
                    runId: thread.run.runId,
                    fencingToken: thread.run.fencingToken,
                    startedAt: thread.run.startedAt,
                    endedAt: live === null ? thread.run.leaseExpiresAt : iso(now),
                    status: live === null ? 'expired' : 'interrupted',
                  },
                ];
          const run: LiveRun = {
            runId: `run-${randomBytes(12).toString('base64url')}`,
            fencingToken: thread.fence + 1,
            startedAt: iso(now),
            leaseExpiresAt: iso(now + start.leaseMs),
            leaseMs: start.leaseMs,
          };
          const by = actor === undefined ? {} : { actor };
          const events: AuditEvent[] = [];
          if (live !== null) {
            events.push({
              tenant,
              action: 'run.interrupted',
              ...by,
              threadId,
              runId: live.runId,
              outcome: 'ok',
              details: { fencingToken: live.fencingToken, by: run.runId },
            });
          }
          events.push({
            tenant,
            action: 'run.started',
            ...by,
            threadId,
            runId: run.runId,
            outcome: 'ok',
            details: {
              fencingToken: run.fencingToken,
              onBusy: start.onBusy,
              leaseMs: start.leaseMs,
              ...(thread.run !== null && live === null ? { expiredRunId: thread.run.runId } : {}),
            },
          });
          return {
            next: {
              ...thread,
              fence: run.fencingToken,
              run,
              recentRuns: [...ended, ...thread.recentRuns].slice(0, MAX_RECENT_RUNS),
              updatedAt: iso(now),
            },
            events,
          };
        });
        const run = written.record.run;
        if (run === null) throw new StorageUnavailableError('the run was not recorded; retry');
        return { run: liveRunView(threadId, run, this.now()), interrupted };
      } catch (error) {
        if (!(error instanceof ThreadBusyError) || start.onBusy !== 'wait') throw error;
        const remaining = deadline - this.now();
        if (remaining <= 0) throw error;
        await sleep(Math.min(remaining, delay * (0.75 + Math.random() / 2)));
      }
    }
  }

  /**
   * Renews the lease of the live run `runId` for `leaseMs` (default: the lease it started with);
   * `run_fenced` once it no longer holds the thread, its lease expired included.
   */
  async heartbeat(tenant: string, threadId: string, runId: string, leaseMs?: number): Promise<RunView> {
    checkThreadId(threadId);
    checkRunId(runId);
    if (leaseMs !== undefined) checkLease(leaseMs);
    const written = await this.mutate(tenant, threadId, async (_store, current, now) => {
      const thread = this.runHolder(current, threadId, runId, now);
      const held = thread.run as LiveRun;
      const run = {
        ...held,
        leaseMs: leaseMs ?? held.leaseMs,
        leaseExpiresAt: iso(now + (leaseMs ?? held.leaseMs)),
      };
      return { next: { ...thread, run, updatedAt: iso(now) } };
    });
    return liveRunView(threadId, written.record.run as LiveRun, this.now());
  }

  /**
   * Ends the live run `runId` as `finished` or `failed`. Idempotent: ending it again with the same
   * status answers the same; another status, or a run that no longer holds the thread, is
   * `run_fenced`.
   */
  async finishRun(
    tenant: string,
    threadId: string,
    runId: string,
    status: 'finished' | 'failed',
    actor?: string,
  ): Promise<RunView> {
    checkThreadId(threadId);
    checkRunId(runId);
    let view: RunView | undefined;
    await this.mutate(tenant, threadId, async (_store, current, now) => {
      const thread = current?.record;
      const ended = thread?.recentRuns.find((run) => run.runId === runId);
      if (thread !== undefined && ended !== undefined && ended.status === status) {
        view = endedRunView(threadId, ended);
        return {};
      }
      const holder = this.runHolder(current, threadId, runId, now);
      const run = holder.run as LiveRun;
      const done: EndedRun = {
        runId,
        fencingToken: run.fencingToken,
        startedAt: run.startedAt,
        endedAt: iso(now),
        status,
      };
      view = endedRunView(threadId, done);
      return {
        next: {
          ...holder,
          run: null,
          recentRuns: [done, ...holder.recentRuns].slice(0, MAX_RECENT_RUNS),
          updatedAt: iso(now),
        },
        events: [
          {
            tenant,
            action: 'run.finished',
            ...(actor === undefined ? {} : { actor }),
            threadId,
            runId,
            outcome: 'ok',
            details: { status, fencingToken: run.fencingToken },
          },
        ],
      };
    });
    return view as RunView;
  }

  async getRun(tenant: string, threadId: string, runId: string): Promise<RunView> {
    checkThreadId(threadId);
    checkRunId(runId);
    const current = await this.readThread(this.storeOf(tenant), tenant, threadId);
    if (current === null) throw noThread(threadId);
    const thread = current.record;
    if (thread.run?.runId === runId) return liveRunView(threadId, thread.run, this.now());
    const ended = thread.recentRuns.find((run) => run.runId === runId);
    if (ended === undefined) throw new NotFoundError(`thread ${threadId} has no run ${runId}`);
    return endedRunView(threadId, ended);
  }

  // Internals.

  /** The thread whose live run is `runId`; throws not_found or run_fenced otherwise. */
  private runHolder(current: Snapshot | null, threadId: string, runId: string, now: number): ThreadRecord {
    if (current === null) throw noThread(threadId);
    const thread = current.record;
    if (thread.run?.runId === runId && liveRun(thread, now) !== null) return thread;
    if (statusOf(thread, runId) === 'unknown') {
      throw new NotFoundError(`thread ${threadId} has no run ${runId}`);
    }
    throw fenced(thread, runId);
  }

  /**
   * Reads the current thread record, lets `decide` derive the next one from it, and writes that
   * with a compare-and-swap (create-only when the thread is absent), from the start again when
   * another writer got in between. `decide` may throw to refuse, or return no `next` to write
   * nothing.
   */
  private async mutate(
    tenant: string,
    threadId: string,
    decide: (
      store: KeyValueStore,
      current: Snapshot | null,
      now: number,
    ) => Promise<{ next?: ThreadRecord; events?: AuditEvent[] }>,
  ): Promise<Snapshot> {
    const store = this.storeOf(tenant);
    for (let attempt = 0; attempt < MAX_CAS_ATTEMPTS; attempt++) {
      const current = await this.readThread(store, tenant, threadId);
      const now = this.now();
      const { next, events = [] } = await decide(store, current, now);
      if (next === undefined) return current as Snapshot;
      // Audited: a marker of each event first, then the change with the events in its outbox (the
      // proof that it committed), then the events appended (see shared/audit/pending.ts).
      const pending = this.audit.enabled ? events.map((event) => pendingEvent(event, now)) : [];
      const record = pending.length === 0 ? next : { ...next, outbox: [...(next.outbox ?? []), ...pending] };
      if (pending.length > 0) {
        await this.audit.begin(tenant, pending, {
          kind: 'thread',
          threadId,
          incarnation: record.incarnation,
        });
      }
      let written: Snapshot;
      try {
        written = await this.commit(store, tenant, current, record);
      } catch (error) {
        // Certainly not written: the markers go. (After a fault the write may have happened: the
        // markers stay, and the repair tells by the outbox.)
        if (error instanceof PreconditionFailedError && pending.length > 0) {
          await this.audit.abandon(tenant, pending);
        }
        if (!(error instanceof PreconditionFailedError)) throw error;
        // The pause before the next attempt.
        await casPause(attempt + 1);
        continue;
      }
      if (pending.length > 0) await this.audit.commit(tenant, pending);
      return written;
    }
    throw tooBusy();
  }

  /**
   * The incarnation of a thread and the ids of the audit events its record carries (what the audit
   * repair needs to tell whether a change committed); null when the thread does not exist.
   */
  async auditOutbox(
    tenant: string,
    threadId: string,
  ): Promise<{ incarnation: string; outbox: string[] } | null> {
    const current = await this.readThread(this.storeOf(tenant), tenant, threadId);
    if (current === null) return null;
    return {
      incarnation: current.record.incarnation,
      outbox: (current.record.outbox ?? []).map((event) => event.id),
    };
  }

  private async readThread(store: KeyValueStore, tenant: string, threadId: string): Promise<Snapshot | null> {
    const stored = await store.read(threadKey(threadId));
    const key = cacheKey(tenant, threadId);
    if (stored === null) {
      this.known.delete(key);
      return null;
    }
    const snapshot = {
      etag: stored.etag,
      record: decodeThreadRecord(stored.value, threadId),
      size: stored.value.length,
    };
    this.known.set(key, snapshot);
    return snapshot;
  }

  /**
   * Writes `next` over `current` (create-only when null); PreconditionFailedError when it lost. The
   * outbox keeps only audit events not known to be in the trail: those this instance appended go
   * at once; when many are left (appended by other instances), the trail is asked about them.
   */
  private async commit(
    store: KeyValueStore,
    tenant: string,
    current: Snapshot | null,
    proposed: ThreadRecord,
  ): Promise<Snapshot> {
    const next = await this.withOutbox(tenant, proposed);
    const key = cacheKey(tenant, next.threadId);
    try {
      const written = await store.write(
        threadKey(next.threadId),
        encodeThreadRecord(next),
        current === null ? { ifAbsent: true } : { ifMatch: current.etag },
      );
      const snapshot = { etag: written.etag, record: next, size: written.size };
      this.known.set(key, snapshot);
      return snapshot;
    } catch (error) {
      this.known.delete(key);
      throw error;
    }
  }

  /** `record` with its outbox pruned (see {@link commit}); refuses (503) when too many events pend. */
  private async withOutbox(tenant: string, record: ThreadRecord): Promise<ThreadRecord> {
    const outbox = record.outbox;
    if (outbox === undefined) return record;
    let kept = outbox.filter((event) => !this.audit.isKnownAppended(event.id));
    if (this.audit.enabled && kept.length > OUTBOX_CHECK_AT) {
      const appended = await Promise.all(kept.map((event) => this.audit.appended(tenant, event.id)));
      kept = kept.filter((_event, index) => appended[index] !== true);
      if (kept.length > OUTBOX_MAX) {
        throw new StorageUnavailableError(
          'audit events of this thread are not yet in the audit trail; retry once the trail is reachable',
        );
      }
    }
    if (kept.length === outbox.length) return record;
    const pruned: { -readonly [K in keyof ThreadRecord]: ThreadRecord[K] } = { ...record, outbox: kept };
    if (kept.length === 0) delete pruned.outbox;
    return pruned;
  }

  /** The commit of a put (see putCheckpoint): the head moves in a compare-and-swap, retried. */
  private async commitPut(
    store: KeyValueStore,
    tenant: string,
    snapshot: Snapshot | null,
    thread: ThreadRecord,
    record: CheckpointRecord,
    created: boolean,
    runId: string | undefined,
  ): Promise<PutResult> {
    let current = snapshot;
    let base = thread;
    let parentSeen = false;
    // A time budget, not a count: many instances committing to one thread (each to its own
    // namespace) lose many rounds each, yet all get through within it.
    const deadline = performance.now() + this.commitBudgetMs;
    for (let attempt = 0; attempt < MAX_CAS_ATTEMPTS || performance.now() < deadline; attempt++) {
      if (!parentSeen && record.parent !== null && base.heads.get(record.ns)?.record.id !== record.parent) {
        await this.checkParentStored(store, base, record);
        parentSeen = true;
      }
      const now = this.now();
      const next = withHead(base, record, created, now);
      const result = (head: string) => ({
        created,
        threadId: base.threadId,
        ns: record.ns,
        checkpointId: record.id,
        head,
      });
      if (next === null) return result(base.heads.get(record.ns)?.record.id ?? record.id);
      try {
        await this.commit(store, tenant, current, next);
        return result(record.id);
      } catch (error) {
        if (!(error instanceof PreconditionFailedError)) throw error;
      }
      const creating = current === null;
      current = await this.readThread(store, tenant, base.threadId);
      if (current === null) throw noThread(base.threadId);
      if (current.record.incarnation !== base.incarnation) {
        if (creating) throw new LostCreation();
        throw new ConflictError(
          `thread ${base.threadId} was deleted and created again while the checkpoint was stored`,
        );
      }
      const refusal = writerRefusal(current.record, runId, this.now());
      if (refusal !== null) throw refusal;
      base = current.record;
      await casPause(attempt);
    }
    throw new CommitExhausted();
  }

  /**
   * A put whose parent is not the head of the thread record it commits over (a fork, or a head that
   * moved meanwhile) makes sure, after its own record is stored, that the parent's record still is:
   * retention may remove checkpoints that are no head. Either the parent is still there now, and a
   * collector that removes it later lists this put's record (stored before) and keeps the values it
   * names; or it is gone, and the put is refused (409, its record removed) rather than committing a
   * checkpoint whose inherited values may go. A head is never removed.
   */
  private async checkParentStored(
    store: KeyValueStore,
    thread: ThreadRecord,
    record: CheckpointRecord,
  ): Promise<void> {
    const parent = record.parent as string;
    if ((await store.head(keysOf(thread).record(parent, record.ns))) === null) {
      throw new ConflictError(
        `parent: thread ${thread.threadId} has no checkpoint ${parent} in namespace "${record.ns}" any more (retention removed it)`,
      );
    }
  }

  /**
   * Removes the record a put created but did not commit, unless the thread's head names it now:
   * another instance retrying the same put (which found the record stored, so did not create it)
   * may have committed it meanwhile.
   */
  private async removeUncommitted(
    store: KeyValueStore,
    tenant: string,
    thread: ThreadRecord,
    put: CheckpointPut,
  ): Promise<void> {
    const now = await this.readThread(store, tenant, thread.threadId);
    if (
      now !== null &&
      now.record.incarnation === thread.incarnation &&
      now.record.heads.get(put.ns)?.record.id === put.checkpointId
    ) {
      return;
    }
    await store.delete(keysOf(thread).record(put.checkpointId, put.ns));
  }

  /**
   * Runs `read` of `thread`'s values; a value found missing because the thread was deleted (or
   * deleted and created again) meanwhile answers that the thread does not exist, as a read that
   * came a moment later would. A value missing from a thread that is still there is damage.
   */
  private async unlessDeleted<T>(
    store: KeyValueStore,
    tenant: string,
    thread: ThreadRecord,
    read: () => Promise<T>,
  ): Promise<T> {
    try {
      return await read();
    } catch (error) {
      if (!(error instanceof MissingValueError)) throw error;
      const now = await this.readThread(store, tenant, thread.threadId);
      if (now === null || now.record.incarnation !== thread.incarnation) throw noThread(thread.threadId);
      throw error;
    }
  }

  /** The parent's record: the namespace's head when it is the parent, else read. */
  private async parentOf(
    store: KeyValueStore,
    thread: ThreadRecord,
    put: CheckpointPut,
  ): Promise<CheckpointRecord | null> {
    if (put.parent === null) return null;
    const head = thread.heads.get(put.ns);
    if (head?.record.id === put.parent) return head.record;
    const parent = await this.recordIn(store, thread, put.parent, put.ns);
    if (parent === null) {
      throw new ConflictError(
        `parent: thread ${thread.threadId} has no checkpoint ${put.parent} in namespace "${put.ns}"`,
      );
    }
    return parent;
  }

  /**
   * The record of a put: each channel with a value points at the checkpoint holding it (this one
   * for the channels sent, the parent's source for the others, which must have the parent's version).
   */
  private recordOf(
    put: CheckpointPut,
    parent: CheckpointRecord | null,
    now: number,
    encoded: ReadonlyMap<string, EncodedValue>,
  ): CheckpointRecord {
    const valueSources: Record<string, string> = {};
    for (const [channel, version] of Object.entries(put.channelVersions)) {
      if (Object.hasOwn(put.values, channel)) {
        const value = encoded.get(channel);
        if (value !== undefined) setOwn(valueSources, channel, value.source);
        continue;
      }
      const parentVersion = parent === null ? undefined : ownValue(parent.channelVersions, channel);
      if (parentVersion !== version) {
        throw new InvalidArgumentError(
          `values.${channel}`,
          `the channel has version ${JSON.stringify(version)}, the parent ${
            parentVersion === undefined ? 'none' : JSON.stringify(parentVersion)
          }: a changed channel's value must be sent (null when it has none)`,
        );
      }
      const source = parent === null ? undefined : ownValue(parent.valueSources, channel);
      if (source !== undefined) setOwn(valueSources, channel, source);
    }
    return {
      id: put.checkpointId,
      ns: put.ns,
      parent: put.parent,
      createdAt: iso(now),
      v: put.v,
      type: put.checkpoint.type,
      checkpoint: put.checkpoint.data.toString('base64'),
      metadata: put.metadata,
      channelVersions: put.channelVersions,
      valueSources,
      ...(put.runId === undefined ? {} : { runId: put.runId }),
    };
  }

  /**
   * Creates the record, or finds the one stored by an earlier put of its id: `same` tells whether
   * that one has this put's content, its values included (see sameValues).
   */
  private async storeRecord(
    store: KeyValueStore,
    keys: ThreadKeys,
    record: CheckpointRecord,
    encoded: ReadonlyMap<string, EncodedValue>,
  ): Promise<{ record: CheckpointRecord; created: boolean; same: boolean }> {
    const key = keys.record(record.id, record.ns);
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        await store.write(key, encodeCheckpointRecord(record), { ifAbsent: true });
        return { record, created: true, same: true };
      } catch (error) {
        if (!(error instanceof PreconditionFailedError)) throw error;
      }
      const stored = await store.read(key);
      if (stored === null) continue; // removed by a refused put in between: create it again
      const existing = decodeCheckpointRecord(stored.value, record.id);
      const same =
        sameCheckpoint(existing, record) && (await this.sameValues(store, keys, existing, record, encoded));
      return { record: existing, created: false, same };
    }
    throw tooBusy();
  }

  /**
   * Whether a stored record and a put's record of the same checkpoint name the same value for each
   * channel. Unsealed, a value's source holds the digest of its bytes (type tag included), so equal
   * sources are equal values. Sealed, the sources of the values the checkpoint stored itself carry
   * random bytes: those values are read and compared byte for byte (only on this retry path).
   * Inherited sources come from the parent, already compared.
   */
  private async sameValues(
    store: KeyValueStore,
    keys: ThreadKeys,
    existing: CheckpointRecord,
    record: CheckpointRecord,
    encoded: ReadonlyMap<string, EncodedValue>,
  ): Promise<boolean> {
    const own = `${record.id}/`;
    const channels = new Set([...Object.keys(existing.valueSources), ...Object.keys(record.valueSources)]);
    const reads: { source: string; channel: string; bytes: Buffer }[] = [];
    for (const channel of channels) {
      const was = ownValue(existing.valueSources, channel);
      const now = ownValue(record.valueSources, channel);
      if (was === now) continue;
      const sent = encoded.get(channel);
      if (!this.sealed || was === undefined || !was.startsWith(own) || !now?.startsWith(own) || !sent) {
        return false;
      }
      reads.push({ source: was, channel, bytes: sent.bytes });
    }
    const stored = await Promise.all(
      reads.map(({ source, channel }) => store.read(keys.value(record.ns, source, channel))),
    );
    return reads.every(({ bytes }, index) => stored[index]?.value.equals(bytes) === true);
  }

  private async recordIn(
    store: KeyValueStore,
    thread: ThreadRecord,
    checkpointId: string,
    ns: string,
  ): Promise<CheckpointRecord | null> {
    const head = thread.heads.get(ns);
    if (head?.record.id === checkpointId) return head.record;
    const stored = await store.read(keysOf(thread).record(checkpointId, ns));
    return stored === null ? null : decodeCheckpointRecord(stored.value, checkpointId);
  }

  /**
   * The head of a namespace: inline in the thread record, else (a namespace whose head was pushed
   * out by newer ones) the newest checkpoint of that namespace in the history.
   */
  private async latestOf(
    store: KeyValueStore,
    thread: ThreadRecord,
    ns: string,
  ): Promise<CheckpointRecord | null> {
    const head = thread.heads.get(ns);
    if (head !== undefined) return head.record;
    const keys = keysOf(thread);
    if ((await store.head(keys.namespaceMark(ns))) === null) return null;
    const wanted = namespaceSegment(ns);
    const scan = new KeyScan(store, keys.checkpoints, {});
    for (let key = await scan.next(); key !== null; key = await scan.next()) {
      if (namespaceOfRecordKey(key, keys.checkpoints) !== wanted) continue;
      const stored = await store.read(key);
      if (stored !== null) return decodeCheckpointRecord(stored.value, key);
    }
    return null;
  }

  private async tupleOf(
    store: KeyValueStore,
    thread: ThreadRecord,
    record: CheckpointRecord,
    reader: ValueReader,
  ): Promise<CheckpointTuple> {
    const keys = keysOf(thread);
    const readWrites = async (checkpointId: string) =>
      mergeWrites((await store.read(keys.writes(record.ns, checkpointId)))?.value ?? null, checkpointId);
    const sources = Object.entries(record.valueSources);
    const [writes, values, sends] = await Promise.all([
      readWrites(record.id),
      Promise.all(
        sources.map(([channel, producer]) =>
          reader.read(
            keys.value(record.ns, producer, channel),
            `channel ${channel} of checkpoint ${record.id}`,
          ),
        ),
      ),
      record.v < 4 && record.parent !== null
        ? readWrites(record.parent).then((parentWrites) =>
            parentWrites
              .filter((write) => write.channel === SENDS_CHANNEL)
              .map(({ type, data }) => ({ type, data })),
          )
        : Promise.resolve(undefined),
    ]);
    const valueMap: Record<string, TypedBytes> = {};
    sources.forEach(([channel], index) => setOwn(valueMap, channel, values[index] as TypedBytes));
    return {
      threadId: thread.threadId,
      ns: record.ns,
      checkpointId: record.id,
      parent: record.parent,
      createdAt: record.createdAt,
      v: record.v,
      checkpoint: { type: record.type, data: Buffer.from(record.checkpoint, 'base64') },
      metadata: record.metadata,
      channelVersions: record.channelVersions,
      values: valueMap,
      pendingWrites: canonicalOrder(writes),
      ...(sends === undefined ? {} : { pendingSends: sends }),
      ...(record.runId === undefined ? {} : { runId: record.runId }),
    };
  }
}

/**
 * The thread with `record` as its namespace's head, or null when the head stays (a retry of a put
 * whose head already moved on: it moves only when the head is still the record's parent or older).
 */
function withHead(
  thread: ThreadRecord,
  record: CheckpointRecord,
  created: boolean,
  now: number,
): ThreadRecord | null {
  const head = thread.heads.get(record.ns);
  if (!created) {
    if (head?.record.id === record.id) return null;
    const moves = head === undefined || head.record.id === record.parent || record.id > head.record.id;
    if (!moves) return null;
  }
  const heads = new Map(thread.heads);
  heads.delete(record.ns);
  heads.set(record.ns, { record, since: iso(now) });
  return { ...thread, heads: fitHeads(heads), updatedAt: iso(now) };
}

/**
 * Keeps the thread record small: at most 32 heads inline and about 1 MiB of them, dropping the
 * least recently changed namespaces first, never the root namespace nor a rewound head (the newest
 * checkpoint of a dropped namespace is its head). `heads` is in order of change, oldest first.
 */
function fitHeads(heads: Map<string, HeadEntry>): Map<string, HeadEntry> {
  const size = () => [...heads.values()].reduce((sum, head) => sum + JSON.stringify(head).length, 0);
  let bytes = size();
  for (const [ns, head] of [...heads]) {
    if (heads.size <= MAX_INLINE_HEADS && bytes <= THREAD_RECORD_BUDGET_BYTES) break;
    if (ns === ROOT_NAMESPACE || head.rewound === true) continue;
    heads.delete(ns);
    bytes -= JSON.stringify(head).length;
  }
  return heads;
}

/** Create-only write that keeps what is stored (first wins). */
interface EncodedValue {
  readonly bytes: Buffer;
  /** The record's value source: `<checkpoint id>/<16 bytes, base64url>` (see encodedValues). */
  readonly source: string;
}

/**
 * The stored bytes of each channel value a put sends, with the source its record names: the first
 * 16 bytes of the bytes' SHA-256, or 16 random bytes when values are sealed (see ThreadStoreOptions).
 */
function encodedValues(put: CheckpointPut, sealed: boolean): Map<string, EncodedValue> {
  const encoded = new Map<string, EncodedValue>();
  for (const [channel, value] of Object.entries(put.values)) {
    if (value === null) continue;
    const bytes = encodeValue(value);
    const digest = (
      sealed ? randomBytes(16) : createHash('sha256').update(bytes).digest().subarray(0, 16)
    ).toString('base64url');
    encoded.set(channel, { bytes, source: `${put.checkpointId}/${digest}` });
  }
  return encoded;
}

/** A record over the value limit is refused before anything of the put is written. */
function checkRecordSize(record: CheckpointRecord, maxValueBytes: number): void {
  if (encodeCheckpointRecord(record).length > maxValueBytes) {
    throw new PayloadTooLargeError(maxValueBytes, 'the checkpoint record (metadata, channels, versions)');
  }
}

/**
 * Stores a value create-only. One already stored (a retry, or bytes a refused or crashed put left)
 * is written again with the same bytes (its key holds their digest): that gives it a new version
 * and modification time, so that a collector that listed it as old and unreferenced, and deletes
 * only the version it listed, leaves it; and one that deleted it already finds it stored again. So
 * a value this put names is never one a collector is about to remove.
 */
async function storeValue(store: KeyValueStore, key: string, value: Buffer): Promise<WrittenValue> {
  try {
    const { etag } = await store.write(key, value, { ifAbsent: true });
    return { key, etag, created: true };
  } catch (error) {
    if (!(error instanceof PreconditionFailedError)) throw error;
    const { etag } = await store.write(key, value);
    return { key, etag, created: false };
  }
}

/** A value a put wrote: `created` when the put created the key (no other put had it then). */
interface WrittenValue {
  readonly key: string;
  readonly etag: string;
  readonly created: boolean;
}

/**
 * Deletes the values a put created that `kept` (the record stored under its id) does not name: a
 * sealed retry's copies, or the values of other content refused under a stored id. Only a key this
 * put created, and only the version it wrote: a key another put wrote since (the same content,
 * which rewrites it) stays. Best effort: what a failure leaves, retention collects.
 */
async function discardUnnamed(
  store: KeyValueStore,
  keys: ThreadKeys,
  kept: CheckpointRecord,
  written: readonly WrittenValue[],
): Promise<void> {
  const named = new Set(
    Object.entries(kept.valueSources).map(([channel, source]) => keys.value(kept.ns, source, channel)),
  );
  await Promise.all(
    written
      .filter((value) => value.created && !named.has(value.key))
      .map((value) => store.delete(value.key, { ifMatch: value.etag }).catch(() => false)),
  );
}

async function createOnly(store: KeyValueStore, key: string, value: Buffer): Promise<void> {
  try {
    await store.write(key, value, { ifAbsent: true });
  } catch (error) {
    if (!(error instanceof PreconditionFailedError)) throw error;
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

function cacheKey(tenant: string, threadId: string): string {
  return `${tenant}\n${threadId}`;
}

function noThread(threadId: string): NotFoundError {
  return new NotFoundError(`thread ${threadId} does not exist`);
}

function tooBusy(): StorageUnavailableError {
  return new StorageUnavailableError('the thread is changing too fast to write; retry');
}
