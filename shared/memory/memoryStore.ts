/**
 * The storage contract of memory facts: rows of one tenant, addressed by namespace and key, with
 * compare-and-swap on a version tag. The domain above it (`shared/memory/memory.ts`) validates,
 * seals values, filters expiry and ranks; an implementation stores and finds rows.
 *
 * Every implementation MUST:
 * - scope every call strictly by tenant: another tenant's rows are simply not there;
 * - make `write` a compare-and-swap: create-only when `ifEtag` is null, else replace only the row
 *   whose current etag is `ifEtag`; a lost race throws PreconditionFailedError and writes nothing;
 * - give a new etag on every successful write, never reused for the same row (A→B→A gives three);
 * - make `scan` read the namespace and what is below it by whole segments, and nothing else (no
 *   other namespace's rows, so its cost follows the subtree, not the tenant): pages in a fixed
 *   order, each row exactly once across pages while nothing changes;
 * - return expired rows from `get`, `scan` and `headers` as they are (the domain decides what is
 *   expired);
 * - store `incarnation` and `outbox` with the row and return them unchanged (null when a row has
 *   none); an `outbox` is at most {@link MAX_OUTBOX_CHARS} characters;
 * - in `pruneExpired`, leave a row for which `keep` answers true, and delete every other row only
 *   at the version it was found at (a row written again since is not expired any more);
 * - keep the tenant's change feed (`changes`): every call that changes or deletes rows (`write`,
 *   `delete`, `deleteSubtree`, `pruneExpired`) lists the ids of the rows it changed in the feed
 *   before it returns, so that a reader that asks for the changes after it returned gets them
 *   (on Table Storage in the same transaction as the rows themselves); a call that changed rows
 *   and could not list them throws StorageUnavailableError, never a result;
 * - report a storage fault as StorageUnavailableError, never as absent or empty.
 *
 * Values, incarnations and outboxes are opaque here (the value sealed by the domain's codec, the
 * other two the domain's audit bookkeeping): implementations never parse them.
 */

import { PreconditionFailedError } from '../protocol/errors';

/** The most writes one `writeMany` takes (a Table transaction's 100 operations, less the feed's two). */
export const MAX_WRITES_PER_CALL = 98;
/** The most bytes of values one `writeMany` takes (a Table transaction's 4 MiB, less base64 and the rest). */
export const MAX_WRITE_BYTES_PER_CALL = 2 * 1024 * 1024;

/**
 * The parts of a subtree `scan` reads on their own: part 0 the namespace's own rows, part 1 + h the
 * rows below it whose next segment's digest starts with the hex digit h. In the id order (layout.ts)
 * each part is one contiguous range, and the parts follow one another.
 */
export const SCAN_PARTS = 17;

/** The part (see {@link SCAN_PARTS}) of the subtree of digest path `digest` that fact id `id` lies in. */
export function scanPartOf(digest: string, id: string): number {
  const next = id.charAt(digest.length);
  return next === '-' ? 0 : 1 + Number.parseInt(next, 16);
}

/** The longest outbox a row holds (characters); the domain keeps it far below. */
export const MAX_OUTBOX_CHARS = 24 * 1024;

export interface StoredFact {
  /** The namespace path, e.g. `users/42`. */
  readonly namespace: string;
  readonly key: string;
  /** The sealed value. */
  readonly value: Buffer;
  /** Unix milliseconds. */
  readonly createdAt: number;
  readonly updatedAt: number;
  /** Unix milliseconds, or null: never expires. */
  readonly expiresAt: number | null;
  /**
   * Set when the row is created and kept by every write over it: a row deleted and created again
   * has another one (the audit repair tells a deletion from a later write by it). Null for rows
   * stored before incarnations were kept.
   */
  readonly incarnation: string | null;
  /** Audit events of writes of this row not yet known to be in the trail (the domain's text), or null. */
  readonly outbox: string | null;
  /** The row's version, quoted (`"…"`), as the API hands it out. */
  readonly etag: string;
}

export type FactWrite = Omit<StoredFact, 'etag'>;

/** A row's address and times without its value (listing, pruning). */
export type FactHeader = Omit<StoredFact, 'value'>;

export interface FactPage {
  readonly facts: StoredFact[];
  /** Pass back as `cursor` for the next page; null after the last. */
  readonly cursor: string | null;
}

export interface FactHeaderPage {
  readonly headers: FactHeader[];
  /** Pass back as `cursor` for the next page; null after the last. */
  readonly cursor: string | null;
}

export interface SubtreeDeletion {
  /** Rows deleted that had not expired at `now`. */
  readonly deleted: number;
  /** True when rows of the subtree may remain (the budget ran out): call again. */
  readonly more: boolean;
}

/** A tenant's vector index: the dimension count every vector of the tenant has. */
export interface MemoryIndex {
  readonly dims: number;
}

/**
 * What changed in a tenant since a position of its change feed. Positions are opaque; two equal
 * positions mean no change in between.
 */
export interface FeedChanges {
  /** Where the feed stands now; pass it back as `since` next time. */
  readonly position: string;
  /**
   * The ids (`factId`) of the rows changed or deleted after `since` up to `position`, or null when
   * the feed cannot tell (no `since`, a feed that started again, or one that has moved on too far):
   * then the reader has to read what it needs afresh.
   */
  readonly ids: string[] | null;
}

export interface MemoryStore {
  /**
   * The tenant's change feed since `since` (null: only its position). One storage request when
   * nothing changed, a few more when something did (never one per unchanged row).
   */
  changes(tenant: string, since: string | null): Promise<FeedChanges>;
  /** The rows with these ids (`factId`), expired or not; an absent row is not in the map. */
  fetch(tenant: string, ids: readonly string[]): Promise<Map<string, StoredFact>>;
  /** The tenant's vector index, or null before its first vector. */
  readIndex(tenant: string): Promise<MemoryIndex | null>;
  /**
   * Creates the tenant's index unless one exists (create-only, so two first writers agree) and
   * answers the index that holds: `index`, or the one that was there. An index never changes.
   */
  createIndex(tenant: string, index: MemoryIndex): Promise<MemoryIndex>;
  /** The row, expired or not, or null. */
  get(tenant: string, namespace: string, key: string): Promise<StoredFact | null>;
  /**
   * Writes the row: only if absent when `ifEtag` is null, else only over the row with that etag.
   * Throws PreconditionFailedError when the condition does not hold.
   */
  write(tenant: string, fact: FactWrite, ifEtag: string | null): Promise<StoredFact>;
  /**
   * Each write as `write` would do it (its own compare-and-swap), answered in order: the stored
   * row, or null where the condition did not hold (nothing written for that one). At most
   * {@link MAX_WRITES_PER_CALL} writes of distinct rows, at most {@link MAX_WRITE_BYTES_PER_CALL}
   * of values together; an implementation may store them in fewer requests than one per row (on
   * Table Storage one transaction when every condition holds).
   */
  writeMany(
    tenant: string,
    writes: readonly { fact: FactWrite; ifEtag: string | null }[],
  ): Promise<(StoredFact | null)[]>;
  /**
   * Deletes the row (only the version `ifEtag`, when given); false when it was absent. Throws
   * PreconditionFailedError when `ifEtag` does not match.
   */
  delete(tenant: string, namespace: string, key: string, ifEtag?: string): Promise<boolean>;
  /**
   * Lists the rows `ids` (`factId`) in the feed without changing them, so that every cache reads
   * them again. For deletes whose own feed entry failed (the call threw, the row gone): `forget`
   * lists a fact it finds no row of, so its retry heals the gap, and a forget of a namespace that
   * fails lists the rows it was deleting.
   */
  relist(tenant: string, ids: readonly string[]): Promise<void>;
  /**
   * One page of the rows of `namespace` and below (`""`: the whole tenant), at most `pageSize`.
   * With `part` (0 to {@link SCAN_PARTS} - 1), only the rows of that part of the subtree (see
   * {@link scanPartOf}), paged on their own: the parts partition the subtree, so reading them side
   * by side (each to its end) reads every row once. A cursor of a page of the whole subtree may be
   * passed with a part: then the part's rows that come after that page.
   */
  scan(
    tenant: string,
    namespace: string,
    options: { cursor?: string; pageSize: number; part?: number },
  ): Promise<FactPage>;
  /**
   * The same rows as `scan`, in the same order and with the same cursors, without their values
   * (what a deletion needs: cheaper when values are large).
   */
  headers(
    tenant: string,
    namespace: string,
    options: { cursor?: string; pageSize: number },
  ): Promise<FactHeaderPage>;
  /**
   * The distinct namespaces at or below `prefix` that hold a row not expired at `now`, in no
   * particular order, at most `max` of them (then `complete` is false). Costs about one request per
   * namespace found, not one per row.
   */
  namespaces(
    tenant: string,
    prefix: string,
    options: { now: number; max: number },
  ): Promise<{ namespaces: string[]; complete: boolean }>;
  /**
   * Deletes every row of `namespace` and below (`""`: the whole tenant), unconditionally, at most
   * `budget` rows per call. Rows written while it runs may remain.
   */
  deleteSubtree(
    tenant: string,
    namespace: string,
    options: { now: number; budget: number },
  ): Promise<SubtreeDeletion>;
  /**
   * Deletes rows whose `expiresAt` is at or before `now`, at most `budget` per call. A row written
   * again since it was found (a new etag) is left alone, and so is a row for which `keep` (when
   * given) answers true; `more` says whether expired rows were left for lack of budget.
   */
  pruneExpired(
    tenant: string,
    options: { now: number; budget: number; keep?: (row: FactHeader) => Promise<boolean> },
  ): Promise<SubtreeDeletion>;
}

/**
 * `writeMany` done as one `write` per row, in order: the stored row, or null where the condition
 * did not hold. For a store without multi-row writes, and for one whose combined write failed on a
 * condition (then nothing of it was written).
 */
export async function writeEachAlone(
  store: Pick<MemoryStore, 'write'>,
  tenant: string,
  writes: readonly { fact: FactWrite; ifEtag: string | null }[],
): Promise<(StoredFact | null)[]> {
  const results: (StoredFact | null)[] = [];
  for (const { fact, ifEtag } of writes) {
    try {
      results.push(await store.write(tenant, fact, ifEtag));
    } catch (error) {
      if (!(error instanceof PreconditionFailedError)) throw error;
      results.push(null);
    }
  }
  return results;
}
