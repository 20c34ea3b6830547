import { type Lru, lru } from '../lru';
import { forEachLimited } from '../protocol/pool';
import { KeyedMutex } from '../storage/keyedMutex';
import { FactColumns } from './factColumns';
import { isWithin } from './facts';
import { factId, namespaceDigest, SEGMENT_DIGEST_CHARS } from './layout';
import { type MemoryStore, SCAN_PARTS, type StoredFact } from './memoryStore';
import { decodeSnapshot, encodeSnapshot } from './searchSnapshot';

/**
 * What a search needs of the facts, kept per instance so that a search does not read a tenant's
 * facts from storage each time (docs/memory.md, "Search cache"):
 *
 * - Per tenant, the facts of the subtrees searched so far ("covered"), in columns (factColumns.ts):
 *   names, times, the value's JSON text, vectors in blocks of rows, words counted once a search
 *   with text needs them.
 * - A search first asks the tenant's change feed (`MemoryStore.changes`) what changed since the
 *   position the cache stands at: one storage request when nothing did. It then reads again the
 *   rows changed within covered subtrees (`fetch`, one request per changed row), drops the rows
 *   gone, and moves to the new position. Only then does it read a subtree not covered yet (`scan`,
 *   as a search without the cache would). A change that returned before the search started is in
 *   the feed at or before the position read, so the search sees it, whatever any instance cached.
 * - When the feed cannot tell (the cache fell behind more changes than the feed remembers, or the
 *   feed started again), or more rows changed than {@link MAX_CATCH_UP}, the tenant's cache is
 *   dropped and the subtree read afresh. A covered subtree is also read afresh once it is
 *   {@link DEFAULT_MAX_AGE_MS} old, which bounds what a change made outside Cairn (straight into
 *   storage, without the feed) can hide.
 * - Bounded: the tenants' caches weigh at most `maxBytes` together (an estimate of the memory held,
 *   least recently searched tenants go first); a tenant heavier than that is not kept, and its
 *   searches read storage each time. A search over a subtree that storage holds more of than one
 *   search may read (`maxRows`, `maxBytes` of values) answers from that part, truncated, and
 *   caches nothing of it (subtrees below it cached before stay cached).
 * - A cold read takes the subtree's parts side by side (`scan` with `part`), within the same bounds.
 * - Refreshes of one tenant take turns within the instance, and a search ranks within its turn
 *   (synchronously), so no refresh changes the columns under it.
 */

/** The default bound of all tenants' caches of an instance (estimated bytes held). */
export const DEFAULT_INDEX_BYTES = 64 * 1024 * 1024;
/** A covered subtree is read afresh after this long (ten minutes). */
export const DEFAULT_MAX_AGE_MS = 10 * 60 * 1000;
/** Changed rows a refresh reads one by one at most; past it the subtree is read afresh. */
export const MAX_CATCH_UP = 1000;
const SCAN_PAGE = 1000;
/**
 * Facts a subtree holds at least for a search to store its snapshot: one page of the scan. Below
 * it a fresh instance reads the rows in about the round trips a restore costs (the snapshot, then
 * the change feed), so a snapshot would only be a write more per searched subtree.
 */
export const DEFAULT_SNAPSHOT_MIN_FACTS = SCAN_PAGE;
/** Parts of a subtree a cold search reads at once. */
const SCAN_WIDTH = 4;
/**
 * Stored bytes of values a page of a part holds about (rows per page from the first page's
 * average, at most {@link SCAN_PAGE}, at least {@link MIN_SCAN_PAGE}): a page of 1,000 rows with
 * 384-dimension vectors is about 2.5 MB of JSON answered at once, and the table client holds
 * several copies of it while it decodes, so the parts read side by side ask for smaller pages.
 */
export const DEFAULT_SCAN_PAGE_BYTES = 512 * 1024;
const MIN_SCAN_PAGE = 10;

export interface SearchIndexOptions {
  readonly store: MemoryStore;
  /** The plaintext of a stored fact (the codec opened). */
  readonly open: (tenant: string, fact: StoredFact) => Buffer;
  /** Rows and bytes of values one search reads at most (then `truncated`). */
  readonly maxRows: number;
  readonly maxScanBytes: number;
  readonly maxBytes?: number;
  readonly maxAgeMs?: number;
  /** A monotonic clock in milliseconds (for the age of covered subtrees). */
  readonly clock?: () => number;
  /** The wall clock (Unix ms): when a snapshot's subtree was read, across instances. */
  readonly wallClock?: () => number;
  /**
   * Stored snapshots of covered subtrees (searchSnapshot.ts), opened and sealed by the caller:
   * `load` answers the plaintext or null (none, unreadable, not opening: never throws), `save`
   * stores one (its failure only costs the next fresh instance a full read).
   */
  readonly snapshots?: {
    load(tenant: string, digest: string): Promise<Buffer | null>;
    save(tenant: string, digest: string, plain: Buffer): Promise<void>;
  };
  /** Facts a subtree holds at least for its snapshot to be stored; default {@link DEFAULT_SNAPSHOT_MIN_FACTS}. */
  readonly snapshotMinFacts?: number;
  /** Stored bytes a page of a part holds about; default {@link DEFAULT_SCAN_PAGE_BYTES}. */
  readonly scanPageBytes?: number;
}

/** What a search ranks: the tenant's columns and the slots of the facts of its subtree. */
export interface FactsUnder {
  readonly columns: FactColumns;
  /** Slots of the facts stored in the subtree, expired ones included. */
  readonly slots: Int32Array;
  readonly truncated: boolean;
}

class TenantFacts {
  /** Namespace digest of each covered subtree (`""`: the whole tenant) → when it was read. */
  readonly covered = new Map<string, number>();
  readonly columns = new FactColumns();
  /** The last subtree searched, as of a version of the columns (searches often repeat one). */
  lastWithin: { key: string; version: number; facts: FactsUnder } | undefined;

  constructor(public position: string) {}

  get weight(): number {
    return this.columns.weight;
  }

  /** The covered subtree `digest` lies in (itself or an ancestor), or undefined. */
  coverOf(digest: string): string | undefined {
    for (let length = 0; length <= digest.length; length += SEGMENT_DIGEST_CHARS) {
      const prefix = digest.slice(0, length);
      if (this.covered.has(prefix)) return prefix;
    }
    return undefined;
  }

  coversId(id: string): boolean {
    return this.coverOf(id.slice(0, id.indexOf('-'))) !== undefined;
  }

  /** Covers the subtree `digest` (read whole at `now`), in place of the covered subtrees in it. */
  cover(digest: string, now: number): void {
    for (const covered of [...this.covered.keys()])
      if (covered.startsWith(digest)) this.covered.delete(covered);
    this.covered.set(digest, now);
  }
}

export class SearchIndex {
  private readonly tenants: Lru<string, TenantFacts>;
  private readonly turns = new KeyedMutex();
  private readonly maxAgeMs: number;
  private readonly clock: () => number;
  private readonly wallClock: () => number;
  /** Snapshot writes under way (tests wait for them). */
  private readonly saving = new Set<Promise<void>>();

  constructor(private readonly options: SearchIndexOptions) {
    this.tenants = lru<string, TenantFacts>(10_000, {
      limit: options.maxBytes ?? DEFAULT_INDEX_BYTES,
      of: (tenant) => tenant.weight,
    });
    this.maxAgeMs = options.maxAgeMs ?? DEFAULT_MAX_AGE_MS;
    this.clock = options.clock ?? (() => performance.now());
    this.wallClock = options.wallClock ?? Date.now;
  }

  /**
   * Calls `use` (synchronously, within the tenant's turn: nothing changes the facts while it runs)
   * with the facts stored in `namespace` and below (`""`: the tenant), expired ones included, as
   * fresh as every change that returned before this call; `truncated` when the subtree holds more
   * than one search reads (then the facts are the first part, in storage order).
   */
  async withFactsUnder<T>(tenant: string, namespace: string, use: (facts: FactsUnder) => T): Promise<T> {
    return this.turns.run(tenant, async () => {
      const { store } = this.options;
      const open = (fact: StoredFact) => this.options.open(tenant, fact);
      let cached = this.tenants.get(tenant);
      const feed = await store.changes(tenant, cached?.position ?? null);
      if (cached !== undefined) {
        const relevant = feed.ids === null ? null : feed.ids.filter((id) => cached?.coversId(id));
        if (relevant === null || relevant.length > MAX_CATCH_UP) {
          cached = undefined;
        } else {
          if (relevant.length > 0) {
            const fetched = await store.fetch(tenant, relevant);
            // Removed together (rows gone and rows replaced), then the rows found put back.
            cached.columns.removeAll(relevant);
            for (const id of relevant) {
              const fact = fetched.get(id);
              if (fact !== undefined) cached.columns.put(id, fact, open(fact));
            }
          }
          cached.position = feed.position;
        }
      }
      const digest = namespaceDigest(namespace);
      const now = this.clock();
      const cover = cached?.coverOf(digest);
      // Read afresh once old: the whole tenant's cache goes, and this subtree is read.
      if (cover !== undefined && now - (cached?.covered.get(cover) ?? now) > this.maxAgeMs)
        cached = undefined;
      // Nothing cached of the tenant: a stored snapshot of the subtree, caught up through the feed.
      if (cached === undefined && this.options.snapshots !== undefined) {
        cached = await this.restore(tenant, digest, open);
      }
      cached ??= new TenantFacts(feed.position);
      let scanned = false;
      if (cached.coverOf(digest) === undefined) {
        // Each row decoded as its page comes (so that the pages read go early). Subtrees below it
        // cached already stay (the feed keeps them fresh): a row read there replaces its copy.
        const target = cached;
        const dropUncovered = () =>
          target.columns.removeAll(
            [...target.columns.slotOf.keys()].filter((id) => id.startsWith(digest) && !target.coversId(id)),
          );
        let read: { kept: string[]; truncated: boolean };
        try {
          read = await this.scan(tenant, namespace, digest, (id, fact) =>
            target.columns.put(id, fact, open(fact)),
          );
        } catch (error) {
          dropUncovered();
          throw error;
        }
        if (read.truncated) {
          // Answered from the first part, which is not kept (but for the subtrees cached below).
          try {
            const slots = read.kept.map((id) => target.columns.slotOf.get(id) as number);
            return use({ columns: target.columns, slots: Int32Array.from(slots), truncated: true });
          } finally {
            dropUncovered();
            this.keep(tenant, target);
          }
        }
        target.cover(digest, now);
        scanned = true;
      }
      try {
        return use(this.within(cached, digest, namespace));
      } finally {
        // After the search: what it counted (words) and what the catch-up changed weigh too.
        this.keep(tenant, cached);
        if (scanned) this.snapshot(tenant, digest);
      }
    });
  }

  /** Resolves once every snapshot write started so far has ended (tests). */
  async snapshotsSaved(): Promise<void> {
    while (this.saving.size > 0) await Promise.all([...this.saving]);
  }

  /**
   * The tenant's facts from the stored snapshot of the subtree, caught up to the feed's position
   * now; undefined when there is none, it does not decode, is older than the maximum age, or the
   * feed cannot tell what changed since its position (then the subtree is read). A storage fault
   * of the feed or of a changed row fails the search, as a warm cache's catch-up does.
   */
  private async restore(
    tenant: string,
    digest: string,
    open: (fact: StoredFact) => Buffer,
  ): Promise<TenantFacts | undefined> {
    const plain = await this.options.snapshots?.load(tenant, digest);
    if (plain === null || plain === undefined) return undefined;
    let decoded: ReturnType<typeof decodeSnapshot>;
    try {
      decoded = decodeSnapshot(plain, { tenant, digest });
    } catch {
      return undefined;
    }
    const age = this.wallClock() - decoded.scannedAt;
    if (age > this.maxAgeMs || age < -this.maxAgeMs) return undefined;
    const feed = await this.options.store.changes(tenant, decoded.position);
    if (feed.ids === null) return undefined;
    const relevant = feed.ids.filter((id) => id.startsWith(digest));
    if (relevant.length > MAX_CATCH_UP) return undefined;
    const restored = new TenantFacts(decoded.position);
    try {
      restored.columns.restore(decoded.facts, decoded.blocks);
    } catch {
      return undefined;
    }
    restored.cover(digest, this.clock() - Math.max(0, age));
    if (relevant.length > 0) {
      const fetched = await this.options.store.fetch(tenant, relevant);
      restored.columns.removeAll(relevant);
      for (const id of relevant) {
        const fact = fetched.get(id);
        if (fact !== undefined) restored.columns.put(id, fact, open(fact));
      }
    }
    restored.position = feed.position;
    return restored;
  }

  /**
   * Stores a snapshot of the subtree `digest` as cached, in the tenant's next turn (after this
   * search answered): its facts, stamped with the feed position the columns reflect and when the
   * subtree was read. Not awaited by the search; a failure is only a snapshot missing.
   */
  private snapshot(tenant: string, digest: string): void {
    const snapshots = this.options.snapshots;
    if (snapshots === undefined) return;
    const saving = this.turns
      .run(tenant, async () => {
        const cached = this.tenants.get(tenant);
        const readAt = cached?.covered.get(digest);
        if (cached === undefined || readAt === undefined) return null;
        const { columns } = cached;
        const slots: number[] = [];
        for (let slot = 0; slot < columns.size; slot++) {
          if (columns.ids[slot]?.startsWith(digest) === true) slots.push(slot);
        }
        if (slots.length < (this.options.snapshotMinFacts ?? DEFAULT_SNAPSHOT_MIN_FACTS)) return null;
        return encodeSnapshot(columns, slots, {
          tenant,
          digest,
          position: cached.position,
          scannedAt: this.wallClock() - (this.clock() - readAt),
        });
      })
      .then(async (plain) => {
        if (plain !== null) await snapshots.save(tenant, digest, plain);
      })
      .catch(() => undefined)
      .finally(() => this.saving.delete(saving));
    this.saving.add(saving);
  }

  /** Forgets every tenant's cache (tests). */
  clear(): void {
    this.tenants.clear();
  }

  /**
   * Stores the tenant's cache again, so that its weight is counted anew (evicting the least
   * recently searched tenants when it grew). Deleted first: lru-cache weighs a value only when it
   * is set in place of another object, so setting the same object again would keep its old weight.
   */
  private keep(tenant: string, cached: TenantFacts): void {
    this.tenants.delete(tenant);
    if (cached.covered.size > 0) this.tenants.set(tenant, cached);
  }

  private within(cached: TenantFacts, digest: string, namespace: string): FactsUnder {
    const { columns } = cached;
    const last = cached.lastWithin;
    if (last !== undefined && last.key === namespace && last.version === columns.version) return last.facts;
    const facts = this.slotsWithin(columns, digest, namespace);
    cached.lastWithin = { key: namespace, version: columns.version, facts };
    return facts;
  }

  private slotsWithin(columns: FactColumns, digest: string, namespace: string): FactsUnder {
    const slots: number[] = [];
    let bytes = 0;
    for (let slot = 0; slot < columns.size; slot++) {
      const id = columns.ids[slot];
      if (id === undefined || !id.startsWith(digest)) continue;
      if (!isWithin(columns.namespaces[slot] as string, namespace)) continue;
      slots.push(slot);
      bytes += columns.bytes[slot] as number;
    }
    if (slots.length <= this.options.maxRows && bytes < this.options.maxScanBytes) {
      return { columns, slots: Int32Array.from(slots), truncated: false };
    }
    // Grown past what one search reads since it was cached: the first part, as a scan reads it.
    const idOf = (slot: number) => columns.ids[slot] as string;
    slots.sort((a, b) => (idOf(a) < idOf(b) ? -1 : idOf(a) > idOf(b) ? 1 : 0));
    const first: number[] = [];
    bytes = 0;
    for (const slot of slots) {
      if (first.length >= this.options.maxRows || bytes >= this.options.maxScanBytes) break;
      first.push(slot);
      bytes += columns.bytes[slot] as number;
    }
    return { columns, slots: Int32Array.from(first), truncated: true };
  }

  /**
   * The rows of the subtree within the bounds of one search: a first page of the whole subtree
   * and, when there is more, the rest of each of its {@link SCAN_PARTS} parts (after that page),
   * read side by side (at most {@link SCAN_WIDTH} at once, in pages of about `scanPageBytes` of
   * values each, so that what is read at once stays small) until the bound is reached; then, in
   * order, a part that stopped early is read on while the rows before it do not fill the bound, so
   * that the rows kept are exactly the first ones (the first page, then the parts in order).
   */
  private async scan(
    tenant: string,
    namespace: string,
    digest: string,
    onRow: (id: string, fact: StoredFact) => void,
  ): Promise<{ kept: string[]; truncated: boolean }> {
    const { maxRows, maxScanBytes } = this.options;
    /** A part's rows as read: the id (null for a row of another subtree) and the value's bytes. */
    interface Part {
      readonly part: number;
      rows: { id: string | null; bytes: number }[];
      cursor: string | null;
      done: boolean;
    }
    let rows = 0;
    let bytes = 0;
    const take = (part: Part, facts: readonly StoredFact[]) => {
      for (const fact of facts) {
        const id = factId(fact.namespace, fact.key);
        // A row of another subtree (a digest collision) is never served.
        const own = id.startsWith(digest);
        if (own) onRow(id, fact);
        part.rows.push({ id: own ? id : null, bytes: fact.value.length });
        rows++;
        bytes += fact.value.length;
      }
    };
    const first = await this.options.store.scan(tenant, namespace, { pageSize: SCAN_PAGE });
    const whole: Part = { part: -1, rows: [], cursor: null, done: true };
    take(whole, first.facts);
    // The parts' pages sized by the first page's rows: about `scanPageBytes` of values each.
    let firstBytes = 0;
    for (const fact of first.facts) firstBytes += fact.value.length;
    const pageBytes = this.options.scanPageBytes ?? DEFAULT_SCAN_PAGE_BYTES;
    const pageSize = Math.max(
      MIN_SCAN_PAGE,
      Math.min(SCAN_PAGE, Math.floor((pageBytes * first.facts.length) / Math.max(1, firstBytes))),
    );
    const parts: Part[] =
      first.cursor === null
        ? []
        : Array.from({ length: SCAN_PARTS }, (_, part) => ({
            part,
            rows: [],
            cursor: first.cursor,
            done: false,
          }));
    const readPage = async (part: Part) => {
      const page = await this.options.store.scan(tenant, namespace, {
        pageSize,
        part: part.part,
        ...(part.cursor === null ? {} : { cursor: part.cursor }),
      });
      take(part, page.facts);
      part.cursor = page.cursor;
      part.done = page.cursor === null;
    };
    // Once one part's read fails, the others stop at their next page (the search fails promptly).
    let failed = false;
    await forEachLimited(
      parts,
      SCAN_WIDTH,
      async (part) => {
        try {
          while (!failed && !part.done && rows <= maxRows && bytes < maxScanBytes) await readPage(part);
        } catch (error) {
          failed = true;
          throw error;
        }
      },
      () => failed,
    );
    // In order: the rows kept are the first ones within the bound; the rest are dropped.
    const keptIds: string[] = [];
    let kept = 0;
    let keptBytes = 0;
    let truncated = false;
    for (const part of [whole, ...parts]) {
      for (let at = 0; ; at++) {
        while (!truncated && at >= part.rows.length && !part.done) await readPage(part);
        const row = part.rows[at];
        if (row === undefined) break;
        if (truncated || kept >= maxRows || keptBytes >= maxScanBytes) {
          truncated = true;
          continue;
        }
        keptBytes += row.bytes;
        if (row.id !== null) {
          kept++;
          keptIds.push(row.id);
        }
      }
    }
    return { kept: keptIds, truncated };
  }
}
