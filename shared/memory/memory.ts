import { setTimeout as sleep } from 'node:timers/promises';

import { type AuditEvent, type AuditLog, noAuditLog } from '../audit/auditLog';
import { plainCodec, type ValueCodec, type ValuePlace } from '../crypto/valueCodec';
import {
  IntegrityError,
  InvalidArgumentError,
  PreconditionFailedError,
  StorageUnavailableError,
} from '../errors';
import { LruMap } from '../lruMap';
import type { WriteConditions } from '../storage/keyValueStore';
import {
  checkFactKey,
  checkNamespace,
  checkTtl,
  compareNamespaces,
  DEFAULT_NAMESPACE_LIMIT,
  DEFAULT_SEARCH_LIMIT,
  isWithin,
  MAX_NAMESPACE_LIMIT,
  MAX_SEARCH_LIMIT,
  MAX_SEARCH_OFFSET,
  MAX_SEARCH_TEXT_BYTES,
  type MemoryItem,
  type ScoredItem,
  serialiseValue,
} from './facts';
import { bm25Scores, type DocumentTerms, documentTerms, matchesAny, queryWords } from './keywordSearch';
import type { FactHeader, MemoryStore, StoredFact } from './memoryStore';
import { matchesFilter, type ValueFilter } from './valueFilter';

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
 *   key), and every change is reported to the audit log with ids and counts, never values.
 * - Search reads the namespace and below, never the rest of the tenant, and at most
 *   {@link MAX_SEARCH_SCAN_ROWS} rows or {@link MAX_SEARCH_SCAN_BYTES} of values (then `truncated`).
 */

/** Rows a search reads at most; past this the answer says `truncated`. */
export const MAX_SEARCH_SCAN_ROWS = 10_000;
/** Bytes of stored values a search reads at most. */
export const MAX_SEARCH_SCAN_BYTES = 16 * 1024 * 1024;
/** Rows one `forgetAll` call deletes at most; `more` then says to call again. */
export const FORGET_ALL_BUDGET = 1000;
/** Distinct namespaces a listing finds at most. */
export const MAX_LISTED_NAMESPACES = 10_000;
const SCAN_PAGE = 1000;
const WRITE_ATTEMPTS = 32;
/** Fact versions remembered per instance (about 200 bytes each). */
const KNOWN_VERSIONS = 10_000;

export interface MemoryFactsOptions {
  readonly store: MemoryStore;
  /** Seals values at rest; default: stored as they are. */
  readonly codec?: ValueCodec;
  /** Receives `memory.written`, `memory.forgotten` and `memory.forgotAll`; default: off. */
  readonly audit?: AuditLog;
  /** The clock (Unix ms); tests may move it. */
  readonly now?: () => number;
}

/** Who asks: the tenant, and the credential for the audit trail when known. */
export interface Caller {
  readonly tenant: string;
  readonly actor?: string;
}

export interface RememberOptions {
  /** Seconds until the fact expires; absent: never (and a previous time to live is cleared). */
  readonly ttl?: number;
  readonly conditions?: WriteConditions;
}

export interface SearchRequest {
  /** `""` searches the whole tenant. */
  readonly namespace: string;
  readonly text?: string;
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
  private readonly audit: AuditLog;
  private readonly now: () => number;
  /**
   * The last version of each fact this instance wrote or read (bounded): a hint that lets
   * `remember` skip its read, never trusted for an answer (see `remember`).
   */
  private readonly versions = new LruMap<string, FactHeader>(KNOWN_VERSIONS);

  constructor(options: MemoryFactsOptions) {
    this.store = options.store;
    this.codec = options.codec ?? plainCodec;
    this.audit = options.audit ?? noAuditLog;
    this.now = options.now ?? Date.now;
  }

  /** Stores `value` under `namespace`/`key`; `created` is true when no live fact was there. */
  async remember(
    caller: Caller,
    namespace: string,
    key: string,
    value: unknown,
    options: RememberOptions = {},
  ): Promise<{ item: MemoryItem; created: boolean }> {
    checkNamespace(namespace);
    checkFactKey(key);
    const plain = serialiseValue(value);
    if (options.ttl !== undefined) checkTtl(options.ttl);
    const conditions = options.conditions ?? {};
    if (conditions.ifMatch !== undefined && conditions.ifAbsent === true) {
      throw new InvalidArgumentError('If-Match', 'cannot be combined with If-None-Match');
    }
    await this.codec.prepare?.(caller.tenant);
    const sealed = this.codec.seal(plain, placeOf(caller.tenant, namespace, key));
    const versionKey = JSON.stringify([caller.tenant, namespace, key]);
    for (let attempt = 0; attempt < WRITE_ATTEMPTS; attempt++) {
      if (attempt > 0) await sleep(Math.random() * Math.min(100, 2 * 2 ** attempt));
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
      const stored = await this.tryWrite(caller.tenant, current, {
        namespace,
        key,
        value: sealed,
        createdAt: live?.createdAt ?? now,
        // Strictly increasing per row, also when the clock has not moved (or moved back).
        updatedAt: current === null ? now : Math.max(now, current.updatedAt + 1),
        expiresAt: options.ttl === undefined ? null : now + options.ttl * 1000,
      });
      if (stored === null) {
        this.versions.delete(versionKey);
        continue;
      }
      this.versions.set(versionKey, headerOf(stored));
      await this.record(caller, 'memory.written', namespace, { key, created: live === null });
      return { item: itemOf(stored, JSON.parse(plain.toString('utf8'))), created: live === null };
    }
    throw new StorageUnavailableError('the fact is changing too fast to write; retry');
  }

  /** The live fact, or null when absent or expired. */
  async recall(caller: Caller, namespace: string, key: string): Promise<MemoryItem | null> {
    checkNamespace(namespace);
    checkFactKey(key);
    await this.codec.prepare?.(caller.tenant);
    const stored = await this.store.get(caller.tenant, namespace, key);
    const versionKey = JSON.stringify([caller.tenant, namespace, key]);
    if (stored === null) {
      this.versions.delete(versionKey);
      return null;
    }
    this.versions.set(versionKey, headerOf(stored));
    if (isExpired(stored, this.now())) return null;
    return itemOf(stored, this.open(caller.tenant, stored));
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
    for (let attempt = 0; attempt < WRITE_ATTEMPTS; attempt++) {
      const current = await this.store.get(caller.tenant, namespace, key);
      const live = current !== null && !isExpired(current, this.now()) ? current : null;
      checkWriteConditions(conditions, live);
      if (current === null) return false;
      try {
        // On the version read: a write that came in between is not deleted unseen.
        await this.store.delete(caller.tenant, namespace, key, current.etag);
      } catch (error) {
        if (error instanceof PreconditionFailedError) continue;
        throw error;
      }
      this.versions.delete(JSON.stringify([caller.tenant, namespace, key]));
      if (live !== null) await this.record(caller, 'memory.forgotten', namespace, { key });
      return live !== null;
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
    const result = await this.store.deleteSubtree(caller.tenant, namespace, {
      now: this.now(),
      budget: FORGET_ALL_BUDGET,
    });
    if (result.deleted > 0 || !result.more) {
      await this.record(caller, 'memory.forgotAll', namespace, { count: result.deleted, more: result.more });
    }
    return result;
  }

  /**
   * Facts in `namespace` and below. With text: those whose key or value's strings contain a word of
   * it, best first, each with `score` in [0, 1]; without: every fact, newest `updatedAt` first.
   * Ties keep a stable order: newer first, then by namespace and key.
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
    const query = text === '' ? null : queryWords(text);
    const now = this.now();
    const candidates: { item: MemoryItem; terms?: DocumentTerms }[] = [];
    let considered = 0;
    let totalLength = 0;
    let rows = 0;
    let bytes = 0;
    let truncated = false;
    let cursor: string | undefined;
    await this.codec.prepare?.(caller.tenant);
    scanning: do {
      const page = await this.store.scan(caller.tenant, request.namespace, {
        pageSize: SCAN_PAGE,
        ...(cursor === undefined ? {} : { cursor }),
      });
      for (const fact of page.facts) {
        if (rows >= MAX_SEARCH_SCAN_ROWS || bytes >= MAX_SEARCH_SCAN_BYTES) {
          truncated = true;
          break scanning;
        }
        rows++;
        bytes += fact.value.length;
        if (isExpired(fact, now) || !isWithin(fact.namespace, request.namespace)) continue;
        const value = this.open(caller.tenant, fact);
        if (request.filter !== undefined && !matchesFilter(value, request.filter)) continue;
        considered++;
        if (query === null) {
          candidates.push({ item: itemOf(fact, value) });
          continue;
        }
        const terms = documentTerms(fact.key, value, query);
        totalLength += terms.length;
        if (matchesAny(terms)) candidates.push({ item: itemOf(fact, value), terms });
      }
      cursor = page.cursor ?? undefined;
    } while (cursor !== undefined);

    let ranked: ScoredItem[];
    if (query === null) {
      ranked = candidates.map(({ item }) => item).sort(newestFirst);
    } else {
      const scores = bm25Scores(
        candidates.map(({ terms }) => terms as DocumentTerms),
        considered,
        considered === 0 ? 0 : totalLength / considered,
        query.length,
      );
      ranked = candidates
        .map(({ item }, i) => ({ ...item, score: scores[i] ?? 0 }))
        .sort((a, b) => b.score - a.score || newestFirst(a, b));
    }
    return { items: ranked.slice(offset, offset + limit), truncated };
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
    if (listing.maxDepth !== undefined) checkRange('maxDepth', listing.maxDepth, 1, 16);
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
    return this.store.pruneExpired(tenant, { now: this.now(), budget });
  }

  /** The stored row's write, or null when another write came first (the caller reads again). */
  private async tryWrite(
    tenant: string,
    current: { readonly etag: string } | null,
    fact: Parameters<MemoryStore['write']>[1],
  ): Promise<StoredFact | null> {
    try {
      return await this.store.write(tenant, fact, current?.etag ?? null);
    } catch (error) {
      if (error instanceof PreconditionFailedError) return null;
      throw error;
    }
  }

  private open(tenant: string, fact: StoredFact): unknown {
    const plain = this.codec.open(fact.value, placeOf(tenant, fact.namespace, fact.key));
    try {
      return JSON.parse(plain.toString('utf8')) as unknown;
    } catch {
      throw new IntegrityError('a stored fact is not JSON; it was damaged');
    }
  }

  private async record(
    caller: Caller,
    action: string,
    namespace: string,
    details: NonNullable<AuditEvent['details']>,
  ): Promise<void> {
    if (!this.audit.enabled) return;
    await this.audit.record({
      tenant: caller.tenant,
      action,
      ...(caller.actor === undefined ? {} : { actor: caller.actor }),
      subject: namespace,
      outcome: 'ok',
      details,
    });
  }
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
    etag: fact.etag,
  };
}

function itemOf(fact: StoredFact, value: unknown): MemoryItem {
  return {
    namespace: fact.namespace.split('/'),
    key: fact.key,
    value,
    createdAt: fact.createdAt,
    updatedAt: fact.updatedAt,
    ...(fact.expiresAt === null ? {} : { expiresAt: fact.expiresAt }),
    etag: fact.etag,
  };
}

function newestFirst(a: MemoryItem, b: MemoryItem): number {
  return (
    b.updatedAt - a.updatedAt ||
    compareNamespaces(a.namespace, b.namespace) ||
    (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)
  );
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
