import { type Lru, lru } from '../lru';
import { KeyedMutex } from '../storage/keyedMutex';
import { isWithin, type MemoryItem } from './facts';
import type { WordBag } from './keywordSearch';
import { factId, namespaceDigest, SEGMENT_DIGEST_CHARS } from './layout';
import type { MemoryStore, StoredFact } from './memoryStore';
import type { FactVectors } from './vectors';

/**
 * What a search needs of the facts, kept per instance so that a search does not read a tenant's
 * facts from storage each time (docs/memory.md, "Search cache"):
 *
 * - Per tenant, the facts of the subtrees searched so far ("covered"), decoded: the value, the
 *   vectors as Float32Array, the counted words of key and value, and the answer's item.
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
 *   caches nothing of it.
 * - Refreshes of one tenant take turns within the instance; the facts handed out are never
 *   changed afterwards.
 */

/** The default bound of all tenants' caches of an instance (estimated bytes held). */
export const DEFAULT_INDEX_BYTES = 64 * 1024 * 1024;
/** A covered subtree is read afresh after this long (ten minutes). */
export const DEFAULT_MAX_AGE_MS = 10 * 60 * 1000;
/** Changed rows a refresh reads one by one at most; past it the subtree is read afresh. */
export const MAX_CATCH_UP = 1000;
const SCAN_PAGE = 1000;

/** A fact as the search index holds it. */
export interface IndexedFact {
  readonly id: string;
  readonly namespace: string;
  readonly item: MemoryItem;
  readonly vectors: FactVectors;
  readonly words: WordBag;
  readonly updatedAt: number;
  readonly expiresAt: number | null;
  /** Bytes of the stored value (what a search's read bound counts). */
  readonly bytes: number;
  /** Estimated bytes of memory this entry holds. */
  readonly weight: number;
}

export interface SearchIndexOptions {
  readonly store: MemoryStore;
  /** Opens a stored fact (codec, vectors, words). */
  readonly decode: (tenant: string, fact: StoredFact) => IndexedFact;
  /** Rows and bytes of values one search reads at most (then `truncated`). */
  readonly maxRows: number;
  readonly maxScanBytes: number;
  readonly maxBytes?: number;
  readonly maxAgeMs?: number;
  /** A monotonic clock in milliseconds (for the age of covered subtrees). */
  readonly clock?: () => number;
}

class TenantFacts {
  /** Namespace digest of each covered subtree (`""`: the whole tenant) → when it was read. */
  readonly covered = new Map<string, number>();
  readonly facts = new Map<string, IndexedFact>();
  weight = 1024;

  constructor(public position: string) {}

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

  put(fact: IndexedFact): void {
    this.remove(fact.id);
    this.facts.set(fact.id, fact);
    this.weight += fact.weight;
  }

  remove(id: string): void {
    const old = this.facts.get(id);
    if (old === undefined) return;
    this.facts.delete(id);
    this.weight -= old.weight;
  }

  /** Makes `digest` a covered subtree holding exactly `facts` (and drops subtrees inside it). */
  cover(digest: string, facts: readonly IndexedFact[], at: number): void {
    for (const id of [...this.facts.keys()]) if (id.startsWith(digest)) this.remove(id);
    for (const covered of [...this.covered.keys()])
      if (covered.startsWith(digest)) this.covered.delete(covered);
    for (const fact of facts) this.put(fact);
    this.covered.set(digest, at);
  }
}

export class SearchIndex {
  private readonly tenants: Lru<string, TenantFacts>;
  private readonly turns = new KeyedMutex();
  private readonly maxAgeMs: number;
  private readonly clock: () => number;

  constructor(private readonly options: SearchIndexOptions) {
    this.tenants = lru<string, TenantFacts>(10_000, {
      limit: options.maxBytes ?? DEFAULT_INDEX_BYTES,
      of: (tenant) => tenant.weight,
    });
    this.maxAgeMs = options.maxAgeMs ?? DEFAULT_MAX_AGE_MS;
    this.clock = options.clock ?? (() => performance.now());
  }

  /**
   * The facts stored in `namespace` and below (`""`: the tenant), expired ones included, as fresh
   * as every change that returned before this call; `truncated` when the subtree holds more than
   * one search reads (then the facts are the first part, in storage order).
   */
  async factsUnder(tenant: string, namespace: string): Promise<{ facts: IndexedFact[]; truncated: boolean }> {
    return this.turns.run(tenant, async () => {
      const { store } = this.options;
      let cached = this.tenants.get(tenant);
      const feed = await store.changes(tenant, cached?.position ?? null);
      if (cached !== undefined) {
        const relevant = feed.ids === null ? null : feed.ids.filter((id) => cached?.coversId(id));
        if (relevant === null || relevant.length > MAX_CATCH_UP) {
          cached = undefined;
        } else {
          if (relevant.length > 0) {
            const fetched = await store.fetch(tenant, relevant);
            for (const id of relevant) {
              const fact = fetched.get(id);
              if (fact === undefined) cached.remove(id);
              else cached.put(this.options.decode(tenant, fact));
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
      cached ??= new TenantFacts(feed.position);
      if (cached.coverOf(digest) === undefined) {
        const read = await this.scan(tenant, namespace, digest);
        if (read.truncated) {
          this.keep(tenant, cached);
          return read;
        }
        cached.cover(digest, read.facts, now);
      }
      this.keep(tenant, cached);
      return this.within(cached, digest, namespace);
    });
  }

  /** Forgets every tenant's cache (tests). */
  clear(): void {
    this.tenants.clear();
  }

  /** Stores the tenant's cache again, so that its weight is counted anew. */
  private keep(tenant: string, cached: TenantFacts): void {
    if (cached.covered.size === 0) this.tenants.delete(tenant);
    else this.tenants.set(tenant, cached);
  }

  private within(
    cached: TenantFacts,
    digest: string,
    namespace: string,
  ): { facts: IndexedFact[]; truncated: boolean } {
    const facts: IndexedFact[] = [];
    let bytes = 0;
    for (const fact of cached.facts.values()) {
      if (!fact.id.startsWith(digest) || !isWithin(fact.namespace, namespace)) continue;
      facts.push(fact);
      bytes += fact.bytes;
    }
    if (facts.length <= this.options.maxRows && bytes < this.options.maxScanBytes) {
      return { facts, truncated: false };
    }
    // Grown past what one search reads since it was cached: the first part, as a scan reads it.
    facts.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const first: IndexedFact[] = [];
    bytes = 0;
    for (const fact of facts) {
      if (first.length >= this.options.maxRows || bytes >= this.options.maxScanBytes) break;
      first.push(fact);
      bytes += fact.bytes;
    }
    return { facts: first, truncated: true };
  }

  /** The rows of the subtree, decoded, within the bounds of one search. */
  private async scan(
    tenant: string,
    namespace: string,
    digest: string,
  ): Promise<{ facts: IndexedFact[]; truncated: boolean }> {
    const facts: IndexedFact[] = [];
    let bytes = 0;
    let cursor: string | undefined;
    do {
      const page = await this.options.store.scan(tenant, namespace, {
        pageSize: SCAN_PAGE,
        ...(cursor === undefined ? {} : { cursor }),
      });
      for (const fact of page.facts) {
        if (facts.length >= this.options.maxRows || bytes >= this.options.maxScanBytes) {
          return { facts, truncated: true };
        }
        bytes += fact.value.length;
        const id = factId(fact.namespace, fact.key);
        // A row of another subtree (a digest collision) is never served.
        if (id.startsWith(digest)) facts.push(this.options.decode(tenant, fact));
      }
      cursor = page.cursor ?? undefined;
    } while (cursor !== undefined);
    return { facts, truncated: false };
  }
}
