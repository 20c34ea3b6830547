import {
  IntegrityError,
  PayloadTooLargeError,
  PreconditionFailedError,
  StorageUnavailableError,
} from '../protocol/errors';
import { casPause } from '../retry';
import { checkConditions, checkConditionShape } from '../storage/conditions';
import { KeyedMutex } from '../storage/keyedMutex';
import type {
  InternalSpace,
  ItemPage,
  KeyValueStore,
  KeyValueStoreFactory,
  ListOptions,
  ListPage,
  StoredItem,
  StoredValue,
  WriteConditions,
  WriteResult,
} from '../storage/keyValueStore';
import type { SealingCodec } from './encryption';
import { RollbackWatch } from './rollbackWatch';
import { plainSize, SEAL_OVERHEAD } from './sealedFormat';
import { sealsTenant, type TenantPolicy } from './tenantPolicy';
import type { ValuePlace } from './valueCodec';

/**
 * Key/value values sealed at rest for the tenants whose policy asks for it (`CAIRN_ENCRYPT_TENANTS`:
 * a list of tenant ids, or `*` for every tenant). Their bytes are the caller's own format, so
 * sealing is off unless asked for. A sealed tenant's whole key/value space is sealed: the values of
 * `/api/kv` and everything Cairn keeps there for it (poll state, chat cursors, promises, the
 * interaction log, migrated files).
 *
 * Each stored value is one sealed value (see sealedFormat.ts) bound to (tenant, `kv`, key): moved
 * to another key or tenant it fails to open (`integrity_error`), as does a stored value that is not
 * sealed. The store keeps the key/value contract (keyValueStore.ts) with plain sizes and limits:
 * - ETags are the backend's (a sealed value's ETag changes on every write, as before);
 * - `write` seals and writes, conditions as given;
 * - `append` is a compare-and-swap loop on the whole value (read, open, add, seal, write
 *   conditional on the version read): every concurrent append is kept, each contiguous, because
 *   each one lands on exactly the version it extended. It moves the whole value, as the Blob
 *   backend's own append does;
 * - `head` answers the plain size from the stored size (the overhead is the same for every value).
 *
 * The seal does not bind a value to its version: an older sealed value of the same key opens. A
 * value put back at the storage level in place of a newer one that this process saw is detected
 * by order instead, and refused as `integrity_error` (see rollbackWatch.ts for what is and is not).
 */

const APPEND_ATTEMPTS = 12;
const appendLocks = new KeyedMutex();
/** One per process: every store object of a tenant's space sees what the others saw. */
const rollbacks = new RollbackWatch();

export class SealingKeyValueStoreFactory implements KeyValueStoreFactory {
  readonly kind: 'local' | 'blob';
  readonly maxValueBytes: number;

  /**
   * `plain` serves every space that is not sealed; `roomy` is the same backend with a limit
   * {@link SEAL_OVERHEAD} bytes larger, so that a sealed value of the plain limit still fits.
   */
  constructor(
    private readonly plain: KeyValueStoreFactory,
    private readonly roomy: KeyValueStoreFactory,
    private readonly codec: SealingCodec,
    private readonly policy: TenantPolicy,
  ) {
    this.kind = plain.kind;
    this.maxValueBytes = plain.maxValueBytes;
  }

  forTenant(tenant: string): KeyValueStore {
    if (!this.codec.encrypts || !sealsTenant(this.policy, tenant)) return this.plain.forTenant(tenant);
    return new SealedKeyValueStore(this.roomy.forTenant(tenant), tenant, this.codec, this.maxValueBytes);
  }

  /** Internal spaces seal what they need themselves (the thread store seals its own values). */
  forSpace(space: InternalSpace, tenant: string): KeyValueStore {
    return this.plain.forSpace(space, tenant);
  }
}

export class SealedKeyValueStore implements KeyValueStore {
  constructor(
    private readonly raw: KeyValueStore,
    private readonly tenant: string,
    private readonly codec: SealingCodec,
    private readonly maxValueBytes: number,
  ) {}

  async read(key: string): Promise<StoredValue | null> {
    await this.codec.prepareOwnBytes(this.tenant);
    const start = rollbacks.start();
    const stored = await this.raw.read(key);
    if (stored === null) {
      rollbacks.observed(this.watched(key), start, null);
      return null;
    }
    const value = this.codec.open(stored.value, this.place(key));
    rollbacks.observed(this.watched(key), start, stored.value);
    return { value, etag: stored.etag };
  }

  async head(key: string): Promise<StoredItem | null> {
    const item = await this.raw.head(key);
    if (item === null) return null;
    if (item.size < SEAL_OVERHEAD) {
      throw new IntegrityError(`the stored kv value at ${key} is not sealed, but this tenant's values are`);
    }
    return { etag: item.etag, size: item.size - SEAL_OVERHEAD };
  }

  async write(key: string, value: Buffer, conditions: WriteConditions = {}): Promise<WriteResult> {
    checkConditionShape(conditions);
    if (value.length > this.maxValueBytes) throw new PayloadTooLargeError(this.maxValueBytes, 'the value');
    await this.codec.prepareOwnBytes(this.tenant);
    const sealed = this.codec.seal(value, this.place(key));
    const start = rollbacks.start();
    const written = await this.raw.write(key, sealed, conditions);
    rollbacks.observed(this.watched(key), start, sealed);
    return { etag: written.etag, size: value.length, created: written.created };
  }

  async append(key: string, bytes: Buffer, conditions: WriteConditions = {}): Promise<WriteResult> {
    checkConditionShape(conditions);
    await this.codec.prepareOwnBytes(this.tenant);
    const place = this.place(key);
    // One append at a time per key in this process, so that it does not contend with itself;
    // other instances are handled by the compare-and-swap.
    return appendLocks.run(`${this.tenant}\n${key}`, async () => {
      for (let attempt = 0; attempt < APPEND_ATTEMPTS; attempt++) {
        await casPause(attempt);
        const start = rollbacks.start();
        const current = await this.raw.read(key);
        const plain = current === null ? Buffer.alloc(0) : this.codec.open(current.value, place);
        rollbacks.observed(this.watched(key), start, current?.value ?? null);
        checkConditions(conditions, current && { etag: current.etag, size: plain.length });
        const size = plain.length + bytes.length;
        if (size > this.maxValueBytes) {
          throw new PayloadTooLargeError(this.maxValueBytes, 'the value after the append');
        }
        const sealed = this.codec.seal(Buffer.concat([plain, bytes]), place);
        try {
          const writing = rollbacks.start();
          const written = await this.raw.write(
            key,
            sealed,
            current === null ? { ifAbsent: true } : { ifMatch: current.etag },
          );
          rollbacks.observed(this.watched(key), writing, sealed);
          return { etag: written.etag, size, created: current === null };
        } catch (error) {
          if (!(error instanceof PreconditionFailedError)) throw error;
        }
      }
      throw new StorageUnavailableError('the value is changing too fast to append to; retry');
    });
  }

  async delete(key: string, conditions?: Pick<WriteConditions, 'ifMatch'>): Promise<boolean> {
    const start = rollbacks.start();
    const deleted = await this.raw.delete(key, conditions);
    rollbacks.observed(this.watched(key), start, null);
    return deleted;
  }

  list(options: ListOptions): Promise<ListPage> {
    return this.raw.list(options);
  }

  /** Each item as `head` answers it: the size of the plain value (the stored size less the seal). */
  async listItems(options: ListOptions): Promise<ItemPage> {
    const page = await this.raw.listItems(options);
    return {
      ...page,
      items: page.items.map((item) => ({ ...item, size: plainSize(item.size) })),
    };
  }

  /** The key of `key` in the process's rollback watch. */
  private watched(key: string): string {
    return `${this.tenant}\n${key}`;
  }

  private place(key: string): ValuePlace {
    return { tenant: this.tenant, kind: 'kv', key };
  }
}
