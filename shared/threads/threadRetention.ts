import { PreconditionFailedError } from '../protocol/errors';
import { forEachLimited } from '../protocol/pool';
import { countObject, type PruneBudget, type PruneCounts } from '../retention/budget';
import { deleteListed, deletePrefix, LIST_PAGE, listAllItems } from '../retention/deletion';
import type { PrunePart } from '../retention/parts';
import { type ThreadIntent, withoutThreadIntents, withThreadIntents } from '../retention/pruneState';
import type { KeyValueStore, ListedItem } from '../storage/keyValueStore';
import { isName, namespaceSegment } from './identifiers';
import {
  DATA_PREFIX,
  incarnationPrefix,
  keysOf,
  parseDataKey,
  THREAD_RECORD_PREFIX,
  threadKey,
} from './layout';
import {
  type CheckpointRecord,
  decodeCheckpointRecord,
  decodeThreadRecord,
  encodeCheckpointRecord,
  isChunkedSource,
  isInlineSource,
  ownValue,
  producersNamed,
  type ThreadRecord,
} from './records';

/**
 * Retention of one tenant's threads (docs/retention.md): deletes threads past their time to live,
 * prunes the checkpoints of kept threads (keepCheckpoints, dropBranches) and collects what no kept
 * checkpoint references. Safe when several runs overlap (the timer fires twice, instances scale
 * out) and when a run dies anywhere:
 *
 * - A thread is deleted by a compare-and-swap delete of its record (only the version read, only
 *   when no live run holds it): it is gone at once, for every reader, and exactly one run counts
 *   it. An intent written before (in the prune state) names its data, which the next run deletes
 *   if this one dies first.
 * - A kept thread loses its checkpoint records first, then the values, packs and pending writes
 *   that no remaining record references: a run that dies in between leaves unreferenced data,
 *   which the next visit collects. Heads are never removed.
 * - Values stored by what they add share chunks across checkpoints: a record holds the pack of the
 *   chunks its put added, and later records name them. Before a record goes, its pack is stored at
 *   its pack key (named or not: a rewind racing the removal may make the record a head again); a
 *   pack object goes only once no remaining record or head names it (marked from every head and
 *   every record that stays, of every branch), past the grace.
 * - Nothing younger than the grace period is collected (records of puts in flight, their values),
 *   and values are deleted only in the version listed (a put that names a stored value writes it
 *   again first: see ThreadStore). The values referenced are computed from the records listed
 *   after the records were removed, and a put whose parent is not the head stores apart the values
 *   it inherits held inline (the records holding them may go with their bytes) and checks that its
 *   parent is still stored after writing its own record: so a value a put in flight inherits is
 *   never collected (see CheckpointCommits.checkParentStored).
 * - Every deletion counts only when this run's delete removed the item: overlapping runs add up to
 *   what one run alone would count.
 */

export interface ThreadRetentionPolicy {
  readonly threadTtlMs: number | null;
  readonly keepCheckpoints: number | null;
  readonly dropBranches: boolean;
}

/** Where the intents of thread deletions are kept (the tenant's prune state). */
export interface ThreadIntentLog {
  add(intents: readonly ThreadIntent[]): Promise<void>;
  remove(intents: readonly { threadId: string; incarnation: string }[]): Promise<void>;
}

export interface ThreadPassOptions {
  readonly store: KeyValueStore;
  readonly policy: ThreadRetentionPolicy;
  readonly graceMs: number;
  /** Wall-clock time of the pass (ms); the storage's modification times are compared with it. */
  readonly now: number;
  readonly budget: PruneBudget;
  readonly counts: PruneCounts;
  /**
   * Threads whose record was last written before this (ms) were visited by a complete earlier pass
   * and have not changed since: skipped unless their time to live ran out. Null: visit every thread.
   */
  readonly unchangedBefore: number | null;
  /** A full pass: every thread is visited, every record read, and data of no thread collected. */
  readonly full: boolean;
  /** Resume after this thread (a pass an earlier run's budget cut). */
  readonly after: string | null;
  /** Deletions an earlier run began (finished first). */
  readonly intents: readonly ThreadIntent[];
  readonly intentLog: ThreadIntentLog;
  /** Deletes an expired thread's record (compare-and-swap on `etag`); default: the store's delete. */
  readonly deleteRecord?: (threadId: string, record: ThreadRecord, etag: string) => Promise<boolean>;
}

export interface ThreadPassResult {
  /** False when the budget ran out: `resumeAfter` is where the next run goes on. */
  readonly complete: boolean;
  /** The last thread finished in order (null: none); meaningful when not complete. */
  readonly resumeAfter: string | null;
}

/** Threads visited at once. */
const THREAD_CONCURRENCY = 8;
/** Records read at once. */
const READ_CONCURRENCY = 16;
/** An intent whose thread still exists this long after it was written was abandoned before the delete. */
const STALE_INTENT_MS = 6 * 60 * 60 * 1000;

interface ThreadVisit {
  readonly threadId: string;
  readonly stored: { readonly record: ThreadRecord; readonly etag: string; readonly size: number } | null;
}

export async function pruneThreads(options: ThreadPassOptions): Promise<ThreadPassResult> {
  if (!(await finishIntents(options))) return { complete: false, resumeAfter: options.after };
  const after = options.after === null ? null : threadKey(options.after);
  let resumeAfter = options.after;
  for await (const page of listAllItems(options.store, THREAD_RECORD_PREFIX)) {
    const due = page.filter((item) => (after === null || item.key > after) && isDue(item, options));
    for (let start = 0; start < due.length; start += THREAD_CONCURRENCY) {
      if (options.budget.exhausted) return { complete: false, resumeAfter };
      const batch = due.slice(start, start + THREAD_CONCURRENCY);
      const finished = await visitBatch(batch, options);
      // Resume after the last thread that, like every one before it, was finished.
      for (const [index, item] of batch.entries()) {
        if (!finished[index]) return { complete: false, resumeAfter };
        resumeAfter = item.key.slice(THREAD_RECORD_PREFIX.length);
      }
    }
  }
  if (options.full && !(await collectLostIncarnations(options))) return { complete: false, resumeAfter };
  return { complete: true, resumeAfter: null };
}

/** Whether a listed thread record must be visited in this pass. */
function isDue(item: ListedItem, options: ThreadPassOptions): boolean {
  if (!isName(item.key.slice(THREAD_RECORD_PREFIX.length))) return false;
  if (options.full || options.unchangedBefore === null) return true;
  const written = item.modifiedAt.getTime();
  // The record is written at every change, so its time bounds the thread's last change from above.
  if (options.policy.threadTtlMs !== null && written <= options.now - options.policy.threadTtlMs) return true;
  return written >= options.unchangedBefore;
}

async function readThread(store: KeyValueStore, threadId: string): Promise<ThreadVisit['stored']> {
  const stored = await store.read(threadKey(threadId));
  if (stored === null) return null;
  return { record: decodeThreadRecord(stored.value, threadId), etag: stored.etag, size: stored.value.length };
}

function liveRunOf(thread: ThreadRecord, now: number): boolean {
  return thread.run !== null && Date.parse(thread.run.leaseExpiresAt) > now;
}

function isExpired(thread: ThreadRecord, options: ThreadPassOptions): boolean {
  const ttl = options.policy.threadTtlMs;
  return ttl !== null && Date.parse(thread.updatedAt) <= options.now - ttl;
}

/** Visits a batch of threads; true for each one finished (false: the budget cut it). */
async function visitBatch(items: readonly ListedItem[], options: ThreadPassOptions): Promise<boolean[]> {
  const visits: ThreadVisit[] = await Promise.all(
    items.map(async (item) => {
      const threadId = item.key.slice(THREAD_RECORD_PREFIX.length);
      return { threadId, stored: await readThread(options.store, threadId) };
    }),
  );
  const doomed = visits.filter(
    (visit) =>
      visit.stored !== null &&
      isExpired(visit.stored.record, options) &&
      !liveRunOf(visit.stored.record, options.now),
  );
  const at = new Date(options.now).toISOString();
  if (doomed.length > 0) {
    await options.intentLog.add(
      doomed.map(({ threadId, stored }) => ({
        threadId,
        incarnation: (stored as NonNullable<ThreadVisit['stored']>).record.incarnation,
        at,
      })),
    );
  }
  const finished = visits.map(() => false);
  const done: { threadId: string; incarnation: string }[] = [];
  await forEachLimited(visits, THREAD_CONCURRENCY, async (visit, index) => {
    const outcome = await visitThread(visit, options);
    finished[index] = outcome.finished;
    if (outcome.deletedIncarnation !== undefined) {
      done.push({ threadId: visit.threadId, incarnation: outcome.deletedIncarnation });
    }
  });
  const abandoned = doomed
    .filter(({ threadId }) => !done.some((entry) => entry.threadId === threadId))
    .filter((visit) => finished[visits.indexOf(visit)] === true)
    .map(({ threadId, stored }) => ({
      threadId,
      incarnation: (stored as NonNullable<ThreadVisit['stored']>).record.incarnation,
    }));
  // Intents of deletions that finished, or that turned out not to happen (the thread changed).
  const settled = [...done, ...abandoned];
  if (settled.length > 0) await options.intentLog.remove(settled);
  return finished;
}

interface VisitOutcome {
  readonly finished: boolean;
  /** Set when the thread was deleted and its data is all gone. */
  readonly deletedIncarnation?: string;
}

async function visitThread(visit: ThreadVisit, options: ThreadPassOptions): Promise<VisitOutcome> {
  let stored = visit.stored;
  for (let attempt = 0; attempt < 2 && stored !== null; attempt++) {
    const thread = stored.record;
    const busy = liveRunOf(thread, options.now);
    if (isExpired(thread, options)) {
      if (busy) {
        options.counts.threadsBusy += 1;
        return { finished: true };
      }
      let removed = false;
      try {
        const etag = stored.etag;
        removed = await options.budget.deleting(() =>
          options.deleteRecord === undefined
            ? options.store.delete(threadKey(visit.threadId), { ifMatch: etag })
            : options.deleteRecord(visit.threadId, thread, etag),
        );
      } catch (error) {
        if (!(error instanceof PreconditionFailedError)) throw error;
        // Changed since it was read: read again and decide again, once.
        const again = await readThread(options.store, visit.threadId);
        if (again !== null && again.record.incarnation === thread.incarnation) {
          stored = again;
          continue;
        }
      }
      if (removed) {
        options.counts.threadsDeleted += 1;
        countObject(options.counts, stored.size);
      }
      // Deleted by this run or another: its data goes either way (each key counted once).
      const complete = await deletePrefix(
        options.store,
        incarnationPrefix(visit.threadId, thread.incarnation),
        options.budget,
        options.counts,
      );
      return complete ? { finished: true, deletedIncarnation: thread.incarnation } : { finished: false };
    }
    if (busy) {
      if (await hasPrunable(thread, options)) options.counts.threadsBusy += 1;
      return { finished: true };
    }
    return { finished: await pruneThread(thread, options) };
  }
  return { finished: true };
}

/** The keys of one incarnation, by kind. */
interface Listing {
  readonly records: Map<string, { item: ListedItem; checkpointId: string; nsSegment: string }>;
  readonly values: { item: ListedItem; nsSegment: string; producer: string }[];
  readonly writes: { item: ListedItem; nsSegment: string; checkpointId: string }[];
  readonly packs: { item: ListedItem; nsSegment: string; checkpointId: string }[];
}

async function listIncarnation(store: KeyValueStore, thread: ThreadRecord, only?: 'c'): Promise<Listing> {
  const prefix = incarnationPrefix(thread.threadId, thread.incarnation) + (only === undefined ? '' : 'c/');
  const listing: Listing = { records: new Map(), values: [], writes: [], packs: [] };
  for await (const page of listAllItems(store, prefix)) {
    for (const item of page) {
      const parsed = parseDataKey(item.key)?.item;
      if (parsed?.kind === 'record') {
        listing.records.set(item.key, {
          item,
          checkpointId: parsed.checkpointId,
          nsSegment: parsed.nsSegment,
        });
      } else if (parsed?.kind === 'value') {
        listing.values.push({ item, nsSegment: parsed.nsSegment, producer: parsed.producer });
      } else if (parsed?.kind === 'writes') {
        listing.writes.push({ item, nsSegment: parsed.nsSegment, checkpointId: parsed.checkpointId });
      } else if (parsed?.kind === 'pack') {
        listing.packs.push({ item, nsSegment: parsed.nsSegment, checkpointId: parsed.checkpointId });
      }
    }
  }
  return listing;
}

/** Reads checkpoint records once per visit; a head's record is its inline copy. */
class RecordReader {
  private readonly known = new Map<string, Promise<CheckpointRecord | null>>();

  constructor(
    private readonly store: KeyValueStore,
    thread: ThreadRecord,
  ) {
    this.addHeads(thread);
  }

  /** The inline heads of `thread` (records are immutable: what was read before stays right). */
  addHeads(thread: ThreadRecord): void {
    const keys = keysOf(thread);
    for (const head of thread.heads.values()) {
      this.known.set(keys.record(head.record.id, head.record.ns), Promise.resolve(head.record));
    }
  }

  read(key: string): Promise<CheckpointRecord | null> {
    let record = this.known.get(key);
    if (record === undefined) {
      record = this.store
        .read(key)
        .then((stored) => (stored === null ? null : decodeCheckpointRecord(stored.value, key)));
      this.known.set(key, record);
    }
    return record;
  }
}

/**
 * The records the policy keeps: every namespace's head (inline, or the newest record of a
 * namespace whose head the thread record no longer holds) and, with keepCheckpoints, its n - 1
 * ancestors, with dropBranches alone its whole chain; without either, every record.
 */
async function keptRecords(
  thread: ThreadRecord,
  listing: Listing,
  reader: RecordReader,
  options: ThreadPassOptions,
): Promise<Set<string> | null> {
  const { keepCheckpoints, dropBranches } = options.policy;
  if (keepCheckpoints === null && !dropBranches) return null;
  const keys = keysOf(thread);
  const heads = new Map<string, string>();
  for (const head of thread.heads.values()) {
    heads.set(namespaceSegment(head.record.ns), keys.record(head.record.id, head.record.ns));
  }
  // Listed newest first: the first record of a namespace without an inline head is its head.
  for (const [key, { nsSegment }] of listing.records) if (!heads.has(nsSegment)) heads.set(nsSegment, key);
  const kept = new Set<string>();
  for (const headKey of heads.values()) {
    let key: string | null = headKey;
    for (let depth = 0; key !== null && (keepCheckpoints === null || depth < keepCheckpoints); depth++) {
      if (kept.has(key)) break;
      const record: CheckpointRecord | null = await reader.read(key);
      if (record === null) break;
      kept.add(key);
      key = record.parent === null ? null : keys.record(record.parent, record.ns);
      // An ancestor already removed ends the chain.
      if (key !== null && !listing.records.has(key)) break;
    }
  }
  return kept;
}

/** Records the policy removes: not kept, and older than the grace (a put in flight keeps its own). */
function doomedRecords(listing: Listing, kept: Set<string> | null, options: ThreadPassOptions): ListedItem[] {
  if (kept === null) return [];
  const before = options.now - options.graceMs;
  return [...listing.records.values()]
    .filter(({ item }) => !kept.has(item.key) && item.modifiedAt.getTime() <= before)
    .map(({ item }) => item);
}

async function hasPrunable(thread: ThreadRecord, options: ThreadPassOptions): Promise<boolean> {
  if (options.policy.keepCheckpoints === null && !options.policy.dropBranches) return false;
  const listing = await listIncarnation(options.store, thread, 'c');
  const kept = await keptRecords(thread, listing, new RecordReader(options.store, thread), options);
  return doomedRecords(listing, kept, options).length > 0;
}

/** Prunes a kept thread and collects its garbage; false when the budget cut it short. */
async function pruneThread(thread: ThreadRecord, options: ThreadPassOptions): Promise<boolean> {
  const { store, budget, counts } = options;
  let listing = await listIncarnation(store, thread);
  const reader = new RecordReader(store, thread);
  const doomed = doomedRecords(listing, await keptRecords(thread, listing, reader, options), options);
  let current = thread;
  if (doomed.length > 0) {
    await spillInline(store, thread, listing, doomed, reader);
    const complete = await deleteListed(store, doomed, budget, counts, {
      onVersion: false,
      counted: () => (counts.checkpointsDeleted += 1),
    });
    if (!complete) return false;
    // What is referenced is read after the removal (see the module comment): the thread record as
    // it is now, and the records that remain, including any a put stored meanwhile.
    const now = await readThread(store, thread.threadId);
    if (now === null || now.record.incarnation !== thread.incarnation) return true;
    current = now.record;
    const records = await listIncarnation(store, current, 'c');
    listing = { ...listing, records: records.records };
    reader.addHeads(current);
    await restoreHeadRecords(store, current, listing);
  }
  return collectGarbage(current, listing, reader, options);
}

/**
 * Before records go, the values they hold inline that a remaining record or a head still names are
 * stored at their sources' value keys (create-only), where readers look once the holding record is
 * gone; the collection then treats them as any value. The pack of every removed record is stored
 * at its pack key, whether or not a remaining record or a head names it (a rewind racing the
 * removal may name it); the sweep deletes those no one names once past the grace. Values no one
 * else names go with their record. A run that dies in between leaves both, which the next visit sorts out the same way. A
 * put in flight that inherits from a removed record has it as parent, and is refused by its check
 * that the parent is still stored (see ThreadStore.checkParentStored).
 */
async function spillInline(
  store: KeyValueStore,
  thread: ThreadRecord,
  listing: Listing,
  doomed: readonly ListedItem[],
  reader: RecordReader,
): Promise<void> {
  const keys = keysOf(thread);
  const gone = new Set(doomed.map((item) => item.key));
  const named = new Set<string>();
  const add = (record: CheckpointRecord | null) => {
    for (const [channel, source] of Object.entries(record?.valueSources ?? {})) {
      if (isInlineSource(source)) named.add(keys.value(record?.ns ?? '', source, channel));
    }
  };
  for (const head of thread.heads.values()) add(head.record);
  await forEachLimited(
    [...listing.records.keys()].filter((key) => !gone.has(key)),
    READ_CONCURRENCY,
    async (key) => add(await reader.read(key)),
  );
  const createOnly = async (key: string, bytes: Buffer) => {
    try {
      await store.write(key, bytes, { ifAbsent: true });
    } catch (error) {
      if (!(error instanceof PreconditionFailedError)) throw error;
    }
  };
  await forEachLimited(doomed, READ_CONCURRENCY, async (item) => {
    const record = await reader.read(item.key);
    // Every pack, named or not: a rewind that read the record before it went may make it a head
    // (stored again, without its pack). The sweep collects those no one names, past the grace.
    if (record?.pack !== undefined) await createOnly(keys.pack(record.ns, record.id), record.pack);
    for (const [channel, bytes] of Object.entries(record?.inline ?? {})) {
      const source = record === null ? undefined : ownValue(record.valueSources, channel);
      if (record === null || source === undefined) continue;
      const key = keys.value(record.ns, source, channel);
      if (named.has(key)) await createOnly(key, bytes);
    }
  });
}

/**
 * A rewind that raced with the removal may have made a removed record the head: the head keeps
 * its inline copy (and its values stay referenced), and its record is stored again, create-only,
 * so that the history lists it.
 */
async function restoreHeadRecords(
  store: KeyValueStore,
  thread: ThreadRecord,
  listing: Listing,
): Promise<void> {
  const keys = keysOf(thread);
  for (const head of thread.heads.values()) {
    const key = keys.record(head.record.id, head.record.ns);
    if (listing.records.has(key)) continue;
    try {
      await store.write(key, encodeCheckpointRecord(head.record), { ifAbsent: true });
    } catch (error) {
      if (!(error instanceof PreconditionFailedError)) throw error;
    }
  }
}

/**
 * Deletes values and pending writes no remaining record references, once older than the grace.
 * A value whose producing checkpoint is still stored is taken as referenced without reading every
 * record (the cheap, usual case); a full pass reads every record and checks each value.
 */
async function collectGarbage(
  thread: ThreadRecord,
  listing: Listing,
  reader: RecordReader,
  options: ThreadPassOptions,
): Promise<boolean> {
  const { store, budget, counts } = options;
  const before = options.now - options.graceMs;
  const old = (item: ListedItem) => item.modifiedAt.getTime() <= before;
  const stored = new Set<string>();
  for (const { checkpointId, nsSegment } of listing.records.values())
    stored.add(`${nsSegment}/${checkpointId}`);
  for (const head of thread.heads.values())
    stored.add(`${namespaceSegment(head.record.ns)}/${head.record.id}`);

  const writes = listing.writes
    .filter(({ item, nsSegment, checkpointId }) => old(item) && !stored.has(`${nsSegment}/${checkpointId}`))
    .map(({ item }) => item);

  let values = listing.values.filter(({ item }) => old(item));
  if (!options.full)
    values = values.filter(({ nsSegment, producer }) => !stored.has(`${nsSegment}/${producer}`));
  if (values.length > 0) {
    const referenced = await referencedValues(thread, listing, reader);
    values = values.filter(({ item }) => !referenced.has(item.key));
  }
  const doomedValues = values.map(({ item }) => item);
  // Pack objects exist only for records retention removed: each is checked against every record
  // that remains and every head (the mark), and deleted when none names it (the sweep).
  const oldPacks = listing.packs.filter(({ item }) => old(item));
  if (oldPacks.length > 0) {
    const named = await namedPacks(thread, listing, reader);
    doomedValues.push(...oldPacks.filter(({ item }) => !named.has(item.key)).map(({ item }) => item));
  }
  if (!(await deleteListed(store, doomedValues, budget, counts, { onVersion: true }))) return false;
  return deleteListed(store, writes, budget, counts, { onVersion: true });
}

/** Calls `visit` with every head's record and every stored record of the listing. */
async function forEachNamingRecord(
  thread: ThreadRecord,
  listing: Listing,
  reader: RecordReader,
  visit: (record: CheckpointRecord) => void,
): Promise<void> {
  for (const head of thread.heads.values()) visit(head.record);
  await forEachLimited([...listing.records.keys()], READ_CONCURRENCY, async (key) => {
    const record = await reader.read(key);
    if (record !== null) visit(record);
  });
}

/** Every value key the stored records and the heads name. */
async function referencedValues(
  thread: ThreadRecord,
  listing: Listing,
  reader: RecordReader,
): Promise<Set<string>> {
  const keys = keysOf(thread);
  const referenced = new Set<string>();
  await forEachNamingRecord(thread, listing, reader, (record) => {
    for (const [channel, source] of Object.entries(record.valueSources)) {
      if (!isChunkedSource(source)) referenced.add(keys.value(record.ns, source, channel));
    }
  });
  return referenced;
}

/** Every pack key the stored records and the heads name a segment of. */
async function namedPacks(
  thread: ThreadRecord,
  listing: Listing,
  reader: RecordReader,
): Promise<Set<string>> {
  const keys = keysOf(thread);
  const named = new Set<string>();
  await forEachNamingRecord(thread, listing, reader, (record) => {
    for (const producer of producersNamed(record)) named.add(keys.pack(record.ns, producer));
  });
  return named;
}

/**
 * Finishes the deletions earlier runs began: the data of each incarnation whose thread record is
 * gone (or belongs to a newer incarnation). An intent whose thread still exists is left to its
 * run, and dropped once it is long abandoned. False when the budget ran out.
 */
async function finishIntents(options: ThreadPassOptions): Promise<boolean> {
  const settled: { threadId: string; incarnation: string }[] = [];
  let complete = true;
  for (const intent of options.intents) {
    if (options.budget.exhausted) {
      complete = false;
      break;
    }
    const stored = await readThread(options.store, intent.threadId);
    if (stored !== null && stored.record.incarnation === intent.incarnation) {
      if (options.now - Date.parse(intent.at) > STALE_INTENT_MS) settled.push(intent);
      continue;
    }
    const prefix = incarnationPrefix(intent.threadId, intent.incarnation);
    if (await deletePrefix(options.store, prefix, options.budget, options.counts)) settled.push(intent);
    else complete = false;
  }
  if (settled.length > 0) await options.intentLog.remove(settled);
  return complete;
}

/**
 * A full pass also removes incarnations no thread record names: data a thread delete left when
 * its instance died between the record and the data, or a creation that lost its race. Only keys
 * older than the grace go (a first put in flight stores its data before the thread record).
 */
async function collectLostIncarnations(options: ThreadPassOptions): Promise<boolean> {
  const { store, budget, counts } = options;
  const before = options.now - options.graceMs;
  const incarnations = new Map<string, string | null>();
  const incarnationOf = async (threadId: string) => {
    if (!incarnations.has(threadId)) {
      if (incarnations.size > LIST_PAGE) incarnations.clear();
      incarnations.set(threadId, (await readThread(store, threadId))?.record.incarnation ?? null);
    }
    return incarnations.get(threadId);
  };
  for await (const page of listAllItems(store, DATA_PREFIX)) {
    const lost: ListedItem[] = [];
    for (const item of page) {
      const parsed = parseDataKey(item.key);
      if (parsed === null || item.modifiedAt.getTime() > before) continue;
      if ((await incarnationOf(parsed.threadId)) !== parsed.incarnation) lost.push(item);
    }
    if (!(await deleteListed(store, lost, budget, counts, { onVersion: false }))) return false;
  }
  return true;
}

/**
 * The threads' part of the prune run. `storeOf` is a tenant's thread space as the thread store
 * reads it; `deleteRecord` deletes an expired thread's record (the thread store's own deletion,
 * which records it in the audit trail; default: the space's delete). A pass that the budget cuts
 * leaves a cursor in the prune state, where the next run goes on; a complete pass records when it
 * started, so that the next pass skips threads not written since.
 */
export function threadPrunePart(
  storeOf: (tenant: string) => KeyValueStore,
  deleteRecord?: (tenant: string, threadId: string, record: ThreadRecord, etag: string) => Promise<boolean>,
): PrunePart {
  return {
    name: 'threads',
    prune: async (pass) => {
      const { tenant, state, policy, full, passStartedAt } = pass;
      const cursor = state.threadsCursor;
      let result: ThreadPassResult = { complete: true, resumeAfter: null };
      if (pass.domains.has('threads') || state.threadIntents.length > 0) {
        const previous = state.threadsPassStartedAt === null ? null : Date.parse(state.threadsPassStartedAt);
        result = await pruneThreads({
          store: storeOf(tenant),
          ...(deleteRecord === undefined
            ? {}
            : {
                deleteRecord: (threadId: string, record: ThreadRecord, etag: string) =>
                  deleteRecord(tenant, threadId, record, etag),
              }),
          policy: {
            threadTtlMs: policy.threadTtlSeconds === null ? null : policy.threadTtlSeconds * 1000,
            keepCheckpoints: policy.keepCheckpoints,
            dropBranches: policy.dropBranches,
          },
          graceMs: pass.graceMs,
          now: pass.now,
          budget: pass.budget,
          counts: pass.counts,
          unchangedBefore: full || previous === null ? null : previous - pass.graceMs - pass.clockMarginMs,
          full,
          after: cursor === null || cursor.after === '' ? null : cursor.after,
          intents: state.threadIntents,
          intentLog: {
            add: async (intents) => void (await pass.updateState((s) => withThreadIntents(s, intents))),
            remove: async (intents) => void (await pass.updateState((s) => withoutThreadIntents(s, intents))),
          },
        });
      }
      const done = result;
      return {
        complete: done.complete,
        settle: (s) => {
          let next = s;
          if (done.complete) {
            if (s.threadsPassStartedAt === null || s.threadsPassStartedAt < passStartedAt) {
              next = { ...next, threadsPassStartedAt: passStartedAt };
            }
            if (s.threadsCursor !== null && s.threadsCursor.startedAt <= passStartedAt) {
              next = { ...next, threadsCursor: null };
            }
          } else if (s.threadsCursor === null || s.threadsCursor.startedAt <= passStartedAt) {
            next = {
              ...next,
              threadsCursor: { after: done.resumeAfter ?? '', startedAt: passStartedAt, full },
            };
          }
          return next;
        },
      };
    },
  };
}
