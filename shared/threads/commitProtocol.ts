import { createHash, randomBytes } from 'node:crypto';

import {
  ConflictError,
  IntegrityError,
  InvalidArgumentError,
  NotFoundError,
  PayloadTooLargeError,
  PreconditionFailedError,
  RunFencedError,
  ThreadBusyError,
} from '../protocol/errors';
import { casPause } from '../retry';
import type { KeyValueStore } from '../storage/keyValueStore';
import {
  CHUNKED_FROM_BYTES,
  chunkName,
  type ChunkRef,
  PackBuilder,
  type ParentValue,
  planValue,
  type Segment,
  valueDigest,
} from './chunks';
import type { ThreadHistory } from './history';
import { checkThreadId } from './identifiers';
import { keysOf } from './layout';
import { encodeWritesLine } from './pendingWrites';
import {
  type CheckpointRecord,
  decodeCheckpointRecord,
  encodeCheckpointRecord,
  encodeValue,
  type HeadEntry,
  isChunkedSource,
  isInlineSource,
  ownValue,
  producerOf,
  sameCheckpoint,
  setOwn,
  type ThreadRecord,
  type TypedBytes,
  withoutInline,
} from './records';
import {
  cacheKey,
  fitHeads,
  iso,
  MAX_CAS_ATTEMPTS,
  newThreadRecord,
  noThread,
  type Snapshot,
  type ThreadRecords,
  tooBusy,
  writerRefusal,
} from './threadRecords';
import type { CheckpointPut, PutResult, ThreadStoreOptions, WritesPut } from './threadTypes';
import { checkPut, checkWrites } from './validation';
import { ValueCache } from './valueCache';
import { MissingValueError, ValueReader } from './valueReader';

/**
 * The commit protocol: how a checkpoint put and a pending-writes put reach storage so that a crash
 * at any point leaves either the old head or the new one, a fenced run stores nothing a reader can
 * see, a retry with the same content is answered as stored and other content under a stored id is
 * refused. The thread record's compare-and-swap is the commit point (see putCheckpoint).
 */

type ThreadKeys = ReturnType<typeof keysOf>;

/**
 * Room kept in a record for the segment lists of a put with only the merges that fit (they hold
 * no more segments than with none, but their offsets may have more digits).
 */
const HEADER_SLACK = 256;

/** How long a put's commit keeps retrying lost compare-and-swaps (at least MAX_CAS_ATTEMPTS times). */
const COMMIT_BUDGET_MS = 10_000;

/** Errors that refuse a put outright: its record must then not stay visible. */
function isRefusal(error: unknown): boolean {
  return (
    error instanceof ThreadBusyError ||
    error instanceof RunFencedError ||
    error instanceof NotFoundError ||
    error instanceof ConflictError
  );
}

/**
 * The put's checkpoint was stored under an incarnation that lost the race to create the thread:
 * the put starts again once on `current`, the thread that won.
 */
class LostCreation extends Error {
  constructor(readonly current: Snapshot) {
    super('the thread was created by another put');
  }
}

/** Every compare-and-swap of a put's commit lost (within the budget): it certainly did not commit. */
class CommitExhausted extends Error {}

/**
 * The thread record this instance kept (not read for this put) names another incarnation of the
 * thread, or a thread since deleted: the put starts again on `current`, as on an instance that
 * kept nothing.
 */
class StaleThread extends Error {
  constructor(readonly current: Snapshot | null) {
    super('the kept thread record is stale');
  }
}

export class CheckpointCommits {
  private readonly maxValueBytes: number;
  private readonly sealed: boolean;
  private readonly commitBudgetMs: number;

  constructor(
    private readonly records: ThreadRecords,
    private readonly history: ThreadHistory,
    options: ThreadStoreOptions,
  ) {
    this.maxValueBytes = options.maxValueBytes;
    this.sealed = options.sealed ?? false;
    this.commitBudgetMs = options.commitBudgetMs ?? COMMIT_BUDGET_MS;
  }

  /**
   * Stores a checkpoint and makes it its namespace's head. In this order, so that a crash at any
   * point leaves the old head or the new one, never a head without its data: the checkpoint record
   * with the changed channels' values inline (one create-only object: a record is never stored
   * without its values), then the thread record (compare-and-swap on the ETag this instance last
   * saw: the commit point, where the writer's run is checked). A record that would not fit the
   * value limit with its values stores them first, each in an object of its own (create-only: a
   * retry keeps what is stored), as every put did before values went inline; reads take both. A put
   * refused at the commit removes the record it created. A put of a stored checkpoint id with the
   * same content is a retry (answered as stored, `created` false); with other content it is a 409
   * `conflict`.
   *
   * Storage requests, when the thread record this instance holds is current and the namespace's
   * head is the parent: 2 (k + 2 when the values do not fit inline). A stale thread record adds a
   * read and a retry; a parent that is not the head (a fork) adds its record's read; the first put
   * of a namespace adds its mark, in parallel with the record. A retry that leaves the head reads
   * the thread record, even when this instance holds it (see commitPut).
   */
  async putCheckpoint(tenant: string, threadId: string, put: CheckpointPut): Promise<PutResult> {
    checkThreadId(threadId);
    checkPut(put, this.maxValueBytes);
    const onItsWay = this.records.putOnItsWay(tenant, threadId);
    try {
      return await this.storeAndCommit(tenant, threadId, put);
    } finally {
      onItsWay.done();
    }
  }

  private async storeAndCommit(tenant: string, threadId: string, put: CheckpointPut): Promise<PutResult> {
    const store = this.records.storeOf(tenant);
    let reread: Snapshot | null | undefined;
    for (let restart = 0; ; restart++) {
      let snapshot =
        reread === undefined ? (this.records.known.get(cacheKey(tenant, threadId)) ?? null) : reread;
      // Whether the snapshot was read for this put (rather than kept from an earlier request).
      let read = reread !== undefined;
      if (
        !read &&
        (snapshot === null || writerRefusal(snapshot.record, put.runId, this.records.now()) !== null)
      ) {
        // Refuse only on the current record, never on a kept one.
        snapshot = await this.records.readThread(store, tenant, threadId);
        read = true;
      }
      const now = this.records.now();
      const thread = snapshot?.record ?? newThreadRecord(threadId, now);
      const refusal = writerRefusal(thread, put.runId, now);
      if (refusal !== null) throw refusal;
      const keys = keysOf(thread);
      const parent = await this.parentOf(store, thread, put);
      // The common path: the changed values go in the record, one create-only object, so that the
      // put is two round trips (that object, then the thread record's compare-and-swap, the commit
      // point) and a record is never stored without its values. A value of 1 KiB or more is stored
      // by what it adds (chunks.ts): the chunks its parent's value does not have go in the record's
      // pack. A record that would not fit the storage's value limit tries with only the tier merges
      // that fit (its values whole when a value would then span more than MAX_SEGMENTS), then with
      // its values whole, then keeps them in objects of their own, stored before it (three round
      // trips, as every put did before values went inline). A record over the limit even without
      // its values is refused (413).
      const parentHead = headOf(thread, put);
      const chunkKey = thread.chunkKey === undefined ? null : Buffer.from(thread.chunkKey, 'base64');
      const known =
        chunkKey === null
          ? new Map<string, ParentValue>()
          : await parentValues(store, thread, put, parent, parentHead, chunkKey);
      const max = this.maxValueBytes;
      const layoutOf = (chunked: ChunkedValues) => {
        const encoded = encodedValues(put, this.sealed, true, chunked.values);
        const bare = this.recordOf(put, parent, now, encoded, chunked.values);
        if (encoded.size + chunked.pack.length === 0) {
          const layout: Layout = { record: bare, encoded, inlined: false, chunked };
          return { layout, size: encodeCheckpointRecord(bare).length };
        }
        const inline: Record<string, Buffer> = {};
        for (const [channel, { bytes }] of encoded) setOwn(inline, channel, bytes);
        const full: CheckpointRecord = {
          ...bare,
          ...(encoded.size > 0 ? { inline } : {}),
          ...(chunked.pack.length > 0 ? { pack: chunked.pack } : {}),
        };
        const layout: Layout = { record: full, encoded, inlined: true, chunked };
        return { layout, size: encodeCheckpointRecord(full).length };
      };
      const fitting = (chunked: ChunkedValues | null): Layout | null => {
        if (chunked === null) return null;
        const { layout, size } = layoutOf(chunked);
        return size <= max ? layout : null;
      };
      let chosen: Layout | null = null;
      if (chunkKey !== null) {
        chosen = fitting(chunkedValues(put, known, chunkKey, {}));
        if (chosen === null) {
          // The merges that fit: the record with none tells how many bytes they may add to its pack.
          const appended = chunkedValues(put, known, chunkKey, { compact: false });
          const measured = appended === null ? null : layoutOf(appended);
          if (appended !== null && measured !== null && measured.size <= max) {
            const maxPack = max - (measured.size - appended.pack.length) - HEADER_SLACK;
            chosen = fitting(chunkedValues(put, known, chunkKey, { maxPack }));
          }
        }
      }
      if (chosen === null) chosen = fitting(NO_CHUNKS);
      if (chosen === null) {
        const encoded = encodedValues(put, this.sealed, false, NO_CHUNKS.values);
        const apart = this.recordOf(put, parent, now, encoded, NO_CHUNKS.values);
        if (encodeCheckpointRecord(apart).length > max) {
          throw new PayloadTooLargeError(max, 'the checkpoint record (metadata, channels, versions)');
        }
        chosen = { record: apart, encoded, inlined: false, chunked: NO_CHUNKS };
      }
      const { record, encoded, inlined, chunked } = chosen;
      const newNamespace = !thread.heads.has(put.ns);
      const marked = newNamespace
        ? createOnly(store, keys.namespaceMark(put.ns), Buffer.alloc(0))
        : Promise.resolve();
      // Values are keyed by their digest too: bytes a refused or crashed put left behind can never
      // stand for other content sent later under the same checkpoint id.
      const written = inlined
        ? []
        : await Promise.all(
            [...encoded].map(([channel, { bytes, source }]) =>
              storeValue(store, keys.value(put.ns, source, channel), bytes),
            ),
          );
      const [stored] = await Promise.all([this.storeRecord(store, keys, record, sentValues(put)), marked]);
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
        const result = await this.commitPut(
          store,
          tenant,
          snapshot,
          read,
          thread,
          stored.record,
          stored.created,
          put.runId,
          stored.created ? headChunks(stored.record, chunked.values, parentHead) : undefined,
        );
        this.keepValues(tenant, thread, stored.record, put);
        return result;
      } catch (error) {
        if (error instanceof LostCreation && restart === 0) {
          reread = error.current;
          continue;
        }
        if (error instanceof StaleThread) {
          // What this put stored went under the incarnation it was told of, which no name reaches
          // any more: the prune's full pass removes it, as a deleted thread's data.
          reread = error.current;
          continue;
        }
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

  /**
   * Keeps the values a put stored (the stored record's: a retry's are the same values) and which
   * value each channel of the checkpoint has, so that reading it back, or a delta on it, reads no
   * value (see ValueCache). Only after the commit: a put that did not commit keeps nothing.
   */
  private keepValues(
    tenant: string,
    thread: ThreadRecord,
    record: CheckpointRecord,
    put: CheckpointPut,
  ): void {
    const scope = ValueCache.scopeOf(tenant, thread.threadId, thread.incarnation);
    for (const [channel, value] of Object.entries(put.values)) {
      const source = ownValue(record.valueSources, channel);
      if (value !== null && source !== undefined) {
        this.records.values.keep(scope, record.ns, channel, source, value);
      }
    }
    this.records.values.rememberCheckpoint(scope, record.ns, record.id, record.valueSources);
  }

  /**
   * Appends the pending writes of one task to a checkpoint (see pendingWrites.ts for the merge
   * rule). The writer is checked on the current thread record before the append: a run fenced in
   * the moment between that check and the append still gets its writes stored (the append itself
   * cannot be conditional on another key). They attach to a checkpoint, never move a head. An absent
   * thread is created (see created).
   *
   * The checkpoint need not be stored yet: LangGraph sends a step's writes before the put of their
   * checkpoint when a graph has a DeltaChannel (its next put waits for them), as its own savers
   * accept. Writes are only ever read through their checkpoint's record, so writes whose checkpoint
   * never comes (a put refused or lost in a crash) are seen by no reader; retention removes them
   * once past its grace, as any writes no record names. Two requests: the thread record, the append
   * (and the creation of an absent thread). One, the append, when a checkpoint put of the thread is
   * on its way in this instance (LangGraph sends a step's writes while it puts the checkpoint): the
   * writer is then checked on the thread record that put reads or writes next, which is as current
   * as a read sent now (see ThreadRecords.observedAfter).
   */
  async putWrites(tenant: string, threadId: string, put: WritesPut): Promise<{ writes: number }> {
    checkThreadId(threadId);
    checkWrites(put);
    const store = this.records.storeOf(tenant);
    const observed = await this.records.observedAfter(tenant, threadId);
    const found = observed === undefined ? await this.records.readThread(store, tenant, threadId) : observed;
    if (found === null && put.runId !== undefined) {
      // No run holds a thread that does not exist yet: refused before the thread is created, so
      // that the refusal writes nothing.
      const refusal = writerRefusal(
        newThreadRecord(threadId, this.records.now()),
        put.runId,
        this.records.now(),
      );
      if (refusal !== null) throw refusal;
    }
    const current = found ?? (await this.created(store, tenant, threadId));
    const thread = current.record;
    const refusal = writerRefusal(thread, put.runId, this.records.now());
    if (refusal !== null) throw refusal;
    await store.append(
      keysOf(thread).writes(put.ns, put.checkpointId),
      encodeWritesLine(put.taskId, put.taskPath, put.writes, put.runId),
    );
    return { writes: put.writes.length };
  }

  /**
   * Creates an absent thread for pending writes, as a put or a run start would: LangGraph with a
   * DeltaChannel sends a new thread's first writes before its first put. Whoever creates it first
   * wins; the others (this put's own put among them) find it created.
   */
  private async created(store: KeyValueStore, tenant: string, threadId: string): Promise<Snapshot> {
    try {
      return await this.records.commit(store, tenant, null, newThreadRecord(threadId, this.records.now()));
    } catch (error) {
      if (!(error instanceof PreconditionFailedError)) throw error;
    }
    const current = await this.records.readThread(store, tenant, threadId);
    if (current === null) throw tooBusy(); // created and deleted in the same instant
    return current;
  }

  /**
   * The commit of a put (see putCheckpoint): the head moves in a compare-and-swap, retried.
   * `read` tells whether `snapshot` was read for this put; a kept one may be stale.
   */
  private async commitPut(
    store: KeyValueStore,
    tenant: string,
    snapshot: Snapshot | null,
    read: boolean,
    thread: ThreadRecord,
    record: CheckpointRecord,
    created: boolean,
    runId: string | undefined,
    chunks: HeadEntry['chunks'],
  ): Promise<PutResult> {
    let current = snapshot;
    let checked = read;
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
      const now = this.records.now();
      const next = withHead(base, record, created, now, chunks);
      const result = (head: string) => ({
        created,
        threadId: base.threadId,
        ns: record.ns,
        checkpointId: record.id,
        head,
      });
      if (next === null) {
        // A retry that leaves the head where it is writes nothing, so no compare-and-swap checks
        // the record it was answered on. A kept record may be stale (the head moved back, the run
        // fenced, the thread deleted elsewhere): it is answered only on the current one, read now.
        if (checked) return result(base.heads.get(record.ns)?.record.id ?? record.id);
      } else {
        try {
          await this.records.commit(store, tenant, current, next);
          return result(record.id);
        } catch (error) {
          if (!(error instanceof PreconditionFailedError)) throw error;
        }
      }
      const creating = current === null;
      current = await this.records.readThread(store, tenant, base.threadId);
      if (!checked && current?.record.incarnation !== base.incarnation) {
        // The thread was deleted (and maybe created again) since this instance kept its record,
        // perhaps before this put came: the put is answered on the thread there is now, as an
        // instance that kept nothing answers it, not refused for a change made while it was stored.
        throw new StaleThread(current);
      }
      checked = true;
      if (current === null) throw noThread(base.threadId);
      if (current.record.incarnation !== base.incarnation) {
        if (creating) throw new LostCreation(current);
        throw new ConflictError(
          `thread ${base.threadId} was deleted and created again while the checkpoint was stored`,
        );
      }
      const refusal = writerRefusal(current.record, runId, this.records.now());
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
   *
   * The values it inherits that are held inline in another record are first stored at their value
   * keys (as a put stores a value apart): a collector decides which inline values to keep before it
   * removes records, from the records it listed then, which this put's may postdate; the record
   * holding such a value goes with its bytes unless something else stored them apart. An inherited
   * value that cannot be read any more is gone already: the put is refused as above.
   */
  private async checkParentStored(
    store: KeyValueStore,
    thread: ThreadRecord,
    record: CheckpointRecord,
  ): Promise<void> {
    const parent = record.parent as string;
    const keys = keysOf(thread);
    const reader = new ValueReader(store, keys);
    const inherited = Object.entries(record.valueSources).filter(
      ([, source]) => isInlineSource(source) && producerOf(source) !== record.id,
    );
    await Promise.all(
      inherited.map(async ([channel, source]) => {
        let value: TypedBytes;
        try {
          value = await reader.value(record, channel);
        } catch (error) {
          if (!(error instanceof MissingValueError)) throw error;
          throw new ConflictError(
            `parent: thread ${thread.threadId} has no value of channel ${channel} for checkpoint ${parent} in namespace "${record.ns}" any more (retention removed it)`,
          );
        }
        await storeValue(store, keys.value(record.ns, source, channel), encodeValue(value));
      }),
    );
    if ((await store.head(keys.record(parent, record.ns))) === null) {
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
    const now = await this.records.readThread(store, tenant, thread.threadId);
    if (
      now !== null &&
      now.record.incarnation === thread.incarnation &&
      now.record.heads.get(put.ns)?.record.id === put.checkpointId
    ) {
      return;
    }
    await store.delete(keysOf(thread).record(put.checkpointId, put.ns));
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
    const parent = await this.history.recordIn(store, thread, put.parent, put.ns);
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
    chunked: ReadonlyMap<string, ChunkedValue>,
  ): CheckpointRecord {
    const valueSources: Record<string, string> = {};
    const pieces: Record<string, readonly Segment[]> = {};
    for (const [channel, version] of Object.entries(put.channelVersions)) {
      if (Object.hasOwn(put.values, channel)) {
        const value = encoded.get(channel);
        if (value !== undefined) setOwn(valueSources, channel, value.source);
        const split = chunked.get(channel);
        if (split !== undefined) {
          setOwn(valueSources, channel, split.source);
          setOwn(pieces, channel, split.segments);
        }
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
      const inherited = parent === null ? undefined : ownValue(parent.pieces ?? {}, channel);
      if (source !== undefined && isChunkedSource(source) && inherited !== undefined) {
        setOwn(pieces, channel, inherited);
      }
    }
    // Never before its parent, whatever this instance's clock: a reader takes a record created
    // after the record that names its pack for another record of its id (see ValueReader.pack),
    // and every pack a record names is its parent's or one its parent names.
    const at = iso(now);
    return {
      id: put.checkpointId,
      ns: put.ns,
      parent: put.parent,
      createdAt: parent !== null && parent.createdAt > at ? parent.createdAt : at,
      v: put.v,
      type: put.checkpoint.type,
      checkpoint: put.checkpoint.data.toString('base64'),
      metadata: put.metadata,
      channelVersions: put.channelVersions,
      valueSources,
      ...(Object.keys(pieces).length === 0 ? {} : { pieces }),
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
    sent: ReadonlyMap<string, Buffer>,
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
        sameCheckpoint(existing, record) && (await this.sameValues(store, keys, existing, record, sent));
      return { record: existing, created: false, same };
    }
    throw tooBusy();
  }

  /**
   * Whether a stored record and a put's record of the same checkpoint name the same value for each
   * channel. A value's source holds a digest of its bytes (type tag included): unsealed the first
   * 16 bytes of their SHA-256, and for a value stored by what it adds their HMAC under the thread's
   * chunk key, sealed or not; equal digests of one kind are equal values. Otherwise (sealed values
   * named by random bytes, or the two stored differently) the stored value is read and compared
   * byte for byte (only on this retry path). Inherited sources come from the parent, already compared.
   */
  private async sameValues(
    store: KeyValueStore,
    keys: ThreadKeys,
    existing: CheckpointRecord,
    record: CheckpointRecord,
    sent: ReadonlyMap<string, Buffer>,
  ): Promise<boolean> {
    const own = `${record.id}/`;
    const digest = (source: string) => source.slice(own.length).replace(/^~/, '');
    const channels = new Set([...Object.keys(existing.valueSources), ...Object.keys(record.valueSources)]);
    const compared: { channel: string; bytes: Buffer }[] = [];
    for (const channel of channels) {
      const was = ownValue(existing.valueSources, channel);
      const now = ownValue(record.valueSources, channel);
      if (was === now) continue;
      const bytes = sent.get(channel);
      if (was === undefined || !was.startsWith(own) || !now?.startsWith(own) || !bytes) return false;
      const chunked = isChunkedSource(was);
      if (chunked === isChunkedSource(now) && (chunked || !this.sealed)) {
        if (digest(was) !== digest(now)) return false;
        continue;
      }
      compared.push({ channel, bytes });
    }
    const reader = new ValueReader(store, keys);
    reader.know(existing);
    // A stored value that is missing or damaged differs from what is sent; a storage fault is no
    // answer (the put fails with it, and its retry compares again).
    const stored = await Promise.all(
      compared.map(({ channel }) =>
        reader.value(existing, channel).then(encodeValue, (error: unknown) => {
          if (error instanceof IntegrityError) return null;
          throw error;
        }),
      ),
    );
    return compared.every(({ bytes }, index) => stored[index]?.equals(bytes) === true);
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
  chunks?: HeadEntry['chunks'],
): ThreadRecord | null {
  const head = thread.heads.get(record.ns);
  if (!created) {
    if (head?.record.id === record.id) return null;
    const moves = head === undefined || head.record.id === record.parent || record.id > head.record.id;
    if (!moves) return null;
  }
  const heads = new Map(thread.heads);
  heads.delete(record.ns);
  heads.set(record.ns, {
    record: withoutInline(record),
    since: iso(now),
    ...(chunks === undefined || Object.keys(chunks).length === 0 ? {} : { chunks }),
  });
  // A thread stored before values were stored by what they add gets its chunk key now.
  const chunkKey = thread.chunkKey ?? randomBytes(32).toString('base64');
  return { ...thread, heads: fitHeads(heads), updatedAt: iso(now), chunkKey };
}

/** Create-only write that keeps what is stored (first wins). */
interface EncodedValue {
  readonly bytes: Buffer;
  /** The record's value source: `<checkpoint id>/[~]<16 bytes, base64url>` (see encodedValues). */
  readonly source: string;
}

/**
 * The stored bytes of each channel value a put sends, with the source its record names: the first
 * 16 bytes of the bytes' SHA-256, or 16 random bytes when values are sealed (see ThreadStoreOptions),
 * after a `~` when the value goes inline in the record (see isInlineSource).
 */
function encodedValues(
  put: CheckpointPut,
  sealed: boolean,
  inline: boolean,
  chunked: ReadonlyMap<string, unknown>,
): Map<string, EncodedValue> {
  const encoded = new Map<string, EncodedValue>();
  for (const [channel, value] of Object.entries(put.values)) {
    if (value === null || chunked.has(channel)) continue;
    const bytes = encodeValue(value);
    const digest = (
      sealed ? randomBytes(16) : createHash('sha256').update(bytes).digest().subarray(0, 16)
    ).toString('base64url');
    encoded.set(channel, { bytes, source: `${put.checkpointId}/${inline ? '~' : ''}${digest}` });
  }
  return encoded;
}

/** A value stored by what it adds: its source, its segments and its chunk list (see chunks.ts). */
interface ChunkedValue {
  readonly source: string;
  readonly segments: Segment[];
  readonly chunks: ChunkRef[];
}

interface ChunkedValues {
  readonly values: ReadonlyMap<string, ChunkedValue>;
  /** The chunks the put adds, the pack of its record. */
  readonly pack: Buffer;
}

const NO_CHUNKS: ChunkedValues = { values: new Map(), pack: Buffer.alloc(0) };

/** How a put stores its record: with what inline, in its pack, or apart. */
interface Layout {
  readonly record: CheckpointRecord;
  readonly encoded: Map<string, EncodedValue>;
  readonly inlined: boolean;
  readonly chunked: ChunkedValues;
}

/** The namespace's head when it is the put's parent (its chunk lists are then known). */
function headOf(thread: ThreadRecord, put: CheckpointPut): HeadEntry | undefined {
  const head = thread.heads.get(put.ns);
  return put.parent !== null && head?.record.id === put.parent ? head : undefined;
}

/**
 * The values of a put of 1 KiB or more, stored by what they add to the parent's value of the same
 * channel (when the parent is the head, whose chunk lists the thread record holds; otherwise whole,
 * in the record's pack), with their sources: `<checkpoint id>/*<keyed digest of the bytes>`.
 * `options` go to planValue: null when a value cannot keep within MAX_SEGMENTS under `maxPack`.
 */
function chunkedValues(
  put: CheckpointPut,
  known: ReadonlyMap<string, ParentValue>,
  key: Buffer,
  options: { readonly compact?: boolean; readonly maxPack?: number },
): ChunkedValues | null {
  const pack = new PackBuilder();
  const values = new Map<string, ChunkedValue>();
  for (const [channel, value] of Object.entries(put.values)) {
    if (value === null) continue;
    const bytes = encodeValue(value);
    if (bytes.length < CHUNKED_FROM_BYTES) continue;
    const planned = planValue(bytes, key, known.get(channel), put.checkpointId, pack, options);
    if (planned === null) return null;
    values.set(channel, { ...planned, source: `${put.checkpointId}/*${valueDigest(key, bytes)}` });
  }
  return { values, pack: pack.bytes() };
}

/**
 * What a put knows of its parent's value of each channel it sends of 1 KiB or more, stored by what
 * it adds: the segments and, from the head, the chunk list. A parent whose chunk list is not known
 * (a fork, or a head a rewind set) has its value read (one request per pack, in parallel) and each
 * of its segments taken as one chunk, so that a fork or a put after a rewind still names the bytes
 * it shares with its parent instead of storing them again.
 */
async function parentValues(
  store: KeyValueStore,
  thread: ThreadRecord,
  put: CheckpointPut,
  parent: CheckpointRecord | null,
  parentHead: HeadEntry | undefined,
  key: Buffer,
): Promise<Map<string, ParentValue>> {
  const known = new Map<string, ParentValue>();
  if (parent === null) return known;
  const reader = new ValueReader(store, keysOf(thread));
  await Promise.all(
    Object.entries(put.values).map(async ([channel, value]) => {
      const segments = ownValue(parent.pieces ?? {}, channel);
      if (value === null || segments === undefined || encodeValue(value).length < CHUNKED_FROM_BYTES) return;
      const chunks = ownValue(parentHead?.chunks ?? {}, channel);
      if (chunks !== undefined) {
        known.set(channel, { segments, chunks });
        return;
      }
      // A parent's value that cannot be read here (damage) is not shared: the put stores its own.
      const read = await reader.value(parent, channel).catch((error: unknown) => {
        if (error instanceof IntegrityError) return null;
        throw error;
      });
      if (read === null) return;
      const bytes = encodeValue(read);
      let offset = 0;
      const whole: ChunkRef[] = segments.map(([, , length]) => {
        const name = chunkName(key, bytes.subarray(offset, offset + length));
        offset += length;
        return [name, length];
      });
      known.set(channel, { segments, chunks: whole });
    }),
  );
  return known;
}

/** The chunk lists the new head keeps: of its own values, and of those it inherits from the head. */
function headChunks(
  record: CheckpointRecord,
  own: ReadonlyMap<string, ChunkedValue>,
  parentHead: HeadEntry | undefined,
): HeadEntry['chunks'] {
  const chunks: Record<string, readonly ChunkRef[]> = {};
  for (const channel of Object.keys(record.pieces ?? {})) {
    const list = own.get(channel)?.chunks ?? ownValue(parentHead?.chunks ?? {}, channel);
    if (list !== undefined) setOwn(chunks, channel, list);
  }
  return chunks;
}

/** The stored bytes of every value a put sends (type tag, a line break, the bytes). */
function sentValues(put: CheckpointPut): Map<string, Buffer> {
  const sent = new Map<string, Buffer>();
  for (const [channel, value] of Object.entries(put.values)) {
    if (value !== null) sent.set(channel, encodeValue(value));
  }
  return sent;
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
