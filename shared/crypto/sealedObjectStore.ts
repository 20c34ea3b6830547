import { StorageUnavailableError } from '../protocol/errors';
import {
  checkObject,
  type DeleteOptions,
  type ImmutableObjectStore,
  ObjectExistsError,
  type ObjectInfo,
  type PutResult,
  type SwapResult,
} from '../storage/immutableObjectStore';
import type { SealingCodec } from './encryption';
import { plainSize } from './sealedFormat';
import type { ValuePlace } from './valueCodec';

/**
 * One tenant's immutable objects sealed at rest (session archives of the tenants whose policy asks
 * for it, `CAIRN_ENCRYPT_TENANTS`): every object is one sealed value (sealedFormat.ts) bound to
 * (tenant, `kind`, key), so bytes moved to another key or tenant, changed, or stored in plain text
 * fail to open (`integrity_error`). Pointers (checkpoint ids) are names and stay plain.
 *
 * The store keeps the immutable object contract (immutableObjectStore.ts) in plain terms:
 * - sizes are the plain sizes (the overhead is the same for every object: `head` and `list` answer
 *   the stored size less the 66 bytes of the seal), and the 2 MiB limit is the plain size: the store
 *   underneath takes objects that much larger;
 * - `put` of the same bytes again is an idempotent retry although every seal differs (a fresh IV):
 *   when the key is taken, the stored object is opened and compared with the bytes given, so equal
 *   content is `created: false` and other content is refused ({@link ObjectExistsError}) as before.
 *   That costs reads only on a retry or a race (the store underneath compares the sealed bytes,
 *   which differ, then this store reads and opens them), never on a first write;
 * - of N concurrent puts of one absent key exactly one creates it: the store underneath decides.
 */
const PUT_ATTEMPTS = 3;

export class SealedObjectStore implements ImmutableObjectStore {
  constructor(
    private readonly raw: ImmutableObjectStore,
    private readonly tenant: string,
    private readonly codec: SealingCodec,
    /** What the objects are (`archive.object`): part of each object's place. */
    private readonly kind: string,
  ) {}

  async put(key: string, bytes: Buffer): Promise<PutResult> {
    checkObject(key, bytes);
    await this.codec.prepareOwnBytes(this.tenant);
    const place = this.place(key);
    for (let attempt = 0; attempt < PUT_ATTEMPTS; attempt++) {
      try {
        return await this.raw.put(key, this.codec.seal(bytes, place));
      } catch (error) {
        if (!(error instanceof ObjectExistsError)) throw error;
        const stored = await this.raw.get(key);
        // Deleted between the put and the read: the key is free again, put once more.
        if (stored === null) continue;
        if (this.codec.open(stored, place).equals(bytes)) return { created: false };
        throw error;
      }
    }
    throw new StorageUnavailableError(`${key} keeps being stored and deleted; retry`);
  }

  async get(key: string): Promise<Buffer | null> {
    await this.codec.prepareOwnBytes(this.tenant);
    const stored = await this.raw.get(key);
    return stored === null ? null : this.codec.open(stored, this.place(key));
  }

  /**
   * The object with its plain size, as `list` gives it. An object too short to be sealed has size 0
   * (no block or tail has that size, so a publish counts it missing; a read of it is
   * `integrity_error`).
   */
  async head(key: string): Promise<ObjectInfo | null> {
    const info = await this.raw.head(key);
    return info === null ? null : { ...info, size: plainSize(info.size) };
  }

  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    for await (const info of this.raw.list(prefix)) yield { ...info, size: plainSize(info.size) };
  }

  readPointer(key: string): Promise<string | null> {
    return this.raw.readPointer(key);
  }

  swapPointer(key: string, expected: string | null, next: string | null): Promise<SwapResult> {
    return this.raw.swapPointer(key, expected, next);
  }

  delete(key: string, options?: DeleteOptions): Promise<boolean> {
    return this.raw.delete(key, options);
  }

  /** Touches the sealed object (its seal is unchanged); its plain size, as `head` gives it. */
  async touch(key: string): Promise<ObjectInfo | null> {
    const info = await this.raw.touch(key);
    return info === null ? null : { ...info, size: plainSize(info.size) };
  }

  private place(key: string): ValuePlace {
    return { tenant: this.tenant, kind: this.kind, key };
  }
}
