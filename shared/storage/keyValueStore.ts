/**
 * The key/value storage contract. One store holds one
 * namespace, a tenant's; {@link KeyValueStoreFactory} hands out the store of a tenant.
 *
 * Every implementation MUST:
 * - validate the key (`validateKey`) and a listing's prefix (`validatePrefix`) before any I/O;
 * - give an ETag that changes on every successful write and is never reused (A→B→A gives a new
 *   ETag); ETags are opaque and quoted, as HTTP sends them;
 * - make conditional writes atomic: `ifMatch` replaces only that version (`*`: any existing one),
 *   `ifAbsent` creates only; the loser gets {@link PreconditionFailedError} and its bytes never land;
 * - make `append` atomic: concurrent appends are all kept, each contiguous, in some order;
 * - never expose a partial write, also after a crash;
 * - return `null` for an absent key and throw {@link StorageUnavailableError} for a fault: absent and
 *   failed are never confused;
 * - list by plain string prefix in ascending order, every key exactly once across the pages;
 *   `listItems` lists the same keys in the same pages, each with the ETag, size and modification
 *   time `head` would have answered at that moment (a key gone between the listing and its details
 *   is left out);
 * - report as `modifiedAt` when the value was last written or appended to (the storage's clock, to
 *   the second at least): a collector compares it with its grace period, never with the memory of
 *   one instance.
 *
 * @see ../errors.ts for PreconditionFailedError, StorageUnavailableError, ConflictError.
 */

export interface StoredValue {
  /** Read-only: an implementation may hand the same bytes to other readers (a cache). */
  readonly value: Buffer;
  readonly etag: string;
}

export interface StoredItem {
  readonly etag: string;
  readonly size: number;
}

export interface WriteResult extends StoredItem {
  /** True when the key did not exist before this write. */
  readonly created: boolean;
}

/** At most one of the two; both at once is a caller error. */
export interface WriteConditions {
  /** Write only if the current ETag is this one; `*`: only if the key exists. */
  readonly ifMatch?: string;
  /** Write only if the key does not exist. */
  readonly ifAbsent?: boolean;
}

export interface ListOptions {
  readonly prefix?: string;
  /** 1-5000. */
  readonly limit: number;
  /** From the previous page; opaque. */
  readonly cursor?: string;
}

export interface ListPage {
  readonly keys: string[];
  /** Null on the last page. */
  readonly cursor: string | null;
}

/** A listed key with what `head` tells of it, and when it was last written. */
export interface ListedItem extends StoredItem {
  readonly key: string;
  /** When the value was last written or appended to (the storage's clock). */
  readonly modifiedAt: Date;
}

export interface ItemPage {
  readonly items: ListedItem[];
  /** Null on the last page; a cursor of `list` with the same prefix continues it too. */
  readonly cursor: string | null;
}

export interface KeyValueStore {
  /** The value with its ETag, or null when absent. */
  read(key: string): Promise<StoredValue | null>;
  /** ETag and size without the value, or null when absent. */
  head(key: string): Promise<StoredItem | null>;
  /**
   * Stores `value` whole, replacing what was there unless `conditions` say otherwise. Like append,
   * throws PayloadTooLargeError (nothing written) when the value would exceed the store's limit.
   */
  write(key: string, value: Buffer, conditions?: WriteConditions): Promise<WriteResult>;
  /** Appends `bytes` atomically, creating the key when absent. */
  append(key: string, bytes: Buffer, conditions?: WriteConditions): Promise<WriteResult>;
  /** Deletes the key; false when it was absent. `ifMatch` as for write. */
  delete(key: string, conditions?: Pick<WriteConditions, 'ifMatch'>): Promise<boolean>;
  list(options: ListOptions): Promise<ListPage>;
  /** As `list`, each key with its ETag, size and modification time (retention and verify read them). */
  listItems(options: ListOptions): Promise<ItemPage>;
}

/**
 * A key space Cairn keeps for one of its own stores, apart from the key/value API: no key of it can
 * be read, listed or written through `/api/kv` (another folder locally, another container on Blob).
 */
export type InternalSpace = 'threads';

export interface KeyValueStoreFactory {
  readonly kind: 'local' | 'blob';
  /** The largest value, in bytes, that write and append accept. */
  readonly maxValueBytes: number;
  /** The store of one tenant's key/value space; cheap, no I/O. */
  forTenant(tenant: string): KeyValueStore;
  /**
   * The store of one tenant's `space`: same contract, disjoint from the tenant's key/value space,
   * from its other spaces and from every other tenant's; cheap, no I/O.
   */
  forSpace(space: InternalSpace, tenant: string): KeyValueStore;
}
