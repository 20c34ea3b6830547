import { InvalidArgumentError, NotFoundError } from '../protocol/errors';
import { commonPrefix, compareKeys } from '../protocol/keyOrderWalk';
import type { KeyValueStore, StoredValue } from '../storage/keyValueStore';
import {
  checkCheckpointId,
  checkNamespace,
  checkThreadId,
  invertedId,
  isCheckpointId,
  namespaceSegment,
} from './identifiers';
import { KeyScan, type ScanStart } from './keyScan';
import { keysOf, namespaceOfRecordKey } from './layout';
import { canonicalOrder, mergeWrites } from './pendingWrites';
import { type CheckpointRecord, decodeCheckpointRecord, type ThreadRecord, type TypedBytes } from './records';
import { cacheKey, noThread, type ThreadRecords } from './threadRecords';
import { type CheckpointTuple, type HistoryPage, type HistoryQuery, SENDS_CHANNEL } from './threadTypes';
import { ValueCache } from './valueCache';
import { MissingValueError, ValueReader } from './valueReader';

/**
 * The history of a thread: a checkpoint (the head of a namespace, or one by id) with its values
 * and pending writes, and the listing of checkpoints newest first. Checkpoint records are
 * create-only under `d/<threadId>/<incarnation>/c/<inverted id>/<namespace>`, so ascending key
 * order is newest first across every namespace and a thread's history is one listing; each value
 * is read from the checkpoint that stored it (its record's `valueSources`).
 */

/** A history page reads at most this many records (a filter may skip most), then hands a cursor. */
const MAX_EXAMINED_PER_PAGE = 256;
/** A history page stops adding checkpoints once their values pass this many bytes. */
const PAGE_VALUE_BUDGET_BYTES = 8 * 1024 * 1024;
const PARALLEL_READS = 16;
/** A history page lists at most this many pages of keys (a namespace may be rare among them). */
const MAX_LISTINGS_PER_PAGE = 20;

/** Writes keys a history page lists at most (one listing request). */
const WRITES_LISTED = 1000;

/** A listing of pending writes keys: each key's ETag, the last key listed, whether it ended. */
interface WritesListing {
  readonly etags: ReadonlyMap<string, string>;
  readonly last: string | undefined;
  readonly ended: boolean;
}

/** Adds `item` to the list of `key` in `groups`. */
function groupInto(groups: Map<string, string[]>, key: string, item: string): void {
  const group = groups.get(key);
  if (group === undefined) groups.set(key, [item]);
  else group.push(item);
}

/** The longest beginning that every one of `ids` has. */
function commonBeginning(ids: readonly string[]): string {
  return ids.reduce(commonPrefix, ids[0] ?? '');
}

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

export class ThreadHistory {
  constructor(private readonly records: ThreadRecords) {}

  /**
   * The latest checkpoint (the head) of a namespace, or the one with `checkpointId`. `likelyHead`
   * (a read of the latest: the checkpoint the client holds, most often still the head) has the
   * head's pending writes read beside the thread record instead of after it, in the thread
   * incarnation this instance last saw; they are used only when the thread record then names that
   * checkpoint as the head of that incarnation, else read as without it.
   */
  async getCheckpoint(
    tenant: string,
    threadId: string,
    ns: string,
    checkpointId?: string,
    likelyHead?: string,
  ): Promise<CheckpointTuple> {
    checkThreadId(threadId);
    checkNamespace(ns);
    if (checkpointId !== undefined) checkCheckpointId(checkpointId);
    const store = this.records.storeOf(tenant);
    const seen =
      checkpointId === undefined && likelyHead !== undefined && isCheckpointId(likelyHead)
        ? this.records.known.get(cacheKey(tenant, threadId))?.record
        : undefined;
    const early =
      seen === undefined || likelyHead === undefined
        ? undefined
        : {
            incarnation: seen.incarnation,
            id: likelyHead,
            writes: store.read(keysOf(seen).writes(ns, likelyHead)),
          };
    // Used or dropped below: a read that is not used answers nothing, its failure included.
    early?.writes.catch(() => undefined);
    const current = await this.records.readThread(store, tenant, threadId);
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
    const headWrites =
      early !== undefined && early.incarnation === thread.incarnation && early.id === record.id
        ? early.writes
        : undefined;
    return this.unlessDeleted(store, tenant, thread, () =>
      this.tupleOf(store, thread, record, this.readerOf(store, tenant, thread), headWrites),
    );
  }

  /**
   * The values of a checkpoint, for a delta put's base: those this instance keeps, else read
   * (its record, then only the values not kept; no pending writes). Null when the namespace does not
   * store the checkpoint. The thread record is the one this instance last saw, or read when it has
   * none: the base is checked against the digest its sender computed, and the put's commit against
   * the current thread record.
   */
  async checkpointValues(
    tenant: string,
    threadId: string,
    ns: string,
    checkpointId: string,
  ): Promise<Readonly<Record<string, TypedBytes>> | null> {
    checkThreadId(threadId);
    checkNamespace(ns);
    checkCheckpointId(checkpointId);
    const store = this.records.storeOf(tenant);
    const current =
      this.records.known.get(cacheKey(tenant, threadId)) ??
      (await this.records.readThread(store, tenant, threadId));
    if (current === null) return null;
    const thread = current.record;
    const scope = ValueCache.scopeOf(tenant, threadId, thread.incarnation);
    const kept = this.records.values.valuesOf(scope, ns, checkpointId);
    if (kept !== undefined) return kept;
    const head = thread.heads.get(ns)?.record;
    const record = head?.id === checkpointId ? head : await this.recordIn(store, thread, checkpointId, ns);
    if (record === null) return null;
    return this.readerOf(store, tenant, thread)
      .valuesOf(record)
      .catch((error: unknown) => {
        // A base whose value is missing is a base that does not resolve (the sender sends it whole).
        if (error instanceof MissingValueError) return null;
        throw error;
      });
  }

  private readerOf(store: KeyValueStore, tenant: string, thread: ThreadRecord): ValueReader {
    return new ValueReader(store, keysOf(thread), {
      values: this.records.values,
      scope: ValueCache.scopeOf(tenant, thread.threadId, thread.incarnation),
    });
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
    const store = this.records.storeOf(tenant);
    const current = await this.records.readThread(store, tenant, threadId);
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
    // A page most often finds its checkpoints among the first keys: its first listings ask for as
    // many as it holds and one more (a page continued from a cursor lists the keys of the previous
    // page's last listing again first: few, not a thousand).
    const scan = new KeyScan(store, keys.checkpoints, start, {
      withEtags: true,
      firstPagesSize: query.limit + 1,
    });
    const wanted = query.ns === undefined ? undefined : namespaceSegment(query.ns);
    const reader = this.readerOf(store, tenant, thread);
    const found: CheckpointTuple[] = [];
    // The page's listings of pending writes keys, by prefix (see listedWrites).
    const listed = new Map<string, Promise<WritesListing>>();
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
        batch.map((key) => this.records.checkpointRecord(store, tenant, key, scan.etagOf(key))),
      );
      for (const record of records) if (record !== null) reader.know(record);
      const matching = records.filter(
        (record): record is CheckpointRecord =>
          record !== null && (query.filter === undefined || matchesFilter(record.metadata, query.filter)),
      );
      const writes = await this.listedWrites(store, tenant, thread, matching, listed);
      found.push(
        ...(await this.unlessDeleted(store, tenant, thread, () =>
          Promise.all(
            matching.map((record) =>
              this.tupleOf(store, thread, record, reader, writes.get(`${record.ns}\n${record.id}`)),
            ),
          ),
        )),
      );
    }
    return { checkpoints: found, next: (await scan.hasMore()) ? scan.position() : null };
  }

  /**
   * The pending writes of the checkpoints of a history page, by `<ns>\n<checkpoint id>`: listings
   * of the writes keys of each namespace, under the beginning the batch's ids share, with their
   * ETags. Ids sort by time, so the keys under a short beginning are every write of a long while:
   * ids that take two values only at that beginning's next character (a batch across a boundary)
   * are listed as two parts, each under its own, longer beginning. A listing an earlier batch of
   * the same page made, whose beginning covers a part, answers it again (`listed`: per page, never
   * across requests, so that it is as current as the page's reads). A checkpoint the listing shows
   * without writes has none (no read); writes whose version this instance read lately are answered
   * without their read (see ThreadRecords.pendingWrites); the rest are read. A listing that does
   * not reach a checkpoint (more keys under that beginning than a listing page holds) leaves it to
   * its read.
   */
  private async listedWrites(
    store: KeyValueStore,
    tenant: string,
    thread: ThreadRecord,
    records: readonly CheckpointRecord[],
    listed: Map<string, Promise<WritesListing>>,
  ): Promise<Map<string, Promise<StoredValue | null>>> {
    const keys = keysOf(thread);
    const byNs = new Map<string, string[]>();
    for (const record of records) groupInto(byNs, record.ns, record.id);
    const answers = new Map<string, Promise<StoredValue | null>>();
    const listingOf = (prefix: string): Promise<WritesListing> => {
      for (const [covering, listing] of listed) if (prefix.startsWith(covering)) return listing;
      const listing = store.listItems({ prefix, limit: WRITES_LISTED }).then((page) => ({
        etags: new Map(page.items.map((item) => [item.key, item.etag])),
        last: page.items.at(-1)?.key,
        ended: page.cursor === null,
      }));
      listed.set(prefix, listing);
      return listing;
    };
    await Promise.all(
      [...byNs].map(async ([ns, ids]) => {
        if (ids.length < 2) return; // one read costs no more than the listing
        const shared = commonBeginning(ids).length;
        const parts = new Map<string, string[]>();
        for (const id of ids) groupInto(parts, id.slice(0, shared + 1), id);
        // Ids in three parts or more fill the parts between: one listing under their beginning.
        await Promise.all(
          (parts.size > 2 ? [ids] : [...parts.values()]).map(async (part) => {
            const { etags, last, ended } = await listingOf(keys.writes(ns, commonBeginning(part)));
            // A listing that did not end (a covering one listed by an earlier batch included) answers
            // only the keys up to its last.
            for (const id of part) {
              const key = keys.writes(ns, id);
              const etag = etags.get(key);
              const reached = ended || (last !== undefined && compareKeys(key, last) <= 0);
              if (etag === undefined && !reached) continue; // read as before
              answers.set(
                `${ns}\n${id}`,
                etag === undefined
                  ? Promise.resolve(null)
                  : this.records.pendingWrites(store, tenant, key, etag),
              );
            }
          }),
        );
      }),
    );
    return answers;
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
      const now = await this.records.readThread(store, tenant, thread.threadId);
      if (now === null || now.record.incarnation !== thread.incarnation) throw noThread(thread.threadId);
      throw error;
    }
  }

  async recordIn(
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
  async latestOf(store: KeyValueStore, thread: ThreadRecord, ns: string): Promise<CheckpointRecord | null> {
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
    ownWrites?: Promise<StoredValue | null>,
  ): Promise<CheckpointTuple> {
    const keys = keysOf(thread);
    const readWrites = async (
      checkpointId: string,
      read = store.read(keys.writes(record.ns, checkpointId)),
    ) => mergeWrites((await read)?.value ?? null, checkpointId);
    const [writes, values, sends] = await Promise.all([
      readWrites(record.id, ownWrites),
      reader.valuesOf(record),
      record.v < 4 && record.parent !== null
        ? readWrites(record.parent).then((parentWrites) =>
            parentWrites
              .filter((write) => write.channel === SENDS_CHANNEL)
              .map(({ type, data }) => ({ type, data })),
          )
        : Promise.resolve(undefined),
    ]);
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
      values,
      pendingWrites: canonicalOrder(writes),
      ...(sends === undefined ? {} : { pendingSends: sends }),
      ...(record.runId === undefined ? {} : { runId: record.runId }),
    };
  }
}
