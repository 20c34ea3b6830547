import { ConflictError, InvalidArgumentError, PayloadTooLargeError } from '../protocol/errors';
import { MAX_OBJECT_BYTES } from '../protocol/fields';
import { validateKey, validatePrefix } from '../protocol/keys';
import { forEachLimited } from '../protocol/pool';

/**
 * The storage contract of session archives and workspace snapshots: write-once objects (blocks,
 * tails, parts, manifests, signatures) plus one kind of mutable value, the pointer (`latest`),
 * moved only by compare-and-swap. Keys are global to one store: the archive's store is shared by
 * all tenants (the session index decides who owns a session, before any byte is written); snapshot
 * stores are one per tenant, at a location derived from the tenant (services.ts).
 *
 * Every implementation MUST:
 * - validate the key (`validateKey`) and refuse an object over {@link MAX_OBJECT_BYTES} with
 *   {@link PayloadTooLargeError}, both before any I/O;
 * - never overwrite an object: `put` of a key that exists with the same bytes succeeds with
 *   `created: false` (an idempotent retry), with other bytes it throws {@link ObjectExistsError}
 *   and the stored bytes stay; of N concurrent puts of one absent key exactly one creates it;
 * - never expose a partial object, also after a crash (readers see all of it or nothing);
 * - return `null` for an absent key and throw StorageUnavailableError for a fault: absent and
 *   failed are never confused;
 * - list by plain string prefix, ascending by key, with each object's size, every object exactly
 *   once (pages are the implementation's business: the iterator never stops early);
 * - move a pointer only from the expected value (`null`: only if absent), atomically; the loser is
 *   told the current value; moving it to `null` removes it, under the same rule;
 * - report when each object was stored (`storedAt`, to the second at least): objects are never
 *   rewritten, so this is when its bytes were first stored, or when it was last touched;
 * - `touch` an object: make its `storedAt` the storage's present time, bytes and size unchanged,
 *   atomically with respect to `delete` (a delete with `storedBefore` earlier than the touch
 *   leaves a touched object; a touch never brings back a deleted one: it answers null). A publish
 *   touches an old object it relies on before storing the manifest that references it, so that a
 *   collector that decided to delete it before that manifest existed cannot;
 * - delete idempotently: `delete` of an absent key is `false`, never an error; with `storedBefore`
 *   an object stored at or after that instant stays (checked atomically where the storage can), so
 *   that a collector of unreferenced objects can spare young ones. A deleted key is free again: the
 *   next `put` creates it.
 */

/** The largest object, in bytes (2 MiB): the protocol's limit. */
export { MAX_OBJECT_BYTES };

export interface ObjectInfo {
  readonly key: string;
  readonly size: number;
  /** When the object was stored, or last touched (its bytes never change afterwards). */
  readonly storedAt: Date;
}

export interface DeleteOptions {
  /** Delete only an object stored before this instant; a younger one stays (`false`). */
  readonly storedBefore?: Date;
}

export interface PutResult {
  /** False when the same bytes were already stored under the key. */
  readonly created: boolean;
}

export type SwapResult =
  { readonly swapped: true } | { readonly swapped: false; readonly current: string | null };

export interface ImmutableObjectStore {
  /** Stores `bytes` under `key` unless something is stored there already (see the contract). */
  put(key: string, bytes: Buffer): Promise<PutResult>;
  /** The object's bytes, or null when absent. */
  get(key: string): Promise<Buffer | null>;
  /** The object's size, or null when absent. */
  head(key: string): Promise<ObjectInfo | null>;
  /** Every object whose key starts with `prefix`, ascending by key. */
  list(prefix: string): AsyncIterable<ObjectInfo>;
  /** The pointer's value, or null when it was never set. */
  readPointer(key: string): Promise<string | null>;
  /**
   * Sets the pointer to `next` only if it currently is `expected` (null: absent); `next` null
   * removes it.
   */
  swapPointer(key: string, expected: string | null, next: string | null): Promise<SwapResult>;
  /**
   * Deletes the object (or pointer) stored under `key`: true when this call deleted it, false when
   * it was absent or, with `storedBefore`, younger than that. Storage faults throw.
   */
  delete(key: string, options?: DeleteOptions): Promise<boolean>;
  /**
   * Makes the object's `storedAt` now (bytes and size unchanged), so that a later `delete` with
   * `storedBefore` earlier than now leaves it; answers its info, or null when it is absent.
   */
  touch(key: string): Promise<ObjectInfo | null>;
}

/**
 * A store whose objects the `rewrap` job may re-seal in place: the one exception to "never
 * overwrite", for bytes that hold the same content sealed with another key (see
 * shared/crypto/sealedObjectStore.ts). Readers see the old bytes or the new ones, whole.
 */
export interface RewritableObjectStore extends ImmutableObjectStore {
  /**
   * Replaces the bytes of the object `key` by `transform(stored)`, conditional on the bytes read: a
   * concurrent rewrite makes it read and transform again, and a concurrent delete wins (nothing is
   * written back). `transform` returning null leaves the object. The outcome is that of the last
   * attempt, whose `transform` call (if any) is the one that counted: `replaced`, `kept` (null), or
   * `absent` (never stored, or deleted meanwhile: `transform` was not called on that attempt).
   * `storedAt` may move forward (never back): a delete with `storedBefore` may then spare it.
   */
  rewrite(key: string, transform: (stored: Buffer) => Buffer | null): Promise<RewriteOutcome>;
}

export type RewriteOutcome = 'replaced' | 'kept' | 'absent';

/** Different bytes are stored under the key (put never overwrites): a 409 at the API. */
export class ObjectExistsError extends ConflictError {
  constructor(readonly key: string) {
    super(`different bytes are already stored under ${key}; they stay`);
  }
}

/**
 * Validates an object key and size; both checks come before any I/O. `maxBytes` is larger only for
 * the store under sealed objects, whose seal adds a fixed overhead to an object of the limit.
 */
export function checkObject(key: string, bytes: Buffer, maxBytes = MAX_OBJECT_BYTES): void {
  validateKey(key);
  if (bytes.length > maxBytes) throw new PayloadTooLargeError(maxBytes, 'the object');
}

/** Validates a list prefix: empty, or the beginning of a valid key ({@link validatePrefix}). */
export function checkPrefix(prefix: string): void {
  validatePrefix(prefix);
}

/** Pointer values are short identifiers (checkpoint ids). */
export function checkPointerValue(value: string): void {
  if (value.length === 0 || value.length > 1024 || /[\r\n]/.test(value)) {
    throw new InvalidArgumentError('pointer', 'must be 1-1024 characters on one line');
  }
}

/**
 * How old an object a publish relies on may be before the publish touches it: half the hour
 * retention spares unreferenced archive objects and snapshot parts for. A collector deletes only
 * objects older than that hour by its own clock; an object younger than this when checked would
 * have to age another half hour, by the collector's clock against the publisher's and the
 * storage's, before the publish stores its manifest. That half hour is the margin for clocks and
 * for the time a publish takes between its check and its manifest.
 */
export const TOUCH_OLDER_THAN_MS = 30 * 60 * 1000;

/** An object a publish found stored: its key, the name its answer gives it, when it was stored. */
export interface FoundObject {
  readonly key: string;
  readonly name: string;
  readonly storedAt: Date;
}

/**
 * Touches the objects of `found` stored more than {@link TOUCH_OLDER_THAN_MS} before `nowMs` (the
 * publisher's clock), `concurrency` at once; returns the names of those gone by then, sorted.
 */
export async function touchOldObjects(
  store: ImmutableObjectStore,
  found: readonly FoundObject[],
  nowMs: number,
  concurrency: number,
): Promise<string[]> {
  const old = found.filter((object) => object.storedAt.getTime() < nowMs - TOUCH_OLDER_THAN_MS);
  const gone: string[] = [];
  await forEachLimited(old, concurrency, async ({ key, name }) => {
    if ((await store.touch(key)) === null) gone.push(name);
  });
  return gone.sort();
}
