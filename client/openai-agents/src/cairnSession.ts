import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';

import type { KeyValueClient } from '@cairn-state/client';
import { CairnClient, type CairnClientOptions } from '@cairn-state/client';
import { CairnHttpError, CairnNetworkError } from '@cairn-state/client';
import { canonicalJson } from '@cairn-state/protocol/canonicalJson';
import { mapLimited } from '@cairn-state/protocol/pool';
import type {
  AgentInputItem,
  Session,
  SessionHistoryTransactionArgs,
  SessionHistoryTransactionAwareSession,
} from '@openai/agents-core';

/**
 * A conversation history of the OpenAI Agents SDK kept in the tenant's key/value space, safe for
 * several workers on one session at once.
 *
 * Layout, under `openai-agents/sessions/<session id percent-encoded>/`:
 * - `segments/<segment id>`: a JSON array of items, written once (create-only) and never changed;
 * - `head`: JSON `{"version": 1, "segments": [{"id", "count", "bytes"}], "operations": [[id, digest]],
 *   "writes": [...]}`. The history is the first `count` items of each listed segment, in order.
 *
 * Every change is a compare-and-swap of the head: new items are first written to a new segment
 * (so a retry never sends them again), then the head is read with its ETag and replaced with
 * `If-Match` (`If-None-Match: *` when absent); a lost race reads again and recomputes. So two
 * workers appending at once both land, a pop removes exactly the item it returns (no item is
 * popped twice), and an operation id is recorded in the same write as its change, so a repeated
 * {@link CairnSession.applyHistoryTransaction} applies once. The head remembers the ids of its
 * last writes: a write whose answer was lost is recognised on the next read instead of being done
 * twice.
 *
 * Bounds: the head remembers the last 256 operation ids (a transaction repeated after 256 others
 * is applied again) and, past 32 segments, small segments are merged into one. Segments no head
 * refers to any more are deleted after the change that dropped them; a writer that dies between
 * writing a segment and the head leaves that segment behind (unreferenced, never read).
 *
 * Items are stored as JSON: values must be JSON (plain objects, arrays, strings, finite numbers,
 * booleans, null); anything else is refused before anything is written.
 *
 * A read limited by count never splits a tool call from its output: an output (`*_call_result`,
 * `*_call_output`) whose call is older than the newest `limit` items is left out with it, so
 * `getItems(limit)` may return fewer than `limit` items, never an output the model cannot match.
 *
 * Compaction ({@link CairnSession.replaceHistoryWithCompaction}, which the SDK's run loop calls
 * with a compaction item and the items it keeps) is one compare-and-swap of the head, like every
 * other change: no reader sees the history empty or half replaced, and a crash leaves the old
 * history or the new one. It replaces the history this session object last read or wrote; items
 * another worker appended since then are kept after the replacement (no acknowledged append is
 * lost), and when the history was changed otherwise meanwhile (a pop, a clear, another
 * replacement, or another worker merging small segments) it throws {@link HistoryTransactionError} and changes nothing.
 */

export const SESSION_KEY_PREFIX = 'openai-agents/sessions/';

export type CairnSessionOptions = (CairnClientOptions | { readonly client: CairnClient }) & {
  /** Default: a new random UUID. Any non-empty string of up to 512 characters. */
  readonly sessionId?: string;
  /** Compare-and-swap attempts of one change before it gives up (default 64). */
  readonly maxAttempts?: number;
  /** The largest segment written, in bytes of JSON (default 1 MiB; below the service's value limit). */
  readonly segmentBytes?: number;
};

/** A history transaction that cannot be applied: nothing was changed. */
export class HistoryTransactionError extends Error {
  override readonly name = 'HistoryTransactionError';
}

interface SegmentRef {
  readonly id: string;
  /** Items of the segment that belong to the history (the first `count`; fewer after a pop). */
  readonly count: number;
  /** Bytes of the whole segment. */
  readonly bytes: number;
}

interface Head {
  readonly version: 1;
  readonly segments: readonly SegmentRef[];
  /** `[operationId, digest of its transaction]`, oldest first. */
  readonly operations: readonly (readonly [string, string])[];
  /** Ids of the last writes of the head, oldest first. */
  readonly writes: readonly string[];
}

interface Change<T> {
  /** The head to store, or null when there is nothing to write. */
  readonly next: Head | null;
  readonly result: T;
  /** Segments the new head no longer lists: deleted once it is stored. */
  readonly dropped?: readonly string[];
}

/** A segment the head listed is gone: the head changed since it was read. */
class SegmentGone extends Error {}

const EMPTY_HEAD: Head = { version: 1, segments: [], operations: [], writes: [] };
const REMEMBERED_OPERATIONS = 256;
const REMEMBERED_WRITES = 64;
const MERGE_ABOVE_SEGMENTS = 32;
const READ_CONCURRENCY = 8;
const MAX_SESSION_ID_LENGTH = 512;

export class CairnSession
  implements SessionHistoryTransactionAwareSession, Required<Pick<Session, 'replaceHistoryWithCompaction'>>
{
  private readonly kv: KeyValueClient;
  private readonly sessionId: string;
  private readonly prefix: string;
  private readonly maxAttempts: number;
  private readonly segmentBytes: number;
  /** Segments are immutable: what was read once is good for as long as a head lists it. */
  private readonly segments = new Map<string, unknown[]>();
  /** The segments of the head this object last read items from or stored: what a compaction replaces. */
  private seen: readonly SegmentRef[] | null = null;

  constructor(options: CairnSessionOptions) {
    this.kv = ('client' in options ? options.client : new CairnClient(options)).kv;
    this.sessionId = options.sessionId ?? randomUUID();
    if (this.sessionId === '' || this.sessionId.length > MAX_SESSION_ID_LENGTH) {
      throw new TypeError(`sessionId must be 1-${MAX_SESSION_ID_LENGTH} characters`);
    }
    this.prefix = `${SESSION_KEY_PREFIX}${encodeSessionId(this.sessionId)}/`;
    this.maxAttempts = options.maxAttempts ?? 64;
    this.segmentBytes = options.segmentBytes ?? 1024 * 1024;
  }

  async getSessionId(): Promise<string> {
    return this.sessionId;
  }

  /** The whole history, or its newest `limit` items, oldest first. */
  async getItems(limit?: number): Promise<AgentInputItem[]> {
    if (limit !== undefined && limit <= 0) return [];
    for (let attempt = 1; ; attempt++) {
      const { head } = await this.readHead();
      try {
        const items = await this.itemsOf(head, limit);
        this.seen = head.segments;
        return structuredClone(limit === undefined ? items : withoutOrphanOutputs(items)) as AgentInputItem[];
      } catch (error) {
        if (!(error instanceof SegmentGone) || attempt >= this.maxAttempts) throw error;
      }
    }
  }

  async addItems(items: AgentInputItem[]): Promise<void> {
    if (items.length === 0) return;
    const refs = await this.writeSegments(items);
    await this.changeWithSegments(refs, (head) => ({
      next: { ...head, segments: [...head.segments, ...refs] },
      result: undefined,
    }));
  }

  /** Removes the newest item and returns it; undefined when the history is empty. */
  async popItem(): Promise<AgentInputItem | undefined> {
    const item = await this.update(async (head) => {
      const last = head.segments[head.segments.length - 1];
      if (last === undefined) return { next: null, result: undefined };
      const popped = (await this.segmentItems(last))[last.count - 1];
      const rest = head.segments.slice(0, -1);
      return last.count === 1
        ? { next: { ...head, segments: rest }, result: popped, dropped: [last.id] }
        : { next: { ...head, segments: [...rest, { ...last, count: last.count - 1 }] }, result: popped };
    });
    return item === undefined ? undefined : (structuredClone(item) as AgentInputItem);
  }

  /** Empties the history and forgets the operation ids applied to it. */
  async clearSession(): Promise<void> {
    await this.update(async (head) =>
      head.segments.length === 0 && head.operations.length === 0
        ? { next: null, result: undefined }
        : {
            next: { ...EMPTY_HEAD, writes: head.writes },
            result: undefined,
            dropped: head.segments.map((ref) => ref.id),
          },
    );
  }

  /**
   * Applies `append_items` or `replace_suffix` atomically, once per `operationId`: repeating an
   * operation id with the same transaction changes nothing; with a different one, or a suffix that
   * no longer matches, it throws {@link HistoryTransactionError} and changes nothing.
   */
  async applyHistoryTransaction(args: SessionHistoryTransactionArgs): Promise<void> {
    const { operationId, transaction } = validTransaction(args);
    const digest = createHash('sha256').update(canonicalJson(transaction)).digest('hex');
    const added = transaction.type === 'append_items' ? transaction.items : transaction.replacement;
    const refs = added.length === 0 ? [] : await this.writeSegments(added);
    await this.changeWithSegments(refs, async (head) => {
      const applied = head.operations.find(([id]) => id === operationId);
      if (applied !== undefined) {
        if (applied[1] !== digest) {
          throw new HistoryTransactionError(
            `operation ${operationId} was already applied with a different transaction`,
          );
        }
        return { next: null, result: undefined };
      }
      const operations = [...head.operations, [operationId, digest] as const].slice(-REMEMBERED_OPERATIONS);
      if (transaction.type === 'append_items') {
        return { next: { ...head, operations, segments: [...head.segments, ...refs] }, result: undefined };
      }
      const expected = transaction.expectedSuffix;
      const total = head.segments.reduce((sum, ref) => sum + ref.count, 0);
      const actual =
        expected.length === 0 || expected.length > total ? [] : await this.itemsOf(head, expected.length);
      if (expected.length > total || canonicalJson(actual) !== canonicalJson(expected)) {
        throw new HistoryTransactionError('the history no longer ends with the expected suffix');
      }
      const { kept, dropped } = withoutLast(head.segments, expected.length);
      return { next: { ...head, operations, segments: [...kept, ...refs] }, result: undefined, dropped };
    });
  }

  /**
   * Replaces the history this object last read (or, before any read, the whole history) with
   * `items` in one compare-and-swap; items appended since by other workers stay after them. Throws
   * {@link HistoryTransactionError}, changing nothing, when that history was popped, cleared or
   * replaced meanwhile.
   */
  async replaceHistoryWithCompaction(items: AgentInputItem[]): Promise<void> {
    const refs = items.length === 0 ? [] : await this.writeSegments(items);
    const base = this.seen;
    await this.changeWithSegments(refs, (head) => {
      const replaced = base ?? head.segments;
      const stillThere = replaced.every(
        (ref, index) => head.segments[index]?.id === ref.id && head.segments[index]?.count === ref.count,
      );
      if (!stillThere) {
        throw new HistoryTransactionError(
          'the history was popped, cleared or replaced since this session last read it: read it again and compact anew',
        );
      }
      return {
        next: { ...head, segments: [...refs, ...head.segments.slice(replaced.length)] },
        result: undefined,
        dropped: replaced.map((ref) => ref.id),
      };
    });
  }

  /**
   * Runs `change` on the current head and stores its result with compare-and-swap, reading again
   * and recomputing after a lost race. A write whose outcome is unknown (a timeout, or a retried
   * write answered 412) counts as done when the head lists its write id.
   */
  private async update<T>(change: (head: Head) => Promise<Change<T>> | Change<T>): Promise<T> {
    let read = await this.readHead();
    for (let attempt = 1; ; attempt++) {
      let outcome: Change<T>;
      try {
        outcome = await change(read.head);
      } catch (error) {
        if (!(error instanceof SegmentGone) || attempt >= this.maxAttempts) throw error;
        read = await this.readHead();
        continue;
      }
      if (outcome.next === null) return outcome.result;
      const writeId = randomBytes(9).toString('base64url');
      const stored = await this.writeHead(outcome.next, writeId, read.etag);
      if (!stored) read = await this.readHead();
      if (stored || read.head.writes.includes(writeId)) {
        this.seen = outcome.next.segments;
        await this.deleteSegments(outcome.dropped ?? []);
        return outcome.result;
      }
      if (attempt >= this.maxAttempts) {
        throw new Error(
          `session ${this.sessionId}: gave up after ${attempt} attempts, the head kept changing under this writer`,
        );
      }
      await sleep(Math.min(250, 5 * 2 ** Math.min(attempt, 6)) * Math.random());
    }
  }

  /** {@link update} for a change that adds the segments `refs` (already written). */
  private async changeWithSegments(
    refs: readonly SegmentRef[],
    change: (head: Head) => Promise<Change<void>> | Change<void>,
  ): Promise<void> {
    // Whether the last change computed lists the segments: then a head that lists them may be
    // stored (even when `update` throws afterwards), and they must stay.
    let listed = false;
    try {
      await this.update(async (head) => {
        listed = false;
        const outcome = await change(head);
        listed = outcome.next !== null;
        return outcome;
      });
    } finally {
      if (!listed) await this.deleteSegments(refs.map((ref) => ref.id));
    }
    if (refs.length > 0) await this.mergeSmallSegments();
  }

  /**
   * Past {@link MERGE_ABOVE_SEGMENTS} segments, replaces runs of small neighbouring segments by one
   * segment each, so that reading the history stays a few requests. Best effort: it gives up when
   * the head changes meanwhile (the next writer merges) and never fails the change it follows.
   */
  private async mergeSmallSegments(): Promise<void> {
    const written: string[] = [];
    // Until `update` answers, a stored head may list the new segments: only then may they go.
    let maybeListed = false;
    try {
      const { head } = await this.readHead();
      if (head.segments.length <= MERGE_ABOVE_SEGMENTS) return;
      const runs = runsWithin(head.segments, this.segmentBytes);
      if (runs.every((run) => run.length === 1)) return;
      const segments: SegmentRef[] = [];
      for (const run of runs) {
        if (run.length === 1) {
          segments.push(...run);
          continue;
        }
        const items = (await Promise.all(run.map((ref) => this.segmentItems(ref)))).flatMap((all, index) =>
          all.slice(0, run[index]?.count ?? 0),
        );
        const refs = await this.writeSegments(items);
        written.push(...refs.map((ref) => ref.id));
        segments.push(...refs);
      }
      const planned = segmentList(head);
      maybeListed = true;
      maybeListed = await this.update((current) =>
        segmentList(current) === planned
          ? {
              next: { ...current, segments },
              result: true,
              dropped: head.segments.map((ref) => ref.id).filter((id) => !segments.some((s) => s.id === id)),
            }
          : { next: null, result: false },
      );
    } catch {
      // Merging is housekeeping: the history is complete without it.
    } finally {
      if (!maybeListed) await this.deleteSegments(written);
    }
  }

  private async readHead(): Promise<{ head: Head; etag: string | null }> {
    const stored = await this.kv.get(this.headKey());
    const head = stored === null ? EMPTY_HEAD : parseHead(stored.value, this.headKey());
    const listed = new Set(head.segments.map((ref) => ref.id));
    for (const id of this.segments.keys()) if (!listed.has(id)) this.segments.delete(id);
    return { head, etag: stored?.etag ?? null };
  }

  /** True when stored; false when the race was lost or the outcome is unknown (read to tell). */
  private async writeHead(head: Head, writeId: string, etag: string | null): Promise<boolean> {
    const value = JSON.stringify({ ...head, writes: [...head.writes, writeId].slice(-REMEMBERED_WRITES) });
    try {
      await this.kv.put(this.headKey(), value, etag === null ? { ifNoneMatch: '*' } : { ifMatch: etag });
      return true;
    } catch (error) {
      if (error instanceof CairnNetworkError) return false;
      if (error instanceof CairnHttpError && error.code === 'precondition_failed') return false;
      throw error;
    }
  }

  /** The newest `limit` items of `head` (all without a limit), read from their segments. */
  private async itemsOf(head: Head, limit?: number): Promise<unknown[]> {
    let first = head.segments.length;
    for (let needed = limit ?? Infinity; first > 0 && needed > 0;)
      needed -= head.segments[--first]?.count ?? 0;
    const chosen = head.segments.slice(first);
    const contents = await mapLimited(chosen, READ_CONCURRENCY, async (ref) =>
      (await this.segmentItems(ref)).slice(0, ref.count),
    );
    const items = contents.flat();
    return limit === undefined ? items : items.slice(Math.max(0, items.length - limit));
  }

  private async segmentItems(ref: SegmentRef): Promise<unknown[]> {
    const known = this.segments.get(ref.id);
    if (known !== undefined) return known;
    const stored = await this.kv.get(this.segmentKey(ref.id));
    if (stored === null) throw new SegmentGone(ref.id);
    const parsed = JSON.parse(stored.value.toString('utf8')) as unknown;
    if (!Array.isArray(parsed) || parsed.length < ref.count) {
      throw new Error(`${this.segmentKey(ref.id)} is not a segment of ${ref.count} items`);
    }
    const items: unknown[] = parsed;
    this.segments.set(ref.id, items);
    return items;
  }

  /** Writes `items` as new segments of at most `segmentBytes` each (one item alone may be larger). */
  private async writeSegments(items: readonly unknown[]): Promise<SegmentRef[]> {
    for (const item of items) assertJson(item, 'item');
    const groups: string[][] = [];
    let size = Infinity;
    for (const item of items) {
      const json = JSON.stringify(item);
      if (size + json.length + 1 > this.segmentBytes) {
        groups.push([]);
        size = 1;
      }
      groups[groups.length - 1]?.push(json);
      size += json.length + 1;
    }
    return Promise.all(
      groups.map(async (group) => {
        const id = `${Date.now().toString(36)}-${randomBytes(9).toString('base64url')}`;
        const value = `[${group.join(',')}]`;
        try {
          await this.kv.put(this.segmentKey(id), value, { ifNoneMatch: '*' });
        } catch (error) {
          // The id is this writer's alone: a 412 means an earlier attempt of this very PUT landed.
          if (!(error instanceof CairnHttpError && error.code === 'precondition_failed')) throw error;
        }
        return { id, count: group.length, bytes: Buffer.byteLength(value) };
      }),
    );
  }

  /** Best effort: a segment left behind is never read, it only takes space. */
  private async deleteSegments(ids: readonly string[]): Promise<void> {
    await Promise.allSettled(ids.map((id) => this.kv.delete(this.segmentKey(id))));
  }

  private headKey(): string {
    return `${this.prefix}head`;
  }

  private segmentKey(id: string): string {
    return `${this.prefix}segments/${id}`;
  }
}

/** The session id as one key segment: percent-encoded, and `.`/`..` (not allowed as segments) too. */
export function encodeSessionId(sessionId: string): string {
  const encoded = encodeURIComponent(sessionId);
  return encoded === '.' || encoded === '..' ? encoded.replaceAll('.', '%2E') : encoded;
}

function parseHead(bytes: Buffer, key: string): Head {
  const head = JSON.parse(bytes.toString('utf8')) as Partial<Head> | null;
  if (
    head?.version !== 1 ||
    !Array.isArray(head.segments) ||
    !Array.isArray(head.operations) ||
    !Array.isArray(head.writes)
  ) {
    throw new Error(`${key} is not the head of a session history`);
  }
  return head as Head;
}

/** The `callId` of a tool item and whether it is the call or its output (`*_result`, `*_output`). */
function toolPart(item: unknown): { readonly callId: string; readonly output: boolean } | null {
  if (typeof item !== 'object' || item === null) return null;
  const { type, callId } = item as { type?: unknown; callId?: unknown };
  if (typeof callId !== 'string' || typeof type !== 'string') return null;
  return { callId, output: /_(result|output)$/.test(type) };
}

/** `items` without the tool outputs whose call is not among them (a limited read cut it off). */
function withoutOrphanOutputs(items: readonly unknown[]): unknown[] {
  const parts = items.map(toolPart);
  const calls = new Set(parts.flatMap((part) => (part !== null && !part.output ? [part.callId] : [])));
  return items.filter((_, index) => {
    const part = parts[index];
    return part === null || part === undefined || !part.output || calls.has(part.callId);
  });
}

/** The segments `segments` keeps after removing its last `count` items, and the ones it drops. */
function withoutLast(segments: readonly SegmentRef[], count: number) {
  const kept = [...segments];
  const dropped: string[] = [];
  for (let left = count; left > 0;) {
    const last = kept.pop();
    if (last === undefined) break;
    if (last.count > left) {
      kept.push({ ...last, count: last.count - left });
      break;
    }
    left -= last.count;
    dropped.push(last.id);
  }
  return { kept, dropped };
}

/** Neighbouring segments grouped so that each group's bytes stay within `bytes`. */
function runsWithin(segments: readonly SegmentRef[], bytes: number): SegmentRef[][] {
  const runs: SegmentRef[][] = [];
  let size = Infinity;
  for (const ref of segments) {
    if (size + ref.bytes > bytes) {
      runs.push([]);
      size = 0;
    }
    runs[runs.length - 1]?.push(ref);
    size += ref.bytes;
  }
  return runs;
}

function segmentList(head: Head): string {
  return head.segments.map((ref) => `${ref.id}:${ref.count}`).join(',');
}

function validTransaction(args: SessionHistoryTransactionArgs): SessionHistoryTransactionArgs {
  const { operationId, transaction } = args as Partial<SessionHistoryTransactionArgs>;
  if (typeof operationId !== 'string' || operationId.trim() === '') {
    throw new HistoryTransactionError('operationId must be a non-empty string');
  }
  const valid = (value: unknown) => Array.isArray(value);
  const shapeOk =
    (transaction?.type === 'append_items' && valid(transaction.items)) ||
    (transaction?.type === 'replace_suffix' &&
      valid(transaction.expectedSuffix) &&
      valid(transaction.replacement));
  if (!shapeOk) throw new HistoryTransactionError('transaction must be append_items or replace_suffix');
  assertJson(transaction, 'transaction');
  return { operationId, transaction };
}

/** Throws unless `value` survives JSON unchanged (undefined object properties aside). */
function assertJson(value: unknown, where: string): void {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return;
  if (typeof value === 'number') {
    if (Number.isFinite(value)) return;
    throw new TypeError(`${where}: ${value} is not a JSON number`);
  }
  if (Array.isArray(value)) {
    value.forEach((inner: unknown, index) => assertJson(inner, `${where}[${index}]`));
    return;
  }
  if (
    typeof value === 'object' &&
    [Object.prototype, null].includes(Object.getPrototypeOf(value) as object | null)
  ) {
    for (const [name, inner] of Object.entries(value)) {
      if (inner !== undefined) assertJson(inner, `${where}.${name}`);
    }
    return;
  }
  throw new TypeError(`${where}: a ${typeof value} cannot be stored as JSON`);
}
