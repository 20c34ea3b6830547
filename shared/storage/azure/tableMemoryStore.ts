import { randomBytes, randomUUID } from 'node:crypto';

import {
  odata,
  type TableClient,
  type TableEntityResult,
  type TableTransactionEntityResponse,
  type TransactionAction,
} from '@azure/data-tables';

import { lru } from '../../lru';
import { factId, namespaceDigest } from '../../memory/layout';
import type {
  FactHeader,
  FactHeaderPage,
  FactPage,
  FactWrite,
  FeedChanges,
  MemoryIndex,
  MemoryStore,
  StoredFact,
  SubtreeDeletion,
} from '../../memory/memoryStore';
import { writeEachAlone } from '../../memory/memoryStore';
import { InternalError, PreconditionFailedError, StorageUnavailableError } from '../../protocol/errors';
import { forEachLimited } from '../../protocol/pool';
import { casPause } from '../../retry';
import { KeyedMutex } from '../keyedMutex';
import {
  CONDITIONAL_WRITE_TRIES,
  isAzureError,
  isNotFound,
  mayHaveLanded,
  storageCall,
  writeNotConfirmed,
} from './azureErrors';
import { tableWithoutRetries } from './clients';
import { TableRows } from './tableRows';

/** How long one namespace listing may scan before it answers what it found as incomplete. */
const NAMESPACE_SCAN_BUDGET_MS = 4000;

/**
 * Memory facts on Azure Table Storage (Azurite locally), in one table:
 *
 * - PartitionKey: the tenant id (`[A-Za-z0-9._-]`, legal in keys). One partition per tenant, so
 *   every query of a tenant stays in its partition and tenants never share one.
 * - RowKey: `<digest path of the namespace>-<digest of the key>` (see shared/memory/layout.ts):
 *   the facts of `users` and of every namespace below it are exactly the rows whose RowKey starts
 *   with `D(users)`, one range query `RowKey ge D(users) and RowKey lt succ(D(users))`. A
 *   namespace's own facts (`D(ns)-…`) sort before its children (`D(ns)<hex>…`), since `-` sorts
 *   before every hex digit.
 * - Properties: `ns` and `key` (the names, checked on every read), `value` (Edm.Binary, the
 *   sealed value, at most 32 KiB plus the codec's overhead: under the 64 KiB property limit),
 *   `createdAt`, `updatedAt` and, for facts with a time to live, `expiresAt` (Edm.Int64, Unix ms);
 *   `inc` (the row's incarnation) and, while it holds audit events, `outbox` (strings, the latter
 *   at most 24 Ki characters: under the property limit of 32 Ki UTF-16 characters).
 *
 * - A value longer than {@link VALUE_CHUNK_BYTES} (a fact with vectors) continues in `value1`,
 *   `value2`, … (each under the 64 KiB property limit; an entity holds at most 1 MiB).
 * - A tenant's vector index is the row `PartitionKey` {@link INDEX_PARTITION}, `RowKey` the tenant
 *   (`dims`, Int32): no tenant id starts with `~`, so no tenant's queries meet it.
 *
 * - The tenant's change feed lives in its partition too, after every fact (`~` sorts after the
 *   digests, and every query of facts stops before `~`), in {@link FEED_SHARDS} shards: shard k
 *   has a head `~head-k` (`epoch`, a random id given when the head is created, and `seq`, the
 *   number of its changes) and a ring of {@link FEED_SLOTS} rows `~ring-k-000` … (`seq` and
 *   `ids`, the RowKeys that change changed, comma-separated, continued in `ids1`, … past 30,000
 *   characters). Every change of facts is one entity group transaction: the fact operations, the
 *   head of a shard replaced on the etag this instance knows (a compare-and-swap: of two writers
 *   on one shard one moves it, the other reads it again and retries), and the slot of its new
 *   `seq` upserted. So the feed and the facts never disagree, even after a crash (the one
 *   exception: a delete at a version, see `deleteRow`). A reader reads the 16 heads in one query;
 *   a shard whose `seq` moved from n to m has the ids of changes n+1..m in its ring.
 *
 * Writes are create-only inserts or replacements on the etag read, in that transaction. Every
 * conditional write (the transactions, a delete at a version) is sent without the SDK's retries
 * (`tableWithoutRetries`): a retry of one whose first try landed would meet 409 or 412 because of
 * it, and read as another writer's. Each transaction carries a random id (`wid`) in its fact rows,
 * its head and its slot; after an answer that leaves it uncertain (none, a timeout, throttling, a
 * 5xx) the slot is read: it carries the id -> the transaction landed (the fact rows' etags are
 * read back); else the head is still the one it was conditioned on -> it did not land and is tried
 * again ({@link CONDITIONAL_WRITE_TRIES} tries in all); anything else -> StorageUnavailableError,
 * since it may have landed. A 409 or 412 is thus always another writer's doing. The
 * API's ETag is the table's ETag, quoted and base64url-encoded (the table's own contains quotes).
 * Deletions of a subtree go in transactions of up to 98 unconditional deletes (with the two feed
 * rows). The table is created on first write; reads of a table that does not exist yet answer
 * absent or empty.
 */
export class TableMemoryStore implements MemoryStore {
  private tableReady: Promise<void> | undefined;
  /** The feed head of each tenant as this instance last wrote or read it (a hint: a stale one costs a retry). */
  private readonly heads = lru<string, FeedHead>(10_000);
  /** This instance's writers of a tenant take turns, so they do not race each other for the head. */
  private readonly feedTurns = new KeyedMutex();
  /** The shard of this instance's next change (starting anywhere, so instances spread). */
  private nextShard = Math.floor(Math.random() * FEED_SHARDS);
  /** Single rows read as they are (a missing row or table: null). */
  private readonly rows: TableRows;

  constructor(
    private readonly table: TableClient,
    private readonly timeoutMs: number,
    /** The same table without the SDK's retries, for conditional writes (see `tableWithoutRetries`). */
    private readonly writer: TableClient = tableWithoutRetries(table),
  ) {
    this.rows = new TableRows(table);
  }

  async readIndex(tenant: string): Promise<MemoryIndex | null> {
    return this.call(async (abortSignal) => {
      try {
        const entity = await this.table.getEntity<Record<string, unknown>>(INDEX_PARTITION, tenant, {
          abortSignal,
        });
        return indexOf(entity);
      } catch (error) {
        if (isNotFound(error)) return null;
        throw error;
      }
    });
  }

  async createIndex(tenant: string, index: MemoryIndex): Promise<MemoryIndex> {
    const entity = { partitionKey: INDEX_PARTITION, rowKey: tenant, dims: index.dims };
    const created = await this.call(async (abortSignal) => {
      for (let attempt = 0; ; attempt++) {
        try {
          await this.table.createEntity(entity, { abortSignal });
          return true;
        } catch (error) {
          if (isAzureError(error, 409, 'EntityAlreadyExists')) return false;
          if (isNotFound(error) && attempt === 0) {
            await this.createTable(abortSignal);
            continue;
          }
          throw error;
        }
      }
    });
    if (created) return { dims: index.dims };
    const existing = await this.readIndex(tenant);
    if (existing === null) throw new InternalError("the tenant's memory index went while it was read");
    return existing;
  }

  async get(tenant: string, namespace: string, key: string): Promise<StoredFact | null> {
    return this.call(async (abortSignal) => {
      try {
        const entity = await this.table.getEntity<Record<string, unknown>>(tenant, rowKeyOf(namespace, key), {
          abortSignal,
        });
        return factOf(entity, namespace, key);
      } catch (error) {
        if (isNotFound(error)) return null;
        throw error;
      }
    });
  }

  async write(tenant: string, fact: FactWrite, ifEtag: string | null): Promise<StoredFact> {
    const entity = entityOf(tenant, fact);
    const action: TransactionAction =
      ifEtag === null ? ['create', entity] : ['update', entity, 'Replace', { etag: tableEtag(ifEtag) }];
    return this.call(async (abortSignal) => {
      try {
        const [written] = await this.transact(tenant, [action], [entity.rowKey], abortSignal);
        return { ...fact, etag: apiEtag(written?.etag) };
      } catch (error) {
        if (isAzureError(error, 409, 'EntityAlreadyExists')) {
          throw new PreconditionFailedError('the fact exists');
        }
        if (isAzureError(error, 412) || isNotFound(error)) {
          throw new PreconditionFailedError('the fact has changed');
        }
        throw error;
      }
    });
  }

  async writeMany(
    tenant: string,
    writes: readonly { fact: FactWrite; ifEtag: string | null }[],
  ): Promise<(StoredFact | null)[]> {
    if (writes.length === 0) return [];
    const entities = writes.map(({ fact }) => entityOf(tenant, fact));
    const actions: TransactionAction[] = writes.map(({ ifEtag }, i) => {
      const entity = entities[i] as ReturnType<typeof entityOf>;
      return ifEtag === null
        ? ['create', entity]
        : ['update', entity, 'Replace', { etag: tableEtag(ifEtag) }];
    });
    const written = await this.call(async (abortSignal) => {
      try {
        return await this.transact(
          tenant,
          actions,
          entities.map((entity) => entity.rowKey),
          abortSignal,
        );
      } catch (error) {
        if (isAzureError(error, 409) || isAzureError(error, 412) || isNotFound(error)) return null;
        throw error;
      }
    });
    if (written !== null) return writes.map(({ fact }, i) => ({ ...fact, etag: apiEtag(written[i]?.etag) }));
    // Some condition did not hold (the transaction wrote nothing): each on its own.
    return writeEachAlone(this, tenant, writes);
  }

  async delete(tenant: string, namespace: string, key: string, ifEtag?: string): Promise<boolean> {
    return this.call(async (abortSignal) => {
      // The SDK's default is "*" (unconditional); a given version is always passed on.
      const outcome = await this.deleteRow(
        tenant,
        factId(namespace, key),
        ifEtag === undefined ? '*' : tableEtag(ifEtag),
        abortSignal,
      );
      if (outcome === 'changed') throw new PreconditionFailedError('the fact has changed');
      return outcome === 'deleted';
    });
  }

  async relist(tenant: string, ids: readonly string[]): Promise<void> {
    await this.call(async (abortSignal) => {
      for (let i = 0; i < ids.length; i += DELETES_PER_TRANSACTION) {
        await this.transact(tenant, [], ids.slice(i, i + DELETES_PER_TRANSACTION), abortSignal);
      }
    });
  }

  /**
   * Deletes one row at `etag` (`*`: any) and lists it in the feed: an unconditional delete in one
   * transaction with the feed; a conditional one (which the SDK's transactions cannot send) first,
   * then the feed's entry. When that entry fails (a fault, a deadline, or a shard head too busy),
   * the row is gone and unlisted: the call throws StorageUnavailableError, never "absent" or
   * "changed", and the domain lists it (`relist`): the failed forget at once, else the next forget
   * of the fact, a retry included. A process stopped between the two leaves it unlisted until
   * then, or until caches read the subtree afresh (searchIndex.ts).
   */
  private async deleteRow(
    tenant: string,
    rowKey: string,
    etag: string,
    abortSignal: AbortSignal,
  ): Promise<'deleted' | 'absent' | 'changed'> {
    try {
      if (etag === '*') {
        await this.transact(tenant, [['delete', { partitionKey: tenant, rowKey }]], [rowKey], abortSignal);
      } else {
        await this.deleteVersion(tenant, rowKey, etag, abortSignal);
      }
    } catch (error) {
      if (isNotFound(error)) return 'absent';
      if (isAzureError(error, 412)) return 'changed';
      throw error;
    }
    if (etag === '*') return 'deleted';
    try {
      await this.transact(tenant, [], [rowKey], abortSignal);
    } catch (error) {
      throw new StorageUnavailableError('the fact was deleted, but the change could not be listed; retry', {
        cause: error,
      });
    }
    return 'deleted';
  }

  /**
   * A delete of the row at `etag`, without the SDK's retries. After an answer that leaves it
   * uncertain it is tried again only while the row is still that version; else (the row is gone
   * or changed: perhaps by this very delete) the row is listed in the feed (listing a row that did
   * not change costs a reader one read) and the delete is unknown: StorageUnavailableError.
   */
  private async deleteVersion(
    tenant: string,
    rowKey: string,
    etag: string,
    abortSignal: AbortSignal,
  ): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      await casPause(attempt, abortSignal);
      try {
        await this.writer.deleteEntity(tenant, rowKey, { etag, abortSignal });
        return;
      } catch (error) {
        // A 404 or 412 after a try that may have landed may be this delete's own doing.
        if (attempt === 0 && !mayHaveLanded(error)) throw error;
        if (
          abortSignal.aborted ||
          isDeadline(error) ||
          !mayHaveLanded(error) ||
          attempt + 1 >= CONDITIONAL_WRITE_TRIES
        ) {
          throw writeNotConfirmed(error);
        }
        const now = await this.rows.get(tenant, rowKey, abortSignal);
        if (now?.etag !== etag) {
          await this.transact(tenant, [], [rowKey], abortSignal).catch(() => undefined);
          throw writeNotConfirmed(error);
        }
      }
    }
  }

  /**
   * Runs `actions` (on fact rows of the tenant) in one transaction with the feed's next change,
   * which lists `ids`; answers the sub-responses of `actions`. When the head moved meanwhile (its
   * etag is not the one this instance knew), reads it again and retries; any other failure is
   * thrown as the table answered it (one of `actions` failed: the caller says what that means).
   */
  private async transact(
    tenant: string,
    actions: TransactionAction[],
    ids: readonly string[],
    abortSignal: AbortSignal,
  ): Promise<TableTransactionEntityResponse[]> {
    // Each change goes to one shard of the feed, the next in turn: writers of one instance take
    // turns per shard, and writers of several instances rarely meet on one.
    const shard = this.nextShard;
    this.nextShard = (shard + 1) % FEED_SHARDS;
    const turn = `${tenant}\n${shard}`;
    return this.feedTurns.run(turn, async () => {
      let uncertain = 0;
      for (let attempt = 0; ; attempt++) {
        await casPause(attempt, abortSignal);
        const head = this.heads.get(turn) ?? (await this.readHead(tenant, shard, abortSignal));
        // This transaction's id, in each row it writes: what tells it apart when its answer is lost.
        const wid = randomUUID();
        const next = { epoch: head.etag === null ? newEpoch() : head.epoch, seq: head.seq + 1 };
        const headRow = {
          partitionKey: tenant,
          rowKey: headKeyOf(shard),
          epoch: next.epoch,
          seq: int64(next.seq),
          wid,
        };
        const slotRow = {
          partitionKey: tenant,
          rowKey: slotKeyOf(shard, next.seq),
          seq: int64(next.seq),
          ...idProperties(ids),
          wid,
        };
        const feed: TransactionAction[] = [
          head.etag === null ? ['create', headRow] : ['update', headRow, 'Replace', { etag: head.etag }],
          // Replace, not merge: the ids of the slot's earlier change go.
          ['upsert', slotRow, 'Replace'],
        ];
        const ours = actions.map((action) => withWriteId(action, wid));
        try {
          const { subResponses } = await this.writer.submitTransaction([...ours, ...feed], { abortSignal });
          const headEtag = subResponses[actions.length]?.etag;
          if (headEtag === undefined) this.heads.delete(turn);
          else this.heads.set(turn, { ...next, etag: headEtag });
          return subResponses.slice(0, actions.length);
        } catch (error) {
          this.heads.delete(turn);
          if (mayHaveLanded(error)) {
            if (abortSignal.aborted || isDeadline(error)) throw writeNotConfirmed(error);
            const landed = await this.settle(tenant, shard, head, next.seq, wid, ours, error, abortSignal);
            if (landed !== null) return landed;
            // Certainly not written: tried again, as the SDK would have.
            if (++uncertain >= CONDITIONAL_WRITE_TRIES) throw error;
            continue;
          }
          if (isAzureError(error, 404, 'TableNotFound') && attempt === 0) {
            await this.createTable(abortSignal);
            continue;
          }
          const conflict = isNotFound(error) || isAzureError(error, 409) || isAzureError(error, 412);
          if (!conflict || attempt >= FEED_ATTEMPTS) throw error;
          const fresh = await this.readHead(tenant, shard, abortSignal);
          if (fresh.etag !== null) this.heads.set(turn, fresh);
          // The head is where it was: the failure was one of `actions`.
          if (fresh.etag === head.etag) throw error;
        }
      }
    });
  }

  /**
   * Whether the transaction `wid` (the change `seq` of `shard`, conditioned on `head`), whose
   * answer was lost, landed: its sub-responses of `actions` when it did (the fact rows' etags read
   * back), null when it certainly did not (the head is still `head`). When that cannot be told
   * (the slot was written again, a fact row was replaced since), StorageUnavailableError.
   */
  private async settle(
    tenant: string,
    shard: number,
    head: FeedHead,
    seq: number,
    wid: string,
    actions: readonly TransactionAction[],
    cause: unknown,
    abortSignal: AbortSignal,
  ): Promise<TableTransactionEntityResponse[] | null> {
    const slot = await this.rows.get(tenant, slotKeyOf(shard, seq), abortSignal);
    if (slot?.['wid'] !== wid) {
      const fresh = await this.readHead(tenant, shard, abortSignal);
      if (fresh.etag === head.etag) return null;
      throw writeNotConfirmed(cause);
    }
    const responses: TableTransactionEntityResponse[] = [];
    for (const [kind, { rowKey }] of actions) {
      if (kind === 'delete') {
        responses.push({ status: 204, rowKey });
        continue;
      }
      const row = await this.rows.get(tenant, rowKey, abortSignal);
      // Written, and written again since: its version is not ours to hand out.
      if (row?.['wid'] !== wid) throw writeNotConfirmed(cause);
      responses.push({ status: 204, rowKey, etag: row.etag });
    }
    return responses;
  }

  /** One shard's feed head; a shard that never changed has none (`seq` 0, no etag). */
  private async readHead(tenant: string, shard: number, abortSignal: AbortSignal): Promise<FeedHead> {
    try {
      const entity = await this.table.getEntity<Record<string, unknown>>(tenant, headKeyOf(shard), {
        abortSignal,
      });
      return headOf(entity);
    } catch (error) {
      if (isNotFound(error)) return NO_HEAD;
      throw error;
    }
  }

  async changes(tenant: string, since: string | null): Promise<FeedChanges> {
    return this.call(async (abortSignal) => {
      const heads = new Array<FeedHead>(FEED_SHARDS).fill(NO_HEAD);
      try {
        // Every shard's head in one query (they sort together, before the rings).
        const entities = this.table.listEntities<Record<string, unknown>>({
          queryOptions: {
            filter: odata`PartitionKey eq ${tenant} and RowKey ge ${headKeyOf(0)} and RowKey le ${headKeyOf(FEED_SHARDS - 1)}`,
          },
          abortSignal,
        });
        for await (const entity of entities) {
          const shard = HEAD_KEYS.indexOf(String(entity.rowKey));
          if (shard >= 0) heads[shard] = headOf(entity);
        }
      } catch (error) {
        if (!isNotFound(error)) throw error;
      }
      const position = heads.map((head) => `${head.epoch}:${head.seq}`).join(',');
      if (since === position) return { position, ids: [] };
      const from = since === null ? [] : since.split(',').map(parsePosition);
      if (from.length !== FEED_SHARDS) return { position, ids: null };
      const ids = new Set<string>();
      let known = true;
      await forEachLimited([...heads.entries()], FEED_SHARDS, async ([shard, head]) => {
        const start = from[shard];
        // A shard without a head then (epoch "", 0 changes) has every change since in its ring.
        const fresh = start?.epoch === '' && start.seq === 0;
        if (
          start === null ||
          start === undefined ||
          (!fresh && start.epoch !== head.epoch) ||
          start.seq > head.seq
        ) {
          known = false;
          return;
        }
        if (start.seq === head.seq) return;
        const found = await this.ring(tenant, shard, start.seq + 1, head.seq, abortSignal);
        if (found === null) known = false;
        else for (const id of found) ids.add(id);
      });
      return { position, ids: known ? [...ids] : null };
    });
  }

  /** The ids of changes `first`..`last` of one shard; null when the ring no longer holds them all. */
  private async ring(
    tenant: string,
    shard: number,
    first: number,
    last: number,
    abortSignal: AbortSignal,
  ): Promise<string[] | null> {
    if (last - first + 1 > FEED_SLOTS) return null;
    const low = slotKeyOf(shard, first);
    const high = slotKeyOf(shard, last);
    const range = (a: string, b: string) => odata`(RowKey ge ${a} and RowKey le ${b})`;
    const ranges =
      low <= high
        ? range(low, high)
        : `(${range(low, slotKeyOf(shard, FEED_SLOTS - 1))} or ${range(slotKeyOf(shard, 0), high)})`;
    const seen = new Set<number>();
    const ids: string[] = [];
    const entities = this.table.listEntities<Record<string, unknown>>({
      queryOptions: { filter: `${odata`PartitionKey eq ${tenant}`} and ${ranges}` },
      abortSignal,
    });
    for await (const entity of entities) {
      const seq = optionalNumber(entity['seq']) ?? 0;
      if (seq < first || seq > last) continue;
      seen.add(seq);
      ids.push(...idsOf(entity));
    }
    // A slot written over by a later change lost its ids: the reader reads afresh.
    return seen.size === last - first + 1 ? ids : null;
  }

  async fetch(tenant: string, ids: readonly string[]): Promise<Map<string, StoredFact>> {
    const found = new Map<string, StoredFact>();
    await forEachLimited(ids, FETCH_WIDTH, async (id) => {
      const fact = await this.call(async (abortSignal) => {
        try {
          return factOf(await this.table.getEntity<Record<string, unknown>>(tenant, id, { abortSignal }));
        } catch (error) {
          if (isNotFound(error)) return null;
          throw error;
        }
      });
      if (fact !== null) found.set(id, fact);
    });
    return found;
  }

  async scan(
    tenant: string,
    namespace: string,
    options: { cursor?: string; pageSize: number; part?: number },
  ): Promise<FactPage> {
    const page = await this.page(tenant, namespace, options, FACT_COLUMNS, (entity) => factOf(entity));
    return { facts: page.items, cursor: page.cursor };
  }

  async headers(
    tenant: string,
    namespace: string,
    options: { cursor?: string; pageSize: number },
  ): Promise<FactHeaderPage> {
    const page = await this.page(tenant, namespace, options, HEADER_COLUMNS, (entity) => headerOf(entity));
    return { headers: page.items, cursor: page.cursor };
  }

  /** One page of the rows of `namespace` and below, in RowKey order, each made into a `T`. */
  private async page<T>(
    tenant: string,
    namespace: string,
    options: { cursor?: string; pageSize: number; part?: number },
    select: string[] | undefined,
    make: (entity: TableEntityResult<Record<string, unknown>>) => T,
  ): Promise<{ items: T[]; cursor: string | null }> {
    return this.call(async (abortSignal) => {
      const items: T[] = [];
      const filter = rangeFilter(tenant, namespace, options.cursor, options.part);
      let last: string | undefined;
      try {
        const entities = this.table.listEntities<Record<string, unknown>>({
          queryOptions: { filter, ...(select === undefined ? {} : { select }) },
          abortSignal,
        });
        for await (const page of entities.byPage({ maxPageSize: Math.min(1000, options.pageSize) })) {
          for (const entity of page) {
            items.push(make(entity));
            last = String(entity.rowKey);
            if (items.length >= options.pageSize) break;
          }
          if (items.length >= options.pageSize) break;
        }
      } catch (error) {
        if (!isNotFound(error)) throw error;
      }
      return { items, cursor: items.length >= options.pageSize && last !== undefined ? last : null };
    });
  }

  async namespaces(
    tenant: string,
    prefix: string,
    options: { now: number; max: number },
  ): Promise<{ namespaces: string[]; complete: boolean }> {
    const found: string[] = [];
    const end = prefix === '' ? FEED_START : successor(namespaceDigest(prefix));
    let from = namespaceDigest(prefix);
    const started = performance.now();
    // A skip scan: the first live row at or after `from` names a namespace; the next seek starts
    // past that namespace's own rows (at its children), so each namespace costs one query however
    // many facts it holds. Each seek has the storage deadline of its own, and the scan stops (as
    // incomplete) once it has used NAMESPACE_SCAN_BUDGET_MS, so a tenant with many namespaces gets
    // a partial answer, never a 503 for a deadline the whole scan could not meet.
    while (found.length < options.max && performance.now() - started < NAMESPACE_SCAN_BUDGET_MS) {
      const next = await this.call((abortSignal) =>
        this.seekNamespace(tenant, from, end, options.now, abortSignal),
      );
      if (next === null) return { namespaces: found, complete: true };
      found.push(next);
      from = `${namespaceDigest(next)}.`;
    }
    return { namespaces: found, complete: false };
  }

  /** The namespace of the first live fact at or after `from` (before `end`), or null. */
  private async seekNamespace(
    tenant: string,
    from: string,
    end: string | undefined,
    now: number,
    abortSignal: AbortSignal,
  ): Promise<string | null> {
    const filter =
      end === undefined
        ? odata`PartitionKey eq ${tenant} and RowKey ge ${from}`
        : odata`PartitionKey eq ${tenant} and RowKey ge ${from} and RowKey lt ${end}`;
    try {
      const entities = this.table.listEntities<Record<string, unknown>>({
        queryOptions: { filter, select: ['RowKey', 'ns', 'expiresAt'] },
        abortSignal,
      });
      for await (const page of entities.byPage({ maxPageSize: 100 })) {
        for (const entity of page) {
          const expiresAt = optionalNumber(entity['expiresAt']);
          if (expiresAt !== null && expiresAt <= now) continue;
          return String(entity['ns']);
        }
      }
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
    return null;
  }

  async deleteSubtree(
    tenant: string,
    namespace: string,
    options: { now: number; budget: number },
  ): Promise<SubtreeDeletion> {
    return this.call(async (abortSignal) => {
      const rows = await this.listRows(rangeFilter(tenant, namespace), options.budget + 1, abortSignal);
      const more = rows.length > options.budget;
      const doomed = rows.slice(0, options.budget);
      for (let i = 0; i < doomed.length; i += DELETES_PER_TRANSACTION) {
        await this.deleteAll(tenant, doomed.slice(i, i + DELETES_PER_TRANSACTION), abortSignal);
      }
      const deleted = doomed.filter((row) => row.expiresAt === null || row.expiresAt > options.now).length;
      return { deleted, more };
    });
  }

  async pruneExpired(
    tenant: string,
    options: { now: number; budget: number; keep?: (row: FactHeader) => Promise<boolean> },
  ): Promise<SubtreeDeletion> {
    return this.call(async (abortSignal) => {
      const filter = `${odata`PartitionKey eq ${tenant} and RowKey lt ${FEED_START}`} and expiresAt le ${Math.floor(options.now)}L`;
      let deleted = 0;
      try {
        const entities = this.table.listEntities<Record<string, unknown>>({
          queryOptions: { filter, select: HEADER_COLUMNS },
          abortSignal,
        });
        for await (const page of entities.byPage({ maxPageSize: Math.min(1000, options.budget + 1) })) {
          for (const entity of page) {
            const row = headerOf(entity);
            if (options.keep !== undefined && (await options.keep(row))) continue;
            if (deleted >= options.budget) return { deleted, more: true };
            // On the version found: a fact written again since then is not expired any more.
            if (
              (await this.deleteRow(tenant, String(entity.rowKey), entity.etag, abortSignal)) === 'deleted'
            ) {
              deleted++;
            }
          }
        }
      } catch (error) {
        if (!isNotFound(error)) throw error;
      }
      return { deleted, more: false };
    });
  }

  /** RowKey, etag and expiry of up to `max` rows matching `filter`. */
  private async listRows(
    filter: string,
    max: number,
    abortSignal: AbortSignal,
  ): Promise<{ rowKey: string; etag: string; expiresAt: number | null }[]> {
    const rows: { rowKey: string; etag: string; expiresAt: number | null }[] = [];
    try {
      const entities = this.table.listEntities<Record<string, unknown>>({
        queryOptions: { filter, select: ['RowKey', 'expiresAt'] },
        abortSignal,
      });
      for await (const page of entities.byPage({ maxPageSize: Math.min(1000, max) })) {
        for (const entity of page) {
          rows.push({
            rowKey: String(entity.rowKey),
            etag: entity.etag,
            expiresAt: optionalNumber(entity['expiresAt']),
          });
          if (rows.length >= max) return rows;
        }
      }
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
    return rows;
  }

  /** Deletes the rows in one transaction; when it fails (a row already gone), one by one. */
  private async deleteAll(
    tenant: string,
    rows: readonly { rowKey: string }[],
    abortSignal: AbortSignal,
  ): Promise<void> {
    if (rows.length === 0) return;
    const actions: TransactionAction[] = rows.map((row) => [
      'delete',
      { partitionKey: tenant, rowKey: row.rowKey },
    ]);
    try {
      await this.transact(
        tenant,
        actions,
        rows.map((row) => row.rowKey),
        abortSignal,
      );
      return;
    } catch (error) {
      if (!isNotFound(error) && !isAzureError(error, 400) && !isAzureError(error, 409)) throw error;
    }
    for (const row of rows) await this.deleteRow(tenant, row.rowKey, '*', abortSignal);
  }

  private async createTable(abortSignal: AbortSignal): Promise<void> {
    this.tableReady ??= this.table.createTable({ abortSignal }).finally(() => {
      this.tableReady = undefined;
    });
    await this.tableReady;
  }

  private call<T>(operation: (abortSignal: AbortSignal) => Promise<T>): Promise<T> {
    return storageCall(this.timeoutMs, operation);
  }
}

/** The action with the transaction's id in the row it writes (a delete writes none). */
function withWriteId(action: TransactionAction, wid: string): TransactionAction {
  if (action[0] === 'delete') return action;
  const [kind, entity, ...rest] = action;
  return [kind, { ...entity, wid }, ...rest] as TransactionAction;
}

/** The operation's deadline (see `storageCall`): no time is left to settle the write. */
function isDeadline(error: unknown): boolean {
  const name = (error as { name?: unknown } | null)?.name;
  return name === 'TimeoutError' || name === 'AbortError';
}

/** Deletes per transaction: a transaction holds at most 100 operations, two of them the feed's. */
const DELETES_PER_TRANSACTION = 98;
/** The feed's rows start with this; every fact's RowKey sorts before it (digits, letters and `-`). */
const FEED_START = '~';
/** Shards of the feed: each its own head and ring, so that writers rarely wait for one another. */
export const FEED_SHARDS = 16;
/** Changes each shard remembers the ids of; a reader further behind reads afresh. */
export const FEED_SLOTS = 128;
const HEAD_KEYS = Array.from({ length: FEED_SHARDS }, (_, shard) => headKeyOf(shard));
const NO_HEAD: FeedHead = { epoch: '', seq: 0, etag: null };

function headKeyOf(shard: number): string {
  return `~head-${String(shard).padStart(2, '0')}`;
}

function headOf(entity: TableEntityResult<Record<string, unknown>>): FeedHead {
  return { epoch: String(entity['epoch']), seq: optionalNumber(entity['seq']) ?? 0, etag: entity.etag };
}
/** Tries of one change when other writers keep moving the head. */
const FEED_ATTEMPTS = 16;
/** Rows `fetch` reads at once. */
const FETCH_WIDTH = 16;
/** Characters of ids per property (the limit is 32 Ki UTF-16 characters). */
const IDS_CHUNK_CHARS = 30_000;

interface FeedHead {
  readonly epoch: string;
  readonly seq: number;
  /** Null while the tenant has no head row. */
  readonly etag: string | null;
}

function newEpoch(): string {
  return randomBytes(9).toString('base64url');
}

function slotKeyOf(shard: number, seq: number): string {
  return `~ring-${String(shard).padStart(2, '0')}-${String(seq % FEED_SLOTS).padStart(3, '0')}`;
}

function parsePosition(position: string | null): { epoch: string; seq: number } | null {
  if (position === null) return null;
  const at = position.lastIndexOf(':');
  const seq = Number(position.slice(at + 1));
  return at < 0 || !Number.isSafeInteger(seq) ? null : { epoch: position.slice(0, at), seq };
}

/** `ids`, `ids1`, `ids2`, …: the ids comma-separated, cut to fit the property limit. */
function idProperties(ids: readonly string[]): Record<string, string> {
  const text = ids.join(',');
  const properties: Record<string, string> = { ids: text.slice(0, IDS_CHUNK_CHARS) };
  for (let at = IDS_CHUNK_CHARS, i = 1; at < text.length; at += IDS_CHUNK_CHARS, i++) {
    properties[`ids${i}`] = text.slice(at, at + IDS_CHUNK_CHARS);
  }
  return properties;
}

function idsOf(entity: Record<string, unknown>): string[] {
  let text = typeof entity['ids'] === 'string' ? entity['ids'] : '';
  for (let i = 1; typeof entity[`ids${i}`] === 'string'; i++) text += entity[`ids${i}`] as string;
  return text === '' ? [] : text.split(',');
}
/** The partition of the tenants' vector indexes (no tenant id starts with `~`). */
export const INDEX_PARTITION = '~index';
/** Bytes of a value per binary property (the limit is 64 KiB). */
export const VALUE_CHUNK_BYTES = 60 * 1024;

function indexOf(entity: Record<string, unknown>): MemoryIndex {
  const dims = Number(entity['dims']);
  if (!Number.isSafeInteger(dims)) throw new InternalError("a tenant's memory index is unreadable");
  return { dims };
}

/** `value`, `value1`, `value2`, …: the value's bytes cut to fit the property limit. */
function valueProperties(value: Buffer): Record<string, Buffer> {
  const properties: Record<string, Buffer> = { value: value.subarray(0, VALUE_CHUNK_BYTES) };
  for (let at = VALUE_CHUNK_BYTES, i = 1; at < value.length; at += VALUE_CHUNK_BYTES, i++) {
    properties[`value${i}`] = value.subarray(at, at + VALUE_CHUNK_BYTES);
  }
  return properties;
}
/** Every property but the value: what `headers` and pruning read. */
const HEADER_COLUMNS = ['RowKey', 'ns', 'key', 'createdAt', 'updatedAt', 'expiresAt', 'inc', 'outbox'];
/**
 * Every property of a fact, the value's chunks included (an entity holds at most 1 MiB): what
 * `scan` reads, without the table's Timestamp, which no read uses (and which costs decoding).
 */
const FACT_COLUMNS = [
  ...HEADER_COLUMNS,
  'value',
  ...Array.from({ length: Math.ceil((1024 * 1024) / VALUE_CHUNK_BYTES) }, (_, i) => `value${i + 1}`),
];

export function rowKeyOf(namespace: string, key: string): string {
  return factId(namespace, key);
}

/** The smallest string greater than every string that starts with `prefix` (digits, letters and `-`). */
function successor(prefix: string): string {
  return prefix.slice(0, -1) + String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1);
}

/**
 * The rows of `namespace` and below (only those of `part`, see SCAN_PARTS, when given), after
 * `after` when given.
 */
function rangeFilter(tenant: string, namespace: string, after?: string, part?: number): string {
  const start = namespaceDigest(namespace);
  // The whole tenant ends before the feed's rows.
  let low = start;
  let high = start === '' ? FEED_START : successor(start);
  if (part !== undefined) {
    low = `${start}${part === 0 ? '-' : (part - 1).toString(16)}`;
    high = successor(low);
  }
  const parts = [odata`PartitionKey eq ${tenant}`];
  if (low !== '') parts.push(odata`RowKey ge ${low}`);
  if (after !== undefined) parts.push(odata`RowKey gt ${after}`);
  parts.push(odata`RowKey lt ${high}`);
  return parts.join(' and ');
}

function int64(value: number): { value: string; type: 'Int64' } {
  return { value: String(value), type: 'Int64' };
}

function entityOf(tenant: string, fact: FactWrite) {
  return {
    partitionKey: tenant,
    rowKey: rowKeyOf(fact.namespace, fact.key),
    ns: fact.namespace,
    key: fact.key,
    ...valueProperties(fact.value),
    createdAt: int64(fact.createdAt),
    updatedAt: int64(fact.updatedAt),
    ...(fact.expiresAt === null ? {} : { expiresAt: int64(fact.expiresAt) }),
    ...(fact.incarnation === null ? {} : { inc: fact.incarnation }),
    ...(fact.outbox === null ? {} : { outbox: fact.outbox }),
  };
}

/** An Int64 property as the SDK hands it back (`{ value, type }`), or a plain number. */
function optionalNumber(property: unknown): number | null {
  if (property === undefined || property === null) return null;
  const raw = typeof property === 'object' ? (property as { value?: unknown }).value : property;
  const number = Number(raw);
  if (!Number.isFinite(number)) throw new InternalError('a stored fact has an unreadable time');
  return number;
}

function headerOf(
  entity: TableEntityResult<Record<string, unknown>>,
  namespace?: string,
  key?: string,
): FactHeader {
  const stored = { namespace: String(entity['ns']), key: String(entity['key']) };
  // The row key is made of digests: a row of other names there would be a collision, never served.
  if (
    (namespace !== undefined && stored.namespace !== namespace) ||
    (key !== undefined && stored.key !== key)
  ) {
    throw new InternalError('two facts share a storage key; refusing to answer with the other one');
  }
  return {
    ...stored,
    createdAt: optionalNumber(entity['createdAt']) ?? 0,
    updatedAt: optionalNumber(entity['updatedAt']) ?? 0,
    expiresAt: optionalNumber(entity['expiresAt']),
    incarnation: optionalText(entity['inc']),
    outbox: optionalText(entity['outbox']),
    etag: apiEtag(entity.etag),
  };
}

function factOf(
  entity: TableEntityResult<Record<string, unknown>>,
  namespace?: string,
  key?: string,
): StoredFact {
  const header = headerOf(entity, namespace, key);
  const value = entity['value'];
  if (!(value instanceof Uint8Array)) throw new InternalError('a stored fact has no value');
  const chunks = [Buffer.from(value.buffer, value.byteOffset, value.byteLength)];
  for (let i = 1; ; i++) {
    const next = entity[`value${i}`];
    if (!(next instanceof Uint8Array)) break;
    chunks.push(Buffer.from(next.buffer, next.byteOffset, next.byteLength));
  }
  return { ...header, value: chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks) };
}

function optionalText(property: unknown): string | null {
  if (property === undefined || property === null) return null;
  if (typeof property !== 'string') throw new InternalError('a stored fact has an unreadable property');
  return property;
}

function apiEtag(tableEtag: string | undefined): string {
  if (tableEtag === undefined) throw new InternalError('the table answered a write without an ETag');
  return `"${Buffer.from(tableEtag, 'utf8').toString('base64url')}"`;
}

/** The table's ETag inside an ETag this store made (the domain passes on only those it read). */
function tableEtag(etag: string): string {
  return Buffer.from(etag.replace(/^"|"$/g, ''), 'base64url').toString('utf8');
}
