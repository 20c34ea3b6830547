import { randomBytes } from 'node:crypto';

import type { AuditEvent } from '../audit/auditLog';
import { noTransactionalAuditLog, pendingEvent, type TransactionalAuditLog } from '../audit/pending';
import { type Lru, lru } from '../lru';
import {
  type CairnError,
  NotFoundError,
  PreconditionFailedError,
  RunFencedError,
  StorageUnavailableError,
  ThreadBusyError,
} from '../protocol/errors';
import { casPause } from '../retry';
import type { KeyValueStore, StoredValue } from '../storage/keyValueStore';
import { threadKey } from './layout';
import {
  type CheckpointRecord,
  decodeCheckpointRecord,
  decodeThreadRecord,
  encodeThreadRecord,
  type EndedStatus,
  type HeadEntry,
  type LiveRun,
  type ThreadRecord,
} from './records';
import type { ThreadStoreOptions } from './threadTypes';
import { ValueCache } from './valueCache';

/**
 * The thread records of a tenant's thread space (`t/<threadId>`): read, kept as a hint of the
 * ETag, and written with a compare-and-swap carrying the audit events of the change (its outbox);
 * with the rules every writer of a thread is checked against (one writer at a time, fencing by
 * run). The runs, the history and the commit protocol (runs.ts, history.ts, commitProtocol.ts)
 * build on it; threadStore.ts puts them together.
 */

/** Heads held inline: the most recently changed namespaces, within a byte budget. */
const MAX_INLINE_HEADS = 32;
const THREAD_RECORD_BUDGET_BYTES = 1024 * 1024;
const ROOT_NAMESPACE = '';
export const MAX_CAS_ATTEMPTS = 10;
/** Audit events a thread record's outbox may hold before the trail is asked which are appended. */
const OUTBOX_CHECK_AT = 16;
/** Audit events pending on one thread beyond which changes are refused (fail closed). */
const OUTBOX_MAX = 64;
const THREADS_KEPT = 10_000;
const THREADS_KEPT_BYTES = 32 * 1024 * 1024;
/** Checkpoint records kept for history listings (see ThreadRecords.checkpointRecord). */
const RECORDS_KEPT = 20_000;
const RECORDS_KEPT_BYTES = 8 * 1024 * 1024;

/** A read kept by the ETag it was read at, and what keeping it costs in bytes. */
interface KeptRead<T> {
  readonly etag: string;
  readonly value: T;
  readonly size: number;
}

const keptReads = <T extends object>(): Lru<string, KeptRead<T>> =>
  lru<string, KeptRead<T>>(RECORDS_KEPT, { limit: RECORDS_KEPT_BYTES, of: (kept) => kept.size });

/**
 * The value at `key` of the tenant's thread space, which a listing gave `etag`: the kept one when
 * this instance read that version (no request), else read, opened and kept; null when it is gone.
 */
async function readListed<T extends object>(
  kept: Lru<string, KeptRead<T>>,
  store: KeyValueStore,
  tenant: string,
  key: string,
  etag: string | undefined,
  open: (stored: StoredValue) => { value: T; size: number },
): Promise<T | null> {
  const id = `${tenant}\n${key}`;
  const hit = kept.get(id);
  if (hit !== undefined && etag !== undefined && etag !== '' && hit.etag === etag) return hit.value;
  const stored = await store.read(key);
  if (stored === null) return null;
  const opened = open(stored);
  if (stored.etag !== '') kept.set(id, { etag: stored.etag, ...opened });
  return opened.value;
}

/** A request waiting for the thread record as read or written by a request sent after `after`. */
interface Waiter {
  readonly after: number;
  readonly resolve: (snapshot: Snapshot | null | undefined) => void;
}

/** A thread record as read, with the ETag its next compare-and-swap names. */
export interface Snapshot {
  readonly etag: string;
  readonly record: ThreadRecord;
  /** Its size as stored, in bytes (what keeping it costs). */
  readonly size: number;
}

export const iso = (ms: number) => new Date(ms).toISOString();

export function newThreadRecord(threadId: string, now: number): ThreadRecord {
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
    chunkKey: randomBytes(32).toString('base64'),
  };
}

export function liveRun(thread: ThreadRecord, now: number): LiveRun | null {
  const run = thread.run;
  return run !== null && Date.parse(run.leaseExpiresAt) > now ? run : null;
}

export function busy(thread: ThreadRecord, holder: LiveRun, now: number, what: string): ThreadBusyError {
  const retryAfter = Math.max(1, Math.ceil((Date.parse(holder.leaseExpiresAt) - now) / 1000));
  return new ThreadBusyError(
    `${what}: thread ${thread.threadId} is held by run ${holder.runId} (its lease ends in ${retryAfter} s unless renewed)`,
    holder.runId,
    retryAfter,
  );
}

/** What is known of run `runId` of `thread` once it no longer holds it. */
export function statusOf(thread: ThreadRecord, runId: string): EndedStatus | 'unknown' {
  if (thread.run?.runId === runId) return 'expired';
  return thread.recentRuns.find((run) => run.runId === runId)?.status ?? 'unknown';
}

export function fenced(thread: ThreadRecord, runId: string): RunFencedError {
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
export function writerRefusal(
  thread: ThreadRecord,
  runId: string | undefined,
  now: number,
): CairnError | null {
  const live = liveRun(thread, now);
  if (runId === undefined) return live === null ? null : busy(thread, live, now, 'name the run (runId)');
  if (live?.runId === runId) return null;
  return fenced(thread, runId);
}

/**
 * Keeps the thread record small: at most 32 heads inline and about 1 MiB of them, dropping the
 * least recently changed namespaces first, never the root namespace nor a rewound head (the newest
 * checkpoint of a dropped namespace is its head). `heads` is in order of change, oldest first.
 */
export function fitHeads(heads: Map<string, HeadEntry>): Map<string, HeadEntry> {
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

export function cacheKey(tenant: string, threadId: string): string {
  return `${tenant}\n${threadId}`;
}

export function noThread(threadId: string): NotFoundError {
  return new NotFoundError(`thread ${threadId} does not exist`);
}

export function tooBusy(): StorageUnavailableError {
  return new StorageUnavailableError('the thread is changing too fast to write; retry');
}

export class ThreadRecords {
  readonly storeOf: (tenant: string) => KeyValueStore;
  readonly audit: TransactionalAuditLog;
  readonly now: () => number;
  /**
   * The thread record this instance last read or wrote, per thread: a put names its ETag in the
   * compare-and-swap without reading first. A hint only: a stale one costs a re-read and a retry.
   */
  readonly known = lru<string, Snapshot>(THREADS_KEPT, {
    limit: THREADS_KEPT_BYTES,
    of: (snapshot) => snapshot.size,
  });

  /** The channel values this instance stored or read lately (see ValueCache). */
  readonly values = new ValueCache();

  /**
   * Checkpoint records the history listing read lately, by `<tenant>\n<key>`, with the ETag they
   * were read at: a listing that gives a key the same ETag (one version of one key, never reused)
   * answers the record without its read. A record is create-only; a record of a checkpoint id
   * stored again after retention removed it has another ETag.
   */
  private readonly listedRecords = keptReads<CheckpointRecord>();
  /** Pending writes the history listing read lately, the same way (see {@link pendingWrites}). */
  private readonly listedWrites = keptReads<StoredValue>();

  /**
   * Each read and compare-and-swap of a thread record takes the next number when it is sent, so
   * that what it answers is known to show the record as it stood after everything numbered lower
   * had begun (see {@link observedAfter}).
   */
  private sent = 0;
  /** Checkpoint puts this instance has on their way, per thread (see {@link putOnItsWay}). */
  private readonly puts = new Map<string, number>();
  /** Requests waiting for a thread record sent after a number (see {@link observedAfter}). */
  private readonly waiting = new Map<string, Set<Waiter>>();

  constructor(options: ThreadStoreOptions) {
    this.storeOf = options.storeOf;
    this.audit = options.audit ?? noTransactionalAuditLog;
    this.now = options.now ?? Date.now;
  }

  /**
   * Reads the current thread record, lets `decide` derive the next one from it, and writes that
   * with a compare-and-swap (create-only when the thread is absent), from the start again when
   * another writer got in between. `decide` may throw to refuse, or return no `next` to write
   * nothing.
   */
  async mutate(
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

  /**
   * The checkpoint record at `key` of the tenant's thread space, which a listing gave `etag`: kept
   * when this instance read that version (no request), else read (and kept); null when it is gone
   * (removed after a refused put, between the listing and the read).
   */
  async checkpointRecord(
    store: KeyValueStore,
    tenant: string,
    key: string,
    etag: string | undefined,
  ): Promise<CheckpointRecord | null> {
    return readListed(this.listedRecords, store, tenant, key, etag, (stored) => {
      const record = decodeCheckpointRecord(stored.value, key);
      // What keeping it costs: the record decoded (its JSON's objects, its values and pack inflated).
      const inline = Object.values(record.inline ?? {}).reduce((sum, bytes) => sum + bytes.length, 0);
      const size = 2 * stored.value.length + inline + (record.pack?.length ?? 0) + record.checkpoint.length;
      return { value: record, size };
    });
  }

  /**
   * The pending writes at `key` of the tenant's thread space, which a listing gave `etag`: kept when
   * this instance read that version (no request), else read (and kept); null when there are none.
   */
  async pendingWrites(
    store: KeyValueStore,
    tenant: string,
    key: string,
    etag: string,
  ): Promise<StoredValue | null> {
    return readListed(this.listedWrites, store, tenant, key, etag, (stored) => ({
      value: stored,
      size: stored.value.length + 256,
    }));
  }

  /**
   * Marks a checkpoint put of the thread as on its way in this instance until `done` is called: it
   * reads or compare-and-swaps the thread record before it ends (see {@link observedAfter}).
   */
  putOnItsWay(tenant: string, threadId: string): { done: () => void } {
    const key = cacheKey(tenant, threadId);
    this.puts.set(key, (this.puts.get(key) ?? 0) + 1);
    return {
      done: () => {
        const left = (this.puts.get(key) ?? 1) - 1;
        if (left > 0) {
          this.puts.set(key, left);
          return;
        }
        this.puts.delete(key);
        // No put left to read or write the record: whoever still waits reads it.
        for (const waiter of this.waiting.get(key) ?? []) waiter.resolve(undefined);
        this.waiting.delete(key);
      },
    };
  }

  /**
   * The thread record as it stood at a moment after this call, when a put of the thread on its way
   * in this instance reads it or writes it by a compare-and-swap that is sent after this call (what
   * that request answers: the record read, null for none, or the record its compare-and-swap
   * stored, which was therefore the current one when it was stored); undefined when no put of the
   * thread is on its way, or they all end without such a request (the caller then reads it). The
   * same as a read sent now, without the request: a pending-writes put that comes while its
   * checkpoint's put is on its way checks its writer on the record that put commits.
   */
  observedAfter(tenant: string, threadId: string): Promise<Snapshot | null | undefined> {
    const key = cacheKey(tenant, threadId);
    if (!this.puts.has(key)) return Promise.resolve(undefined);
    const after = this.sent;
    return new Promise((resolve) => {
      let waiters = this.waiting.get(key);
      if (waiters === undefined) {
        waiters = new Set();
        this.waiting.set(key, waiters);
      }
      waiters.add({ after, resolve });
    });
  }

  /** What a read or compare-and-swap numbered `number` answered, for whoever waits for it. */
  private observed(key: string, number: number, snapshot: Snapshot | null): void {
    const waiters = this.waiting.get(key);
    if (waiters === undefined) return;
    for (const waiter of waiters) {
      if (number <= waiter.after) continue;
      waiters.delete(waiter);
      waiter.resolve(snapshot);
    }
    if (waiters.size === 0) this.waiting.delete(key);
  }

  async readThread(store: KeyValueStore, tenant: string, threadId: string): Promise<Snapshot | null> {
    const number = ++this.sent;
    const stored = await store.read(threadKey(threadId));
    const key = cacheKey(tenant, threadId);
    if (stored === null) {
      this.known.delete(key);
      this.observed(key, number, null);
      return null;
    }
    // The same version as the one kept is not decoded again (an ETag names one version).
    const kept = this.known.get(key);
    const snapshot =
      kept !== undefined && kept.etag === stored.etag && stored.etag !== ''
        ? kept
        : {
            etag: stored.etag,
            record: decodeThreadRecord(stored.value, threadId),
            size: stored.value.length,
          };
    this.known.set(key, snapshot);
    this.observed(key, number, snapshot);
    return snapshot;
  }

  /**
   * Writes `next` over `current` (create-only when null); PreconditionFailedError when it lost. The
   * outbox keeps only audit events not known to be in the trail: those this instance appended go
   * at once; when many are left (appended by other instances), the trail is asked about them.
   */
  async commit(
    store: KeyValueStore,
    tenant: string,
    current: Snapshot | null,
    proposed: ThreadRecord,
  ): Promise<Snapshot> {
    const next = await this.withOutbox(tenant, proposed);
    const key = cacheKey(tenant, next.threadId);
    const number = ++this.sent;
    try {
      const written = await store.write(
        threadKey(next.threadId),
        encodeThreadRecord(next),
        current === null ? { ifAbsent: true } : { ifMatch: current.etag },
      );
      const snapshot = { etag: written.etag, record: next, size: written.size };
      this.known.set(key, snapshot);
      this.observed(key, number, snapshot);
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
}
