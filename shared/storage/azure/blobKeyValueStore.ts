import { createHash, randomUUID } from 'node:crypto';

import type { BlobServiceClient, BlockBlobClient, ContainerClient } from '@azure/storage-blob';

import { getOrCreate, type Lru, lru } from '../../lru';
import {
  PayloadTooLargeError,
  PreconditionFailedError,
  StorageUnavailableError,
} from '../../protocol/errors';
import { validateKey, validatePrefix } from '../../protocol/keys';
import { copyOf, ownedBytes, readAllBytes } from '../../protocol/streams';
import { casPause } from '../../retry';
import { checkConditions, checkConditionShape, conditionsHold } from '../conditions';
import { KeyedMutex } from '../keyedMutex';
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
} from '../keyValueStore';
import { decodeCursor, encodeCursor } from '../listCursor';
import {
  CONDITIONAL_WRITE_TRIES,
  isAzureError,
  isConditionFailure,
  isNotFound,
  mayHaveLanded,
  storageCall,
  writeNotConfirmed,
} from './azureErrors';
import { withoutRetries } from './clients';

/**
 * The Azure Blob implementation. Each tenant has its own container, `<base>-<first 20 hex of
 * SHA-256(tenant)>` (tenant ids are case-sensitive and may hold `.` and `_`, which container names
 * may not), created on the tenant's first write. A key is the blob name itself, so the 1024-byte
 * key limit is exactly Azure's 1024-character name limit, and one tenant can never list, read or
 * overwrite another's blobs by any key. An internal space of a tenant (e.g. `threads`) has a
 * container of its own, `<base>-<first 20 hex of SHA-256(space + "\n" + tenant)>`: a tenant id
 * has no line break, so no hashed text of a space is ever a tenant's, and the key/value API can
 * never reach it.
 *
 * ETags are Azure's: they change on every write and are never reused. Conditional writes are
 * Azure's own If-Match / If-None-Match (never `If-Match: *`, see {@link replaceExisting}). Append is
 * a compare-and-swap loop (read with ETag, write the concatenation with If-Match), serialised per
 * key within this process so that one instance does not contend with itself; other instances are
 * handled by the compare-and-swap.
 *
 * A conditional write is sent without the SDK's retries and settles its own uncertain outcome (see
 * {@link BlobKeyValueStore.conditionalUpload}): a 412 or 409 is thus always another writer's doing,
 * never the echo of this write landing on a try whose answer was lost.
 *
 * Reads are revalidated, never served stale: a value this process wrote or read last is kept (see
 * {@link KnownVersions}), and a read of it is a conditional download (`If-None-Match` its ETag):
 * Azure answers 304 without the bytes when the blob is still that version, and the kept bytes are
 * returned; otherwise it sends the current value, as on a first read. Every read is thus one
 * request and as current as a plain download, and a value read again and again is not transferred
 * again (2 MiB values included).
 */
export class BlobKeyValueStoreFactory implements KeyValueStoreFactory {
  readonly kind = 'blob';
  private readonly known: KnownVersions = lru(10_000, {
    limit: KEPT_VALUE_BYTES,
    of: (version) => version.value?.length ?? 0,
  });
  /**
   * Clients are stateless and cheap to keep; building one per request is not (each parses its URL
   * and builds its own service client): one per tenant, and one per recently used blob.
   */
  private readonly stores = lru<string, KeyValueStore>(1000);
  private readonly blobClients: BlobClients = lru(4096);
  private readonly writerClients: BlobClients = lru(4096);
  /** The same account without the SDK's retries, for conditional writes (see `withoutRetries`). */
  private readonly writer: BlobServiceClient;

  constructor(
    private readonly service: BlobServiceClient,
    private readonly baseContainer: string,
    readonly maxValueBytes: number,
    private readonly timeoutMs: number,
  ) {
    this.writer = withoutRetries(service, timeoutMs);
  }

  forTenant(tenant: string): KeyValueStore {
    return this.storeIn(tenantContainerName(this.baseContainer, tenant), { tenant });
  }

  forSpace(space: InternalSpace, tenant: string): KeyValueStore {
    return this.storeIn(spaceContainerName(this.baseContainer, space, tenant), { tenant, space });
  }

  private storeIn(container: string, metadata: Record<string, string>): KeyValueStore {
    return getOrCreate(
      this.stores,
      container,
      () =>
        new BlobKeyValueStore(
          {
            reader: this.service.getContainerClient(container),
            writer: this.writer.getContainerClient(container),
          },
          metadata,
          this.maxValueBytes,
          this.timeoutMs,
          this.known,
          { reader: this.blobClients, writer: this.writerClients },
        ),
    );
  }
}

function hashedName(baseContainer: string, text: string): string {
  return `${baseContainer}-${createHash('sha256').update(text, 'utf8').digest('hex').slice(0, 20)}`;
}

function quotedEtag(etag: string): string {
  return etag.startsWith('"') ? etag : `"${etag}"`;
}

export function tenantContainerName(baseContainer: string, tenant: string): string {
  return hashedName(baseContainer, tenant);
}

export function spaceContainerName(baseContainer: string, space: InternalSpace, tenant: string): string {
  return hashedName(baseContainer, `${space}\n${tenant}`);
}

/**
 * The last version this process saw per blob URL: its ETag and, when it was written or downloaded
 * here, its bytes (bounded in entries and in bytes, least recently used dropped). Both are hints
 * that correctness never depends on:
 * - Azure does not tell whether an unconditional upload created or replaced a blob, and the API
 *   must answer 201 or 200; with the ETag, a replace is one conditional upload on that version (the
 *   usual case: an agent rewriting its own state), and a stale one only costs the two-request path.
 *   The ETag is only ever sent as an If-Match.
 * - The bytes are returned by a read only when Azure has answered a download conditional on that
 *   ETag with 304 Not Modified (an ETag names one version of one blob: Azure changes it on every
 *   write).
 * The bytes of a write are copied before they are kept (the caller may reuse its buffer); kept
 * and downloaded bytes are handed to readers, who must not change them (see StoredValue).
 */
interface KnownVersion {
  readonly etag: string;
  readonly value: Buffer | undefined;
}
type KnownVersions = Lru<string, KnownVersion>;

/** Bytes of values kept for revalidated reads, all tenants together (per process). */
const KEPT_VALUE_BYTES = 32 * 1024 * 1024;
/** A larger value is not kept (its ETag is): it would push out many small, often-read ones. */
const KEPT_VALUE_MAX_BYTES = KEPT_VALUE_BYTES / 8;

/** Blob clients by container and blob name. */
type BlobClients = Lru<string, BlockBlobClient>;

const APPEND_MAX_ATTEMPTS = 12;
const appendLocks = new KeyedMutex();

/**
 * The blob metadata naming the conditional write that stored a version (a random id per write),
 * so that a write whose answer was lost can tell its own version from another writer's.
 */
const WRITE_ID = 'cairnwrite';

/** The conditions of one upload: on a version, or create-only. */
type UploadConditions = { readonly ifMatch: string } | { readonly ifNoneMatch: '*' };

class BlobKeyValueStore implements KeyValueStore {
  private readonly container: ContainerClient;
  private readonly writerContainer: ContainerClient;
  private readonly clients: BlobClients;
  private readonly writerClients: BlobClients;

  constructor(
    /** The container, through the retrying client and through its twin without retries. */
    containers: { readonly reader: ContainerClient; readonly writer: ContainerClient },
    /** Set on the container when this store creates it (tenant, and space when not key/value). */
    private readonly containerMetadata: Record<string, string>,
    private readonly maxValueBytes: number,
    private readonly timeoutMs: number,
    private readonly known: KnownVersions,
    clients: { readonly reader: BlobClients; readonly writer: BlobClients },
  ) {
    this.container = containers.reader;
    this.writerContainer = containers.writer;
    this.clients = clients.reader;
    this.writerClients = clients.writer;
  }

  async read(key: string): Promise<StoredValue | null> {
    const blob = this.blob(key);
    return this.call((abortSignal) => this.current(blob, abortSignal));
  }

  async head(key: string): Promise<StoredItem | null> {
    const blob = this.blob(key);
    return this.call((abortSignal) => this.properties(blob, abortSignal));
  }

  async write(key: string, value: Buffer, conditions: WriteConditions = {}): Promise<WriteResult> {
    const blob = this.blob(key);
    checkConditionShape(conditions);
    if (value.length > this.maxValueBytes) throw new PayloadTooLargeError(this.maxValueBytes, 'the value');
    return this.call(async (abortSignal) => {
      if (conditions.ifAbsent === true) {
        return this.withCurrentEtag(blob, abortSignal, () => this.create(blob, value, abortSignal));
      }
      if (conditions.ifMatch === '*') return this.replaceExisting(blob, value, abortSignal);
      const { ifMatch } = conditions;
      if (ifMatch !== undefined) {
        return this.withCurrentEtag(blob, abortSignal, () => this.replace(blob, value, ifMatch, abortSignal));
      }
      return this.overwrite(blob, value, abortSignal);
    });
  }

  async append(key: string, bytes: Buffer, conditions: WriteConditions = {}): Promise<WriteResult> {
    const blob = this.blob(key);
    checkConditionShape(conditions);
    return appendLocks.run(blob.url, () =>
      this.call(async (abortSignal) => {
        const onKept = await this.appendOnKept(blob, bytes, conditions, abortSignal);
        if (onKept !== null) return onKept;
        for (let attempt = 0; attempt < APPEND_MAX_ATTEMPTS; attempt++) {
          await casPause(attempt, abortSignal);
          const current = await this.current(blob, abortSignal);
          checkConditions(conditions, current && { etag: current.etag, size: current.value.length });
          const size = (current?.value.length ?? 0) + bytes.length;
          if (size > this.maxValueBytes)
            throw new PayloadTooLargeError(this.maxValueBytes, 'the value after the append');
          try {
            return current === null
              ? await this.create(blob, bytes, abortSignal)
              : await this.replace(
                  blob,
                  Buffer.concat([current.value, bytes]),
                  current.etag,
                  abortSignal,
                  true,
                );
          } catch (error) {
            // Another writer got in between our read and our write: read again.
            if (!(error instanceof PreconditionFailedError)) throw error;
          }
        }
        throw new StorageUnavailableError('too many concurrent writers on this key; retry the append');
      }),
    );
  }

  /**
   * The usual append, in one request: this instance holds the bytes of the version it last wrote or
   * read, so it writes the concatenation on that version (If-Match its ETag). Only when that version
   * would satisfy `conditions` and the size limit; null when there is no such version or it is no
   * longer current (412 or 404), and the caller reads the current one. A blob this instance knows
   * nothing of is most often absent (a new key, such as a checkpoint's first pending writes): the
   * append is then tried as a create-only upload, one request; a blob that exists costs that
   * request, refused, before the read.
   */
  private async appendOnKept(
    blob: BlockBlobClient,
    bytes: Buffer,
    conditions: WriteConditions,
    abortSignal: AbortSignal,
  ): Promise<WriteResult | null> {
    const kept = this.known.get(blob.url);
    if (kept === undefined && conditions.ifMatch === undefined && bytes.length <= this.maxValueBytes) {
      try {
        return await this.create(blob, bytes, abortSignal);
      } catch (error) {
        if (error instanceof PreconditionFailedError) return null;
        throw error;
      }
    }
    if (kept?.value === undefined) return null;
    if (!conditionsHold(conditions, { etag: kept.etag, size: kept.value.length })) return null;
    if (kept.value.length + bytes.length > this.maxValueBytes) return null;
    try {
      return await this.replace(blob, Buffer.concat([kept.value, bytes]), kept.etag, abortSignal, true);
    } catch (error) {
      if (error instanceof PreconditionFailedError) return null;
      throw error;
    }
  }

  async delete(key: string, conditions: Pick<WriteConditions, 'ifMatch'> = {}): Promise<boolean> {
    const blob = this.blob(key);
    const { ifMatch } = conditions;
    if (ifMatch !== undefined)
      return this.call((abortSignal) => this.deleteVersion(blob, ifMatch, abortSignal));
    return this.call(async (abortSignal) => {
      try {
        await blob.delete({ deleteSnapshots: 'include', abortSignal });
        this.remember(blob, undefined);
        return true;
      } catch (error) {
        if (isNotFound(error)) {
          this.remember(blob, undefined);
          return false;
        }
        throw error;
      }
    });
  }

  /**
   * A delete of the version `ifMatch`, without the SDK's retries (see `withoutRetries`). After an
   * answer that leaves it uncertain, it is tried again only while the blob is still that version;
   * else (the blob is gone or changed: perhaps by this very delete) it is unknown, thrown as
   * StorageUnavailableError.
   */
  private async deleteVersion(
    blob: BlockBlobClient,
    ifMatch: string,
    abortSignal: AbortSignal,
  ): Promise<boolean> {
    for (let attempt = 0; ; attempt++) {
      await casPause(attempt, abortSignal);
      try {
        await this.writerOf(blob).delete({
          deleteSnapshots: 'include',
          abortSignal,
          conditions: { ifMatch },
        });
        this.remember(blob, undefined);
        return true;
      } catch (error) {
        if (attempt > 0 || mayHaveLanded(error)) {
          if (abortSignal.aborted || !mayHaveLanded(error) || attempt + 1 >= CONDITIONAL_WRITE_TRIES) {
            throw writeNotConfirmed(error);
          }
          const now = await this.settlingRead(blob, error, abortSignal);
          if (now?.etag !== ifMatch) throw writeNotConfirmed(error);
          continue;
        }
        if (isNotFound(error)) {
          this.remember(blob, undefined);
          throw new PreconditionFailedError('the key does not exist');
        }
        if (isConditionFailure(error)) {
          const current = await this.properties(blob, abortSignal);
          throw new PreconditionFailedError('the key has changed', current?.etag);
        }
        throw error;
      }
    }
  }

  /** The keys of `listItems`' page: one listing request either way (a listing carries the details). */
  async list(options: ListOptions): Promise<ListPage> {
    const page = await this.listItems(options);
    return { keys: page.items.map((item) => item.key), cursor: page.cursor };
  }

  async listItems(options: ListOptions): Promise<ItemPage> {
    const prefix = options.prefix ?? '';
    validatePrefix(prefix);
    const continuationToken = options.cursor === undefined ? undefined : decodeCursor(options.cursor, prefix);
    return this.call(async (abortSignal) => {
      try {
        const pages = this.container
          .listBlobsFlat({ ...(prefix === '' ? {} : { prefix }), abortSignal })
          .byPage({
            maxPageSize: options.limit,
            ...(continuationToken === undefined ? {} : { continuationToken }),
          });
        const page = await pages.next();
        if (page.done === true) return { items: [], cursor: null };
        const next = page.value.continuationToken;
        return {
          items: page.value.segment.blobItems.map((item) => ({
            key: item.name,
            // A listing gives the ETag unquoted; HTTP answers (and so every other method) quote it.
            etag: quotedEtag(item.properties.etag),
            size: item.properties.contentLength ?? 0,
            modifiedAt: item.properties.lastModified,
          })),
          cursor: next === undefined || next === '' ? null : encodeCursor(prefix, next),
        };
      } catch (error) {
        if (isNotFound(error)) return { items: [], cursor: null };
        throw error;
      }
    });
  }

  /** The blob through the client without the SDK's retries: conditional writes only. */
  private writerOf(blob: BlockBlobClient): BlockBlobClient {
    return getOrCreate(this.writerClients, `${this.container.containerName}/${blob.name}`, () =>
      this.writerContainer.getBlockBlobClient(blob.name),
    );
  }

  /**
   * The blob's current version and the id of the write that stored it, read to settle a write
   * whose answer was lost; null when absent. A read that fails leaves the write unknown.
   */
  private async settlingRead(
    blob: BlockBlobClient,
    writeError: unknown,
    abortSignal: AbortSignal,
  ): Promise<{ readonly etag: string; readonly writeId: string | undefined } | null> {
    try {
      const properties = await blob.getProperties({ abortSignal });
      return { etag: properties.etag ?? '', writeId: properties.metadata?.[WRITE_ID] };
    } catch (error) {
      if (isNotFound(error)) return null;
      throw writeNotConfirmed(writeError);
    }
  }

  /**
   * One conditional upload, sent without the SDK's retries; returns the new ETag. A first answer
   * that settles it (412, 409, 404, another 4xx) is thrown as Azure gave it. After an answer that
   * leaves it uncertain (none at all, a timeout, throttling, a 5xx) the blob's properties are read:
   * - the version carries this write's id (metadata {@link WRITE_ID}): it landed; its ETag is
   *   returned;
   * - the blob is still the version the write was conditioned on (still absent, for a create): it
   *   has not landed, and is tried again (the same id), at most {@link CONDITIONAL_WRITE_TRIES}
   *   times;
   * - anything else, or a read that fails: it may have landed and been replaced since; thrown as
   *   StorageUnavailableError (an unknown outcome, which the caller settles or answers 503).
   * A later try answered 412, 409 or 404 is settled the same way (the earlier try may have landed
   * after the read): its own version is success, any other is unknown, never a lost race.
   */
  private async conditionalUpload(
    blob: BlockBlobClient,
    value: Buffer,
    conditions: UploadConditions,
    abortSignal: AbortSignal,
  ): Promise<string> {
    const writer = this.writerOf(blob);
    const writeId = randomUUID();
    for (let attempt = 0; ; attempt++) {
      await casPause(attempt, abortSignal);
      try {
        const response = await writer.upload(value, value.length, {
          conditions,
          metadata: { [WRITE_ID]: writeId },
          abortSignal,
        });
        return response.etag ?? '';
      } catch (error) {
        if (attempt === 0 && !mayHaveLanded(error)) throw error;
        if (abortSignal.aborted) throw writeNotConfirmed(error);
        const now = await this.settlingRead(blob, error, abortSignal);
        if (now !== null && now.writeId === writeId) return now.etag;
        const unchanged = 'ifMatch' in conditions ? now?.etag === conditions.ifMatch : now === null;
        if (!unchanged || !mayHaveLanded(error) || attempt + 1 >= CONDITIONAL_WRITE_TRIES) {
          throw writeNotConfirmed(error);
        }
      }
    }
  }

  private blob(key: string): BlockBlobClient {
    validateKey(key);
    // Container names cannot contain "/", so the pair is unambiguous.
    return getOrCreate(this.clients, `${this.container.containerName}/${key}`, () =>
      this.container.getBlockBlobClient(key),
    );
  }

  /**
   * Records the version just seen: its ETag, and its bytes when given and small enough to keep
   * (`written`: the caller's buffer, so a copy is kept; else the bytes themselves when they fill
   * their memory alone, a copy when they are a view of a larger network buffer). Without bytes,
   * those already kept under that very ETag stay.
   */
  private remember(
    blob: BlockBlobClient,
    etag: string | undefined,
    bytes?: { readonly value: Buffer; readonly written: boolean },
  ): void {
    if (etag === undefined || etag === '') {
      this.known.delete(blob.url);
      return;
    }
    let value: Buffer | undefined;
    if (bytes === undefined) {
      const kept = this.known.get(blob.url);
      if (kept?.etag === etag) value = kept.value;
    } else if (bytes.value.length <= KEPT_VALUE_MAX_BYTES) {
      value = bytes.written ? copyOf(bytes.value) : ownedBytes(bytes.value);
    }
    this.known.set(blob.url, { etag, value });
  }

  private call<T>(operation: (abortSignal: AbortSignal) => Promise<T>): Promise<T> {
    return storageCall(this.timeoutMs, operation);
  }

  /** The current value: the kept bytes when Azure confirms they are still current (see the class comment). */
  private async current(blob: BlockBlobClient, abortSignal: AbortSignal): Promise<StoredValue | null> {
    const kept = this.known.get(blob.url);
    if (kept?.value === undefined) return this.download(blob, abortSignal);
    try {
      return await this.download(blob, abortSignal, kept.etag);
    } catch (error) {
      // 304 Not Modified: the blob is still the version whose bytes are kept.
      if (!isAzureError(error, 304)) throw error;
      return { value: kept.value, etag: kept.etag };
    }
  }

  /** The current value, or 304 (thrown) when it is still the version `ifNoneMatch`. */
  private async download(
    blob: BlockBlobClient,
    abortSignal: AbortSignal,
    ifNoneMatch?: string,
  ): Promise<StoredValue | null> {
    try {
      const response = await blob.download(0, undefined, {
        abortSignal,
        ...(ifNoneMatch === undefined ? {} : { conditions: { ifNoneMatch } }),
      });
      const value = await readAllBytes(response.readableStreamBody);
      this.remember(blob, response.etag, { value, written: false });
      return { value, etag: response.etag ?? '' };
    } catch (error) {
      if (!isNotFound(error)) throw error;
      this.remember(blob, undefined);
      return null;
    }
  }

  private async properties(blob: BlockBlobClient, abortSignal: AbortSignal): Promise<StoredItem | null> {
    try {
      const properties = await blob.getProperties({ abortSignal });
      this.remember(blob, properties.etag);
      return { etag: properties.etag ?? '', size: properties.contentLength ?? 0 };
    } catch (error) {
      if (!isNotFound(error)) throw error;
      this.remember(blob, undefined);
      return null;
    }
  }

  /** Runs a conditional write; a lost one is reported with the current ETag (a 412 answer carries it). */
  private async withCurrentEtag(
    blob: BlockBlobClient,
    abortSignal: AbortSignal,
    write: () => Promise<WriteResult>,
  ): Promise<WriteResult> {
    try {
      return await write();
    } catch (error) {
      if (!(error instanceof PreconditionFailedError)) throw error;
      const current = await this.properties(blob, abortSignal);
      throw new PreconditionFailedError(error.message, current?.etag);
    }
  }

  /**
   * An unconditional write that still tells created from replaced (Azure's upload does not): on the
   * version this process last saw (one request), else create-only, else a plain overwrite.
   */
  private async overwrite(
    blob: BlockBlobClient,
    value: Buffer,
    abortSignal: AbortSignal,
  ): Promise<WriteResult> {
    const hint = this.known.get(blob.url)?.etag;
    if (hint !== undefined) {
      try {
        return await this.replace(blob, value, hint, abortSignal);
      } catch (error) {
        if (!(error instanceof PreconditionFailedError)) throw error;
      }
    }
    try {
      return await this.create(blob, value, abortSignal);
    } catch (error) {
      if (!(error instanceof PreconditionFailedError)) throw error;
    }
    const response = await blob.upload(value, value.length, { abortSignal });
    this.remember(blob, response.etag, { value, written: true });
    return { etag: response.etag ?? '', size: value.length, created: false };
  }

  /** Create-only upload; makes the tenant's container on its first write. */
  private async create(blob: BlockBlobClient, value: Buffer, abortSignal: AbortSignal): Promise<WriteResult> {
    for (let attempt = 0; ; attempt++) {
      try {
        const etag = await this.conditionalUpload(blob, value, { ifNoneMatch: '*' }, abortSignal);
        this.remember(blob, etag, { value, written: true });
        return { etag, size: value.length, created: true };
      } catch (error) {
        if (isConditionFailure(error)) throw new PreconditionFailedError('the key exists');
        if (isNotFound(error) && attempt === 0) {
          await this.container.createIfNotExists({ metadata: this.containerMetadata, abortSignal });
          continue;
        }
        throw error;
      }
    }
  }

  /**
   * If-Match: * by way of the current ETag. Azurite ignores `If-Match: *` on an absent blob and
   * creates it (Azure answers 412), so Cairn never sends it: it reads the version, then replaces
   * exactly that version, and reads again if another writer got in between.
   */
  private async replaceExisting(
    blob: BlockBlobClient,
    value: Buffer,
    abortSignal: AbortSignal,
  ): Promise<WriteResult> {
    for (let attempt = 0; attempt < 4; attempt++) {
      const current = await this.properties(blob, abortSignal);
      if (current === null) throw new PreconditionFailedError('the key does not exist');
      try {
        return await this.replace(blob, value, current.etag, abortSignal);
      } catch (error) {
        if (!(error instanceof PreconditionFailedError)) throw error;
      }
    }
    throw new StorageUnavailableError('the key is changing too fast to write; retry');
  }

  /**
   * Upload only over the version `ifMatch` (a concrete ETag, never `*`). `ours`: `value` is a buffer
   * this store made (an append's concatenation), which the caller cannot change: kept without a
   * copy when it fills its memory alone.
   */
  private async replace(
    blob: BlockBlobClient,
    value: Buffer,
    ifMatch: string,
    abortSignal: AbortSignal,
    ours = false,
  ): Promise<WriteResult> {
    try {
      const etag = await this.conditionalUpload(blob, value, { ifMatch }, abortSignal);
      this.remember(blob, etag, { value, written: !ours });
      return { etag, size: value.length, created: false };
    } catch (error) {
      // 404: the blob (or the tenant's container) does not exist, so no version matches.
      if (isNotFound(error)) throw new PreconditionFailedError('the key does not exist');
      if (isConditionFailure(error)) throw new PreconditionFailedError('the key has changed');
      throw error;
    }
  }
}
