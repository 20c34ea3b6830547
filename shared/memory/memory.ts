import { createHash, randomBytes } from 'node:crypto';

import {
  noTransactionalAuditLog,
  type PendingEvent,
  pendingEvent,
  type RepairCheck,
  type TransactionalAuditLog,
} from '../audit/pending';
import { plainCodec, type ValueCodec, type ValuePlace } from '../crypto/valueCodec';
import { lru } from '../lru';
import {
  IntegrityError,
  InvalidArgumentError,
  PreconditionFailedError,
  StorageUnavailableError,
} from '../protocol/errors';
import {
  DEFAULT_NAMESPACE_LIMIT,
  DEFAULT_SEARCH_LIMIT,
  type Distance,
  DISTANCES,
  FORGET_ALL_BUDGET,
  MAX_LISTED_NAMESPACES,
  MAX_NAMESPACE_LIMIT,
  MAX_NAMESPACE_SEGMENTS,
  MAX_SEARCH_LIMIT,
  MAX_SEARCH_OFFSET,
  MAX_SEARCH_SCAN_BYTES,
  MAX_SEARCH_SCAN_ROWS,
  MAX_SEARCH_TEXT_BYTES,
} from '../protocol/memory';
import { forEachLimited } from '../protocol/pool';
import { casPause } from '../retry';
import type { WriteConditions } from '../storage/keyValueStore';
import {
  checkFactKey,
  checkNamespace,
  checkTtl,
  compareNamespaces,
  isWithin,
  type MemoryItem,
  type ScoredItem,
  serialiseValue,
} from './facts';
import { queryWords } from './keywordSearch';
import { factId, namespaceDigest, SEGMENT_DIGEST_CHARS } from './layout';
import {
  type FactHeader,
  type FactWrite,
  MAX_OUTBOX_CHARS,
  MAX_WRITE_BYTES_PER_CALL,
  MAX_WRITES_PER_CALL,
  type MemoryStore,
  type StoredFact,
} from './memoryStore';
import { rank } from './ranking';
import { DEFAULT_MAX_AGE_MS, SearchIndex } from './searchIndex';
import { MAX_SNAPSHOT_BYTES, type MemorySnapshotStore } from './searchSnapshot';
import type { ValueFilter } from './valueFilter';
import { checkVector, checkVectors, commonDims, type FactVectors, packedLayout, packFact } from './vectors';

/**
 * Long-term memory: facts per tenant, in namespaces, on any {@link MemoryStore}.
 *
 * What it promises, on every store:
 * - `remember` replaces the value, keeps `createdAt`, and moves `updatedAt` forward: strictly
 *   increasing per fact, also for writes within one millisecond. With `ifMatch` it is a
 *   compare-and-swap (412 with the current ETag when another write came first); without, it
 *   retries its own compare-and-swap until it lands, so concurrent writers never lose a write
 *   silently: each lands whole, in some order.
 * - A time to live (seconds) makes a fact absent from `recall`, `search` and listings from
 *   `expiresAt` on, before anything deletes it; reads never extend it; `remember` without one
 *   clears it. Expired rows are removed by {@link MemoryFacts.pruneExpired} (retention).
 * - Every value goes through the codec (sealed to its place: tenant, `memory.fact`, namespace and
 *   key), and every change is recorded in the audit trail with names and counts, never values, so
 *   that a record and its change never disagree after a crash (below).
 * - Search reads the namespace and below, never the rest of the tenant, and at most
 *   {@link MAX_SEARCH_SCAN_ROWS} rows or {@link MAX_SEARCH_SCAN_BYTES} of values (then `truncated`).
 */

/*
 * The audit trail (docs/audit.md), with the pending-marker protocol of shared/audit/pending.ts. The
 * commit point of every change is one conditional single-row operation, and the proof that it
 * happened lives in the row itself, as for a thread record:
 *
 * - `memory.written`: a marker first (check `memory`), then the write, which carries the event in
 *   the row's `outbox`, then the record. The repair decides by the row: committed when the row
 *   carries the event. Writes keep the outbox, dropping only events known to be in the trail, so a
 *   later write never hides an earlier one; a write refused by its compare-and-swap abandons its
 *   marker (certainly not written).
 * - `memory.forgotten`: a marker (check `memory-forget`, with the row's incarnation) whose check
 *   carries the row's outbox events not yet in the trail, then the delete at the version read, then
 *   the record. Committed when the row of that incarnation is gone; the repair then appends the
 *   carried events too, so a deletion never loses the record of a write it removed. The event id is
 *   one per incarnation (`memory.forgotten:<fact digest>:<incarnation>`), so two forgets of the same
 *   version, or a repair and a forget, record it once.
 * - `forgetAll` (a namespace and below): one record per call that deleted a row, `memory.forgotten`
 *   with `subject` `["<namespace>"]` and `details.count` (live facts deleted) and `more`. It is many
 *   deletes, not one: its commit point is the first row it deletes, which its marker names (as a
 *   forget of that row, carrying the outbox events of every row the call is about to delete); the
 *   rest go one by one at the version listed. A call interrupted after its first delete (a fault,
 *   or a crash repaired later) records `count: null`: some facts were deleted, how many is not
 *   known.
 * - Expired rows still carrying events not in the trail are left by `forget` and `pruneExpired`
 *   until those are (the repair appends them first).
 */

/** Audit events a fact's outbox may hold before the trail is asked which are appended. */
const OUTBOX_CHECK_AT = 2;
/** Audit events pending on one fact from which its writes are refused (fail closed). */
const OUTBOX_MAX = 4;
/** The events one `forgetAll` call may carry in its marker (characters of JSON); more: 503. */
const MAX_CARRIED_CHARS = 16 * 1024;
/** Deletes one `forgetAll` call runs at once (audited). */
const DELETE_WIDTH = 8;

const WRITE_ATTEMPTS = 32;
/** Fact versions remembered per instance (about 200 bytes each). */
const KNOWN_VERSIONS = 10_000;

export interface MemoryFactsOptions {
  readonly store: MemoryStore;
  /** Seals values at rest; default: stored as they are. */
  readonly codec?: ValueCodec;
  /** Receives `memory.written` and `memory.forgotten` (see above); default: off. */
  readonly audit?: TransactionalAuditLog;
  /** The clock (Unix ms); tests may move it. */
  readonly now?: () => number;
  /** The bound of this instance's search cache (estimated bytes held); default 64 MiB. */
  readonly searchCacheBytes?: number;
  /**
   * Where searches store snapshots of the subtrees they read (searchSnapshot.ts), so that a fresh
   * instance reads one object instead of every row; default: none (every fresh instance reads rows).
   */
  readonly snapshots?: MemorySnapshotStore;
  /** Facts a searched subtree holds at least for its snapshot to be stored (searchIndex.ts); tests lower it. */
  readonly snapshotMinFacts?: number;
}

/** Who asks: the tenant, and the credential for the audit trail when known. */
export interface Caller {
  readonly tenant: string;
  readonly actor?: string;
}

export interface RememberOptions {
  /** Seconds until the fact expires; absent: never (and a previous time to live is cleared). */
  readonly ttl?: number;
  /**
   * Field path → vector (unchecked input, checked here: `vectors.<path>` names a fault). A
   * remember replaces the whole fact, so vectors not given again are gone.
   */
  readonly vectors?: unknown;
  readonly conditions?: WriteConditions;
}

export interface SearchRequest {
  /** `""` searches the whole tenant. */
  readonly namespace: string;
  readonly text?: string;
  /** A query vector (unchecked input): ranks the facts with vectors by closeness to it. */
  readonly vector?: unknown;
  /** How closeness is measured; default cosine. */
  readonly distance?: string;
  readonly limit?: number;
  readonly offset?: number;
  readonly filter?: ValueFilter;
}

export interface SearchResult {
  readonly items: ScoredItem[];
  /** True when the namespace held more rows than one search reads: results cover the first part. */
  readonly truncated: boolean;
}

export interface NamespaceListing {
  readonly prefix?: string;
  readonly suffix?: string;
  readonly maxDepth?: number;
  readonly limit?: number;
  readonly offset?: number;
}

export class MemoryFacts {
  private readonly store: MemoryStore;
  private readonly codec: ValueCodec;
  private readonly audit: TransactionalAuditLog;
  private readonly now: () => number;
  /**
   * The last version of each fact this instance wrote or read (bounded): a hint that lets
   * `remember` skip its read, never trusted for an answer (see `remember`).
   */
  private readonly versions = lru<string, FactHeader>(KNOWN_VERSIONS);
  /** The facts searches read, decoded and kept fresh by the tenant's change feed (searchIndex.ts). */
  private readonly index: SearchIndex;
  /** Tenants' vector indexes seen (an index never changes once made, so this never goes stale). */
  private readonly indexes = lru<string, number>(KNOWN_VERSIONS);
  private readonly snapshots: MemorySnapshotStore | undefined;

  constructor(options: MemoryFactsOptions) {
    this.store = options.store;
    this.codec = options.codec ?? plainCodec;
    this.audit = options.audit ?? noTransactionalAuditLog;
    this.now = options.now ?? Date.now;
    this.snapshots = options.snapshots;
    const snapshots = options.snapshots;
    this.index = new SearchIndex({
      store: this.store,
      open: (tenant, fact) => this.codec.open(fact.value, placeOf(tenant, fact.namespace, fact.key)),
      maxRows: MAX_SEARCH_SCAN_ROWS,
      maxScanBytes: MAX_SEARCH_SCAN_BYTES,
      wallClock: this.now,
      ...(options.searchCacheBytes === undefined ? {} : { maxBytes: options.searchCacheBytes }),
      ...(options.snapshotMinFacts === undefined ? {} : { snapshotMinFacts: options.snapshotMinFacts }),
      ...(snapshots === undefined
        ? {}
        : {
            snapshots: {
              // Unreadable, absent, or not opening at its place (sealed for another, or plain where
              // sealed is expected): the search reads the rows instead.
              load: async (tenant: string, digest: string) => {
                try {
                  const stored = await snapshots.read(tenant, digest, MAX_SNAPSHOT_BYTES);
                  return stored === null ? null : this.codec.open(stored, snapshotPlace(tenant, digest));
                } catch {
                  return null;
                }
              },
              save: async (tenant: string, digest: string, plain: Buffer) => {
                await this.codec.prepare?.(tenant);
                await snapshots.write(tenant, digest, this.codec.seal(plain, snapshotPlace(tenant, digest)));
              },
            },
          }),
    });
  }

  /** Resolves once the search snapshots being written have been stored (or failed): tests. */
  async snapshotsSaved(): Promise<void> {
    await this.index.snapshotsSaved();
  }

  /**
   * Deletes the stored snapshots that may hold a fact of `namespace`: those of the namespace and
   * of each namespace above it, and with `below` those of the namespaces below it too.
   */
  private async dropSnapshots(tenant: string, namespace: string, below = false): Promise<void> {
    const snapshots = this.snapshots;
    if (snapshots === undefined) return;
    const digest = namespaceDigest(namespace);
    const digests = new Set<string>();
    for (let length = 0; length <= digest.length; length += SEGMENT_DIGEST_CHARS) {
      digests.add(digest.slice(0, length));
    }
    if (below) {
      for (const stored of await snapshots.list(tenant)) {
        if (stored.digest.startsWith(digest)) digests.add(stored.digest);
      }
    }
    await forEachLimited([...digests], 16, (each) => snapshots.delete(tenant, each));
  }

  /**
   * {@link dropSnapshots}, a failure only logged away: the fact is gone already, and a snapshot
   * left behind is never used once older than the search cache's maximum age (the prune deletes it).
   */
  private async dropSnapshotsQuietly(tenant: string, namespace: string, below = false): Promise<void> {
    try {
      await this.dropSnapshots(tenant, namespace, below);
    } catch {
      // Bounded by the age above; the forget itself succeeded.
    }
  }

  /** Deletes every stored snapshot of the tenant (rewrap), or those stored before `before` (prune). */
  async dropAllSnapshots(tenant: string, before?: number): Promise<void> {
    const snapshots = this.snapshots;
    if (snapshots === undefined) return;
    const stored = await snapshots.list(tenant);
    const old = stored.filter((each) => before === undefined || each.storedAt.getTime() < before);
    await forEachLimited(old, 16, (each) => snapshots.delete(tenant, each.digest));
  }

  /** Stores `value` under `namespace`/`key`; `created` is true when no live fact was there. */
  async remember(
    caller: Caller,
    namespace: string,
    key: string,
    value: unknown,
    options: RememberOptions = {},
  ): Promise<{ item: MemoryItem; created: boolean }> {
    return this.store1(caller, await this.prepare(caller, namespace, key, value, options));
  }

  /**
   * Several remembers without conditions, answered in order, each as `remember` would answer it or
   * with its error (a bad one fails alone). Without the audit trail, the facts this instance
   * knows the current version of (or none: taken for new) are written in as few storage requests
   * as the store allows (`writeMany`); a write whose version was not the current one, and every
   * write with the audit trail on (each has its pending marker), goes as one `remember`.
   */
  async rememberMany(
    caller: Caller,
    writes: readonly { namespace: string; key: string; value: unknown; ttl?: number; vectors?: unknown }[],
  ): Promise<({ item: MemoryItem; created: boolean } | { error: unknown })[]> {
    const results: ({ item: MemoryItem; created: boolean } | { error: unknown } | undefined)[] = [];
    const one = async ({ at, write }: { at: number; write: PreparedWrite }) => {
      try {
        results[at] = await this.store1(caller, write);
      } catch (error) {
        results[at] = { error };
      }
    };
    // A window of writes at a time, prepared (checked and sealed) just before it is stored: the
    // sealed values of one window are held at once, not those of the whole call.
    for (let start = 0; start < writes.length; start += MAX_WRITES_PER_CALL) {
      const prepared: { at: number; write: PreparedWrite }[] = [];
      for (let at = start; at < Math.min(writes.length, start + MAX_WRITES_PER_CALL); at++) {
        const write = writes[at] as (typeof writes)[number];
        try {
          const options = {
            ...(write.ttl === undefined ? {} : { ttl: write.ttl }),
            ...(write.vectors === undefined ? {} : { vectors: write.vectors }),
          };
          prepared.push({
            at,
            write: await this.prepare(caller, write.namespace, write.key, write.value, options),
          });
        } catch (error) {
          results[at] = { error };
        }
      }
      if (this.audit.enabled) {
        for (const entry of prepared) await one(entry);
        continue;
      }
      for (const chunk of chunksOf(prepared)) {
        const now = this.now();
        const plans = chunk.map(({ write }) => {
          const known = this.versions.get(write.versionKey) ?? null;
          const live = known !== null && !isExpired(known, now) ? known : null;
          return {
            known,
            created: live === null,
            fact: planWrite(write, known, live, now, known?.outbox ?? null),
          };
        });
        const stored = await this.store.writeMany(
          caller.tenant,
          plans.map(({ known, fact }) => ({ fact, ifEtag: known?.etag ?? null })),
        );
        for (const [i, entry] of chunk.entries()) {
          const row = stored[i];
          if (row === null || row === undefined) {
            // Not the current version (or not new after all): read and write as one remember.
            this.versions.delete(entry.write.versionKey);
            await one(entry);
            continue;
          }
          this.versions.set(entry.write.versionKey, headerOf(row));
          results[entry.at] = {
            item: itemOf(row, entry.write.parsed, [...entry.write.vectors.keys()]),
            created: (plans[i] as { created: boolean }).created,
          };
        }
      }
    }
    return results as ({ item: MemoryItem; created: boolean } | { error: unknown })[];
  }

  /** Every check of a remember that needs no version, and the value sealed. */
  private async prepare(
    caller: Caller,
    namespace: string,
    key: string,
    value: unknown,
    options: RememberOptions,
  ): Promise<PreparedWrite> {
    // The value's size first: a value over 32 KiB is 413 whatever else is wrong with the request.
    const plain = serialiseValue(value);
    checkNamespace(namespace);
    checkFactKey(key);
    if (options.ttl !== undefined) checkTtl(options.ttl);
    const vectors = options.vectors === undefined ? new Map() : checkVectors(options.vectors);
    const dims = commonDims(vectors);
    const conditions = options.conditions ?? {};
    if (conditions.ifMatch !== undefined && conditions.ifAbsent === true) {
      throw new InvalidArgumentError('If-Match', 'cannot be combined with If-None-Match');
    }
    // A conditional write makes the tenant's index only once its condition held (`store1`): made
    // here, it would outlive a write refused with 412, which is to write nothing.
    const unconditional = conditions.ifMatch === undefined && conditions.ifAbsent !== true;
    if (dims !== null) await this.checkIndex(caller.tenant, dims, vectors, unconditional);
    await this.codec.prepare?.(caller.tenant);
    const sealed = this.codec.seal(packFact(plain, vectors), placeOf(caller.tenant, namespace, key));
    return {
      namespace,
      key,
      sealed,
      parsed: JSON.parse(plain.toString('utf8')) as unknown,
      vectors,
      dims,
      ttl: options.ttl,
      conditions,
      versionKey: versionKeyOf(caller.tenant, namespace, key),
    };
  }

  /** Writes a prepared remember: on the version known, else read; retried until it lands. */
  private async store1(
    caller: Caller,
    write: PreparedWrite,
  ): Promise<{ item: MemoryItem; created: boolean }> {
    const { namespace, key, conditions, versionKey } = write;
    for (let attempt = 0; attempt < WRITE_ATTEMPTS; attempt++) {
      await casPause(attempt);
      // First try on the version this instance saw last, without reading: the write is conditional
      // on it, so it lands only if that is still the current version (then it is exactly what a
      // read would have given); otherwise it writes nothing and the loop reads.
      const known = attempt === 0 ? this.versions.get(versionKey) : undefined;
      const now = this.now();
      const usable =
        known !== undefined &&
        conditions.ifAbsent !== true &&
        (conditions.ifMatch === undefined || (conditions.ifMatch === known.etag && !isExpired(known, now)));
      const current = usable ? known : await this.store.get(caller.tenant, namespace, key);
      const live = current !== null && !isExpired(current, now) ? current : null;
      checkWriteConditions(conditions, live);
      // The index of a conditional write, made now that its condition held (read by `prepare`
      // already, or made here once: no further request).
      if (write.dims !== null) await this.checkIndex(caller.tenant, write.dims, write.vectors);
      const created = live === null;
      const event = this.audit.enabled
        ? pendingEvent(
            {
              tenant: caller.tenant,
              action: 'memory.written',
              ...actorOf(caller),
              subject: subjectOf(namespace, key),
              outcome: 'ok',
              details: { created },
            },
            now,
          )
        : null;
      const fact = planWrite(write, current, live, now, await this.nextOutbox(caller.tenant, current, event));
      if (event !== null) {
        await this.audit.begin(caller.tenant, [event], { kind: 'memory', namespace, key });
      }
      // A storage fault leaves the marker: the write may have landed, and the row's outbox tells.
      const stored = await this.tryWrite(caller.tenant, current, fact);
      if (stored === null) {
        // Refused by the compare-and-swap: certainly not written, so the marker goes.
        if (event !== null) await this.audit.abandon(caller.tenant, [event]);
        this.versions.delete(versionKey);
        continue;
      }
      this.versions.set(versionKey, headerOf(stored));
      if (event !== null) await this.audit.commit(caller.tenant, [event]);
      return { item: itemOf(stored, write.parsed, [...write.vectors.keys()]), created };
    }
    throw new StorageUnavailableError('the fact is changing too fast to write; retry');
  }

  /** The live fact, or null when absent or expired. */
  async recall(caller: Caller, namespace: string, key: string): Promise<MemoryItem | null> {
    checkNamespace(namespace);
    checkFactKey(key);
    await this.codec.prepare?.(caller.tenant);
    const stored = await this.store.get(caller.tenant, namespace, key);
    const versionKey = versionKeyOf(caller.tenant, namespace, key);
    if (stored === null) {
      this.versions.delete(versionKey);
      return null;
    }
    this.versions.set(versionKey, headerOf(stored));
    if (isExpired(stored, this.now())) return null;
    const { value, fields } = this.open(caller.tenant, stored);
    return itemOf(stored, value, fields);
  }

  /**
   * Deletes the fact; true when a live one was there. With `ifMatch`, only that version (412 when
   * it is not the current one, also when the fact is absent); `ifAbsent` fails when it exists.
   */
  async forget(
    caller: Caller,
    namespace: string,
    key: string,
    conditions: WriteConditions = {},
  ): Promise<boolean> {
    checkNamespace(namespace);
    checkFactKey(key);
    if (conditions.ifMatch !== undefined && conditions.ifAbsent === true) {
      throw new InvalidArgumentError('If-Match', 'cannot be combined with If-None-Match');
    }
    const versionKey = versionKeyOf(caller.tenant, namespace, key);
    for (let attempt = 0; attempt < WRITE_ATTEMPTS; attempt++) {
      const current = await this.store.get(caller.tenant, namespace, key);
      // No row: listed in the feed all the same, before any answer. A delete whose own listing
      // failed (its call answered 503, the row gone) is then listed by the next forget of the
      // fact, its retry included, and no cache keeps the fact after a forget that answered.
      if (current === null) await this.store.relist(caller.tenant, [factId(namespace, key)]);
      const now = this.now();
      const live = current !== null && !isExpired(current, now) ? current : null;
      checkWriteConditions(conditions, live);
      if (current === null) return false;
      const carried = await this.unsettled(caller.tenant, [current]);
      if (live === null) {
        // Expired: absent already, nothing to record. A row whose outbox holds events not yet in
        // the trail stays until they are (deleting it would take the proof of those writes).
        if (carried.length > 0) return false;
        if (await this.deleteRow(caller.tenant, current)) this.versions.delete(versionKey);
        return false;
      }
      const incarnation = incarnationOf(current);
      const event = this.audit.enabled
        ? pendingEvent(
            {
              id: forgottenEventId(namespace, key, incarnation),
              tenant: caller.tenant,
              action: 'memory.forgotten',
              ...actorOf(caller),
              subject: subjectOf(namespace, key),
              outcome: 'ok',
            },
            now,
          )
        : null;
      if (event !== null) {
        await this.audit.begin(caller.tenant, [event], {
          kind: 'memory-forget',
          namespace,
          key,
          incarnation,
          carried,
        });
      }
      // On the version read: a write that came in between is not deleted unseen. The marker of a
      // delete that did not happen stays until a repair finds the row alive and drops it (another
      // forget of this incarnation may hold the same marker).
      const deleted = await this.relistingOnFailure(caller.tenant, [current], () =>
        this.deleteRow(caller.tenant, current),
      );
      if (!deleted) continue;
      this.versions.delete(versionKey);
      await this.dropSnapshotsQuietly(caller.tenant, namespace);
      // With carried events the marker stays: the repair appends them once their own appenders'
      // window has passed.
      if (event !== null)
        await this.audit.commit(caller.tenant, [event], { keepMarkers: carried.length > 0 });
      return true;
    }
    throw new StorageUnavailableError('the fact is changing too fast to delete; retry');
  }

  /**
   * Deletes `namespace` and everything below it (`""` with `all`: the whole tenant), at most
   * {@link FORGET_ALL_BUDGET} rows per call: `deleted` counts the live facts deleted, `more` says
   * whether rows remain (call again). Idempotent.
   */
  async forgetAll(
    caller: Caller,
    namespace: string,
    options: { all?: boolean } = {},
  ): Promise<{ deleted: number; more: boolean }> {
    checkNamespace(namespace, 'namespace', true);
    if (namespace === '' && options.all !== true) {
      throw new InvalidArgumentError(
        'namespace',
        'must not be empty (set all=true to forget every fact of the tenant)',
      );
    }
    if (this.audit.enabled) return this.forgetAllAudited(caller, namespace);
    const result = await this.store.deleteSubtree(caller.tenant, namespace, {
      now: this.now(),
      budget: FORGET_ALL_BUDGET,
    });
    await this.dropSnapshotsQuietly(caller.tenant, namespace, true);
    return result;
  }

  /**
   * `forgetAll` with the audit trail on (see the comment above the class): the rows are listed,
   * then deleted one by one at the version listed; the first delete is the commit point.
   */
  private async forgetAllAudited(
    caller: Caller,
    namespace: string,
  ): Promise<{ deleted: number; more: boolean }> {
    const { tenant } = caller;
    const page = await this.store.headers(tenant, namespace, { pageSize: FORGET_ALL_BUDGET + 1 });
    const rows = page.headers.slice(0, FORGET_ALL_BUDGET);
    const more = page.headers.length > FORGET_ALL_BUDGET;
    if (rows.length === 0) return { deleted: 0, more };
    const now = this.now();
    const carried = await this.unsettled(tenant, rows);
    if (JSON.stringify(carried).length > MAX_CARRIED_CHARS) throw outboxFull('these facts');
    // A delete that failed may have left its row gone and unlisted in the feed (see relistingOnFailure).
    return this.relistingOnFailure(tenant, rows, async () => {
      let deleted = 0;
      let first: PendingEvent | null = null;
      let next = 0;
      // Until a row is deleted, each attempt names the row it deletes in the marker (its commit
      // point). A row that changed or went meanwhile is not deleted; its marker stays for the repair,
      // which drops it (or finds the event recorded by whoever deleted the row).
      while (first === null && next < rows.length) {
        const row = rows[next++] as FactHeader;
        const incarnation = incarnationOf(row);
        const event = pendingEvent(
          {
            id: forgottenEventId(row.namespace, row.key, incarnation),
            tenant,
            action: 'memory.forgotten',
            ...actorOf(caller),
            subject: JSON.stringify([namespace]),
            outcome: 'ok',
            details: { count: null },
          },
          now,
        );
        await this.audit.begin(tenant, [event], {
          kind: 'memory-forget',
          namespace: row.namespace,
          key: row.key,
          incarnation,
          carried,
        });
        if (await this.deleteRow(tenant, row)) {
          first = event;
          if (!isExpired(row, now)) deleted++;
        }
      }
      if (first === null) return { deleted: 0, more };
      const failures: unknown[] = [];
      // Once the rows are gone (below), so that no snapshot stored before the call keeps their values.
      const dropped = () => this.dropSnapshotsQuietly(tenant, namespace, true);
      await forEachLimited(rows.slice(next), DELETE_WIDTH, async (row) => {
        try {
          if ((await this.deleteRow(tenant, row)) && !isExpired(row, now)) deleted++;
        } catch (error) {
          failures.push(error);
        }
      });
      for (const row of rows) this.versions.delete(versionKeyOf(tenant, row.namespace, row.key));
      await dropped();
      const keepMarkers = carried.length > 0;
      if (failures.length > 0) {
        // Facts were deleted, how many is not known for sure: the record says `count: null`.
        await this.audit.commit(tenant, [first], { keepMarkers });
        throw failures[0];
      }
      await this.audit.commit(tenant, [{ ...first, details: { count: deleted, more } }], { keepMarkers });
      return { deleted, more };
    });
  }

  /**
   * Facts in `namespace` and below. With text: those whose key or value's strings contain a word of
   * it, best first, each with `score` in [0, 1]; without: every fact, newest `updatedAt` first.
   * With a vector: the facts with vectors, closest first (a fact is as close as its closest
   * field's vector), each with `score` in [0, 1], then the facts without vectors, newest first and
   * without `score`. With both: the facts found by either, ranked by reciprocal rank fusion of the
   * two rankings. Ties keep a stable order: newer first, then by namespace and key. The search is
   * exact: every fact read is compared.
   */
  async search(caller: Caller, request: SearchRequest): Promise<SearchResult> {
    checkNamespace(request.namespace, 'namespace', true);
    const limit = request.limit ?? DEFAULT_SEARCH_LIMIT;
    const offset = request.offset ?? 0;
    checkRange('limit', limit, 1, MAX_SEARCH_LIMIT);
    checkRange('offset', offset, 0, MAX_SEARCH_OFFSET);
    const text = request.text ?? '';
    if (Buffer.byteLength(text, 'utf8') > MAX_SEARCH_TEXT_BYTES || !text.isWellFormed()) {
      throw new InvalidArgumentError(
        'text',
        `must be valid Unicode of at most ${MAX_SEARCH_TEXT_BYTES} bytes`,
      );
    }
    const distance = checkDistance(request.distance);
    const queryVector = request.vector === undefined ? null : checkVector(request.vector, 'vector');
    if (queryVector !== null) {
      const dims = await this.indexDims(caller.tenant);
      if (dims !== null && dims !== queryVector.length) {
        throw new InvalidArgumentError('vector', `must have ${dims} dimensions (the tenant's vector index)`);
      }
    }
    const words = text === '' ? null : queryWords(text);
    await this.codec.prepare?.(caller.tenant);
    return this.index.withFactsUnder(caller.tenant, request.namespace, ({ columns, slots, truncated }) => ({
      items: rank(columns, slots, {
        words,
        vector: queryVector,
        distance,
        ...(request.filter === undefined ? {} : { filter: request.filter }),
        now: this.now(),
        offset,
        limit,
      }),
      truncated,
    }));
  }

  /** The dimension count of the tenant's vector index, or null before its first vector. */
  private async indexDims(tenant: string): Promise<number | null> {
    const known = this.indexes.get(tenant);
    if (known !== undefined) return known;
    const index = await this.store.readIndex(tenant);
    if (index !== null) this.indexes.set(tenant, index.dims);
    return index?.dims ?? null;
  }

  /**
   * Throws 400 naming the first vector unless its dimension count is the tenant's; the first
   * vector of a tenant makes its index (create-only: of two first writers, one index holds), unless
   * `create` is false (then a tenant without one passes).
   */
  private async checkIndex(tenant: string, dims: number, vectors: FactVectors, create = true): Promise<void> {
    let indexed = await this.indexDims(tenant);
    if (indexed === null) {
      if (!create) return;
      indexed = (await this.store.createIndex(tenant, { dims })).dims;
      this.indexes.set(tenant, indexed);
    }
    if (indexed !== dims) {
      const [path] = vectors.keys();
      throw new InvalidArgumentError(
        `vectors.${path ?? ''}`,
        `must have ${indexed} dimensions (the tenant's vector index), not ${dims}`,
      );
    }
  }

  /**
   * The distinct namespaces holding a live fact, at or below `prefix`, ending with `suffix` (whole
   * segments), cut to `maxDepth` segments (then distinct again), ordered segment by segment, and
   * paged with `offset`/`limit`.
   */
  async listNamespaces(
    caller: Caller,
    listing: NamespaceListing = {},
  ): Promise<{ namespaces: string[][]; truncated: boolean }> {
    const prefix = listing.prefix ?? '';
    checkNamespace(prefix, 'prefix', true);
    const suffix = checkNamespace(listing.suffix ?? '', 'suffix', true);
    const limit = listing.limit ?? DEFAULT_NAMESPACE_LIMIT;
    const offset = listing.offset ?? 0;
    checkRange('limit', limit, 1, MAX_NAMESPACE_LIMIT);
    checkRange('offset', offset, 0, MAX_LISTED_NAMESPACES);
    if (listing.maxDepth !== undefined) checkRange('maxDepth', listing.maxDepth, 1, MAX_NAMESPACE_SEGMENTS);
    const found = await this.store.namespaces(caller.tenant, prefix, {
      now: this.now(),
      max: MAX_LISTED_NAMESPACES,
    });
    const distinct = new Map<string, string[]>();
    for (const namespace of found.namespaces) {
      if (!isWithin(namespace, prefix)) continue;
      let segments = namespace.split('/');
      if (suffix.length > 0 && !endsWith(segments, suffix)) continue;
      if (listing.maxDepth !== undefined) segments = segments.slice(0, listing.maxDepth);
      distinct.set(segments.join('/'), segments);
    }
    const namespaces = [...distinct.values()].sort(compareNamespaces);
    return { namespaces: namespaces.slice(offset, offset + limit), truncated: !found.complete };
  }

  /**
   * Removes rows expired by now, at most `budget` per call (`more`: call again). For retention;
   * expired facts are already absent from every read before this runs.
   */
  async pruneExpired(tenant: string, budget: number): Promise<{ deleted: number; more: boolean }> {
    checkRange('budget', budget, 1, 100_000);
    const now = this.now();
    const pruned = await this.store.pruneExpired(tenant, {
      now,
      budget,
      // A row carrying events not yet in the audit trail is their proof: it stays until they are.
      ...(this.audit.enabled
        ? { keep: async (row: FactHeader) => (await this.unsettled(tenant, [row])).length > 0 }
        : {}),
    });
    // Snapshots past the age at which a search would use them are only copies of old values. They
    // go after the facts: a snapshot store that fails (a cache) never keeps expired facts stored,
    // and its error still reaches the prune run's report, which tries again on its next run.
    await this.dropAllSnapshots(tenant, now - DEFAULT_MAX_AGE_MS);
    return pruned;
  }

  /**
   * The incarnation of a fact's row and the ids of the audit events its outbox holds (what the
   * audit repair decides by); null when the row is absent.
   */
  async auditOutbox(
    tenant: string,
    namespace: string,
    key: string,
  ): Promise<{ incarnation: string; outbox: string[] } | null> {
    return memoryAuditOutbox(this.store, tenant, namespace, key);
  }

  /**
   * The outbox of a write over `current`: its events not known to be in the trail (the trail is
   * asked once a few pend), and `event`. Refuses (503) when too many pend: the trail is unreachable.
   */
  private async nextOutbox(
    tenant: string,
    current: FactHeader | null,
    event: PendingEvent | null,
  ): Promise<string | null> {
    let kept = parseOutbox(current?.outbox ?? null).filter(
      (pending) => !this.audit.isKnownAppended(pending.id),
    );
    if (this.audit.enabled && kept.length >= OUTBOX_CHECK_AT) {
      kept = await this.notAppended(tenant, kept);
      if (kept.length >= OUTBOX_MAX) throw outboxFull('this fact');
    }
    if (event !== null) kept.push(event);
    if (kept.length === 0) return null;
    const text = JSON.stringify(kept);
    if (text.length > MAX_OUTBOX_CHARS) throw outboxFull('this fact');
    return text;
  }

  /** The outbox events of `rows` that the trail does not hold (none when auditing is off). */
  private async unsettled(tenant: string, rows: readonly FactHeader[]): Promise<PendingEvent[]> {
    if (!this.audit.enabled) return [];
    const events = rows
      .flatMap((row) => parseOutbox(row.outbox))
      .filter((event) => !this.audit.isKnownAppended(event.id));
    return this.notAppended(tenant, events);
  }

  private async notAppended(tenant: string, events: PendingEvent[]): Promise<PendingEvent[]> {
    const appended = new Set<string>();
    await forEachLimited(events, 16, async (event) => {
      if (await this.audit.appended(tenant, event.id)) appended.add(event.id);
    });
    return events.filter((event) => !appended.has(event.id));
  }

  /**
   * Runs `deletes` of `rows`; when it fails, lists the rows in the feed before its error goes on. A
   * delete whose own feed entry failed leaves its row gone and unlisted (on Table Storage, see
   * TableMemoryStore.deleteRow): listed here, unless the storage fails again (that second error is
   * dropped: the caller gets the first). Listing a row that is still there only makes caches read
   * it again.
   */
  private async relistingOnFailure<T>(
    tenant: string,
    rows: readonly FactHeader[],
    deletes: () => Promise<T>,
  ): Promise<T> {
    try {
      return await deletes();
    } catch (error) {
      const ids = rows.map((row) => factId(row.namespace, row.key));
      await this.store.relist(tenant, ids).catch(() => undefined);
      throw error;
    }
  }

  /** Deletes the row at the version given; false when it changed or went meanwhile. */
  private async deleteRow(tenant: string, row: FactHeader): Promise<boolean> {
    try {
      return await this.store.delete(tenant, row.namespace, row.key, row.etag);
    } catch (error) {
      if (error instanceof PreconditionFailedError) return false;
      throw error;
    }
  }

  /** The stored row's write, or null when another write came first (the caller reads again). */
  private async tryWrite(
    tenant: string,
    current: { readonly etag: string } | null,
    fact: FactWrite,
  ): Promise<StoredFact | null> {
    try {
      return await this.store.write(tenant, fact, current?.etag ?? null);
    } catch (error) {
      if (error instanceof PreconditionFailedError) return null;
      throw error;
    }
  }

  /** The value and the vectors' field paths of a stored fact (no vector copied). */
  private open(tenant: string, fact: StoredFact): { value: unknown; fields: string[] } {
    const plain = this.codec.open(fact.value, placeOf(tenant, fact.namespace, fact.key));
    const layout = packedLayout(plain);
    try {
      if (layout === null) throw new Error('damaged');
      return {
        value: JSON.parse(layout.json.toString('utf8')) as unknown,
        fields: [...new Set(layout.vectors.map((vector) => vector.path))],
      };
    } catch {
      throw new IntegrityError('a stored fact is not JSON; it was damaged');
    }
  }
}

/** Where a search snapshot's sealed bytes belong: the tenant's subtree (its digest path). */
export function snapshotPlace(tenant: string, digest: string): ValuePlace {
  return { tenant, kind: 'memory.snapshot', key: digest };
}

/** Where a fact's sealed bytes belong: namespace and key as a JSON pair, which no two facts share. */
export function placeOf(tenant: string, namespace: string, key: string): ValuePlace {
  return { tenant, kind: 'memory.fact', key: JSON.stringify([namespace, key]) };
}

export function isExpired(fact: { readonly expiresAt: number | null }, now: number): boolean {
  return fact.expiresAt !== null && fact.expiresAt <= now;
}

function headerOf(fact: StoredFact): FactHeader {
  return {
    namespace: fact.namespace,
    key: fact.key,
    createdAt: fact.createdAt,
    updatedAt: fact.updatedAt,
    expiresAt: fact.expiresAt,
    incarnation: fact.incarnation,
    outbox: fact.outbox,
    etag: fact.etag,
  };
}

function versionKeyOf(tenant: string, namespace: string, key: string): string {
  return JSON.stringify([tenant, namespace, key]);
}

/** A fact as an audit record's subject: namespace and key as a JSON pair (no two facts share one). */
export function subjectOf(namespace: string, key: string): string {
  return JSON.stringify([namespace, key]);
}

/** The id of the deletion of one incarnation of a fact, whoever deletes it. */
export function forgottenEventId(namespace: string, key: string, incarnation: string): string {
  const digest = createHash('sha256')
    .update(JSON.stringify([namespace, key]), 'utf8')
    .digest('hex');
  return `memory.forgotten:${digest.slice(0, 32)}:${incarnation}`;
}

function newIncarnation(): string {
  return randomBytes(12).toString('hex');
}

/** A row's incarnation; rows stored before incarnations were kept are told apart by `createdAt`. */
function incarnationOf(row: FactHeader): string {
  return row.incarnation ?? `c${row.createdAt}`;
}

function parseOutbox(text: string | null): PendingEvent[] {
  if (text === null) return [];
  try {
    const events = JSON.parse(text) as unknown;
    if (Array.isArray(events)) return events as PendingEvent[];
  } catch {
    // Reported below.
  }
  throw new IntegrityError("a stored fact's audit outbox is damaged");
}

function outboxFull(what: string): StorageUnavailableError {
  return new StorageUnavailableError(
    `audit events of ${what} are not yet in the audit trail; retry once the trail is reachable`,
  );
}

function actorOf(caller: Caller): { actor?: string } {
  return caller.actor === undefined ? {} : { actor: caller.actor };
}

function itemOf(fact: StoredFact, value: unknown, fields: readonly string[]): MemoryItem {
  return {
    namespace: fact.namespace.split('/'),
    key: fact.key,
    value,
    ...(fields.length === 0 ? {} : { vectorFields: [...fields] }),
    createdAt: fact.createdAt,
    updatedAt: fact.updatedAt,
    ...(fact.expiresAt === null ? {} : { expiresAt: fact.expiresAt }),
    etag: fact.etag,
  };
}

/** A remember checked and sealed, before its version is known. */
interface PreparedWrite {
  readonly namespace: string;
  readonly key: string;
  readonly sealed: Buffer;
  /** The value as the answer gives it back. */
  readonly parsed: unknown;
  readonly vectors: FactVectors;
  /** The vectors' dimension count; null without vectors. */
  readonly dims: number | null;
  readonly ttl: number | undefined;
  readonly conditions: WriteConditions;
  readonly versionKey: string;
}

/** The row a remember writes over `current` (null: none), with `outbox`. */
function planWrite(
  write: PreparedWrite,
  current: FactHeader | null,
  live: FactHeader | null,
  now: number,
  outbox: string | null,
): FactWrite {
  return {
    namespace: write.namespace,
    key: write.key,
    value: write.sealed,
    createdAt: live?.createdAt ?? now,
    // Strictly increasing per row, also when the clock has not moved (or moved back).
    updatedAt: current === null ? now : Math.max(now, current.updatedAt + 1),
    expiresAt: write.ttl === undefined ? null : now + write.ttl * 1000,
    incarnation: current === null ? newIncarnation() : incarnationOf(current),
    outbox,
  };
}

/**
 * Writes cut into what one `writeMany` takes: at most its count and bytes, and no fact twice (a
 * later write of the same fact goes in a later call, after the earlier one).
 */
function chunksOf<T extends { write: PreparedWrite }>(entries: readonly T[]): T[][] {
  const chunks: T[][] = [];
  let chunk: T[] = [];
  let bytes = 0;
  let keys = new Set<string>();
  for (const entry of entries) {
    const size = entry.write.sealed.length;
    if (
      chunk.length >= MAX_WRITES_PER_CALL ||
      (chunk.length > 0 && bytes + size > MAX_WRITE_BYTES_PER_CALL) ||
      keys.has(entry.write.versionKey)
    ) {
      chunks.push(chunk);
      chunk = [];
      bytes = 0;
      keys = new Set();
    }
    chunk.push(entry);
    bytes += size;
    keys.add(entry.write.versionKey);
  }
  if (chunk.length > 0) chunks.push(chunk);
  return chunks;
}

function checkDistance(distance: string | undefined): Distance {
  if (distance === undefined) return 'cosine';
  if (!(DISTANCES as readonly string[]).includes(distance)) {
    throw new InvalidArgumentError('distance', `must be one of ${DISTANCES.join(', ')}`);
  }
  return distance as Distance;
}

function checkWriteConditions(conditions: WriteConditions, live: FactHeader | null): void {
  if (conditions.ifAbsent === true && live !== null) {
    throw new PreconditionFailedError('the fact exists', live.etag);
  }
  if (conditions.ifMatch === undefined) return;
  if (live === null) throw new PreconditionFailedError('the fact does not exist');
  if (conditions.ifMatch !== '*' && conditions.ifMatch !== live.etag) {
    throw new PreconditionFailedError('the fact has changed', live.etag);
  }
}

function checkRange(field: string, value: number, min: number, max: number): void {
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new InvalidArgumentError(field, `must be a whole number from ${min} to ${max}`);
  }
}

function endsWith(segments: readonly string[], suffix: readonly string[]): boolean {
  if (suffix.length > segments.length) return false;
  const start = segments.length - suffix.length;
  return suffix.every((segment, i) => segments[start + i] === segment);
}

/** The incarnation of a fact's row and the ids of the audit events its outbox holds; null when absent. */
async function memoryAuditOutbox(
  store: MemoryStore,
  tenant: string,
  namespace: string,
  key: string,
): Promise<{ incarnation: string; outbox: string[] } | null> {
  const row = await store.get(tenant, namespace, key);
  if (row === null) return null;
  return { incarnation: incarnationOf(row), outbox: parseOutbox(row.outbox).map((event) => event.id) };
}

/**
 * Memory's part of the audit trail's repair (see audit/pending.ts), reading the fact's row in
 * `store`: a write (`memory`) committed when the row carries the event in its outbox; a deletion
 * (`memory-forget`) when the row of its incarnation is gone.
 */
export function memoryRepairCheck(store: MemoryStore): RepairCheck {
  return {
    kinds: ['memory', 'memory-forget'],
    fateOf: async (tenant, event, check, trail) => {
      const namespace = String(check['namespace']);
      const key = String(check['key']);
      if (check.kind === 'memory-forget') {
        const fact = await memoryAuditOutbox(store, tenant, namespace, key);
        return fact === null || fact.incarnation !== check['incarnation'] ? 'committed' : 'not-committed';
      }
      if (await trail.appended(tenant, event.id)) return 'committed';
      // Not in the row's outbox: the write did not land, or its row was deleted since, and the
      // deletion's marker carries the event (it appends it); only events known to be in the
      // trail ever leave an outbox otherwise.
      const fact = await memoryAuditOutbox(store, tenant, namespace, key);
      return fact !== null && fact.outbox.includes(event.id) ? 'committed' : 'not-committed';
    },
  };
}
