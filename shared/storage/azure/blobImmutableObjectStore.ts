import type { BlockBlobClient, ContainerClient } from '@azure/storage-blob';

import { StorageUnavailableError } from '../../protocol/errors';
import { validateKey } from '../../protocol/keys';
import { readAllBytes } from '../../protocol/streams';
import {
  checkObject,
  checkPointerValue,
  checkPrefix,
  type DeleteOptions,
  MAX_OBJECT_BYTES,
  ObjectExistsError,
  type ObjectInfo,
  type PutResult,
  type RewritableObjectStore,
  type RewriteOutcome,
  type SwapResult,
} from '../immutableObjectStore';
import {
  CONDITIONAL_WRITE_TRIES,
  isAzureError,
  isConditionFailure,
  isNotFound,
  mayHaveLanded,
  storageCall,
  writeNotConfirmed,
} from './azureErrors';
import { containerWithoutRetries } from './clients';

/** Azure's largest list page: 2,000 blocks are checked with one request. */
const LIST_PAGE_SIZE = 5000;
/** Rewrites lost to a concurrent rewrite before giving up (objects only change by rewrap). */
const REWRITE_ATTEMPTS = 5;
/** Touches lost to a concurrent change of the blob (a rewrite, another touch) before giving up. */
const TOUCH_ATTEMPTS = 5;

/**
 * The Azure Blob implementation: key `k` is the blob `<namePrefix>k` in one container (CAIRN_BLOB_CONTAINER
 * itself, names under `sessions/`), created on the first write.
 *
 * - `put` is one create-only upload (`If-None-Match: *`). Azure answers 409 BlobAlreadyExists (or
 *   412) when the blob exists; then the stored bytes are read and compared, so that a retry of the
 *   same bytes succeeds and different bytes are refused.
 * - A pointer moves by If-Match on the ETag of the version whose value was compared (never
 *   `If-Match: *`, which Azurite ignores on an absent blob); its first value is create-only. A move
 *   is sent without the SDK's retries (a retry of a move that landed would meet 412/409 caused by
 *   that very move and read as another writer's); after an answer that leaves it uncertain the
 *   pointer is read: holding the new value (absent, for a removal) -> moved; still the version
 *   moved from -> tried again; anything else -> StorageUnavailableError (503).
 * - Uploads send no content type: Azure stores `application/octet-stream` by default, and the
 *   routes set their own (one header less for the storage to handle per 64 KiB block).
 * - `storedAt` is the blob's Last-Modified (blobs are never rewritten), to the second. `delete` with
 *   `storedBefore` is one conditional delete (`If-Unmodified-Since`), so a blob stored after the
 *   check cannot be deleted by it. A pointer is removed by a delete on the ETag it was compared at.
 * - `touch` moves Last-Modified by setting the blob's metadata: it reads the properties (metadata
 *   and ETag), then sets the same metadata (Set Blob Metadata replaces all of it) with If-Match on
 *   that ETag, so a concurrent rewrite is not undone (it reads again); a delete wins (404: null).
 *   Two requests; the bytes and the size stay (the ETag changes).
 * - Every operation has the CAIRN_STORAGE_TIMEOUT_MS deadline and Azure errors are translated once:
 *   404 is absent, timeouts and 5xx are StorageUnavailableError (503), never absent.
 * - `rewrite` (the rewrap job's re-seal) uploads with If-Match on the ETag of the bytes it
 *   transformed: a concurrent rewrite makes it start again, a concurrent delete wins (404). The
 *   blob's Last-Modified moves to the rewrite, so `storedAt` moves forward.
 */
export class BlobImmutableObjectStore implements RewritableObjectStore {
  constructor(
    private readonly container: ContainerClient,
    private readonly namePrefix: string,
    private readonly timeoutMs: number,
    /** Tests make it small to prove that listing follows continuations. */
    private readonly listPageSize = LIST_PAGE_SIZE,
    private readonly maxObjectBytes = MAX_OBJECT_BYTES,
  ) {
    this.writer = containerWithoutRetries(container, timeoutMs);
  }

  /** The container without the SDK's retries, for pointer moves. */
  private readonly writer: ContainerClient;

  async put(key: string, bytes: Buffer): Promise<PutResult> {
    checkObject(key, bytes, this.maxObjectBytes);
    const blob = this.blob(key);
    return this.call(async (abortSignal) => {
      if (await this.create(blob, bytes, abortSignal)) return { created: true };
      const stored = await this.download(blob, abortSignal);
      if (stored === null || !stored.value.equals(bytes)) throw new ObjectExistsError(key);
      return { created: false };
    });
  }

  async get(key: string): Promise<Buffer | null> {
    const blob = this.blob(key);
    return this.call(async (abortSignal) => (await this.download(blob, abortSignal))?.value ?? null);
  }

  async head(key: string): Promise<ObjectInfo | null> {
    const blob = this.blob(key);
    return this.call(async (abortSignal) => {
      try {
        const properties = await blob.getProperties({ abortSignal });
        return { key, size: properties.contentLength ?? 0, storedAt: properties.lastModified ?? new Date(0) };
      } catch (error) {
        if (isNotFound(error)) return null;
        throw error;
      }
    });
  }

  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    checkPrefix(prefix);
    let continuationToken: string | undefined;
    do {
      const page = await this.call(async (abortSignal) => {
        try {
          const pages = this.container
            .listBlobsFlat({ prefix: this.namePrefix + prefix, abortSignal })
            .byPage({
              maxPageSize: this.listPageSize,
              ...(continuationToken === undefined ? {} : { continuationToken }),
            });
          const next = await pages.next();
          return next.done === true ? null : next.value;
        } catch (error) {
          if (isNotFound(error)) return null;
          throw error;
        }
      });
      if (page === null) return;
      for (const item of page.segment.blobItems) {
        yield {
          key: item.name.slice(this.namePrefix.length),
          size: item.properties.contentLength ?? 0,
          storedAt: item.properties.lastModified,
        };
      }
      continuationToken = page.continuationToken === '' ? undefined : page.continuationToken;
    } while (continuationToken !== undefined);
  }

  async readPointer(key: string): Promise<string | null> {
    const blob = this.blob(key);
    return this.call(
      async (abortSignal) => (await this.download(blob, abortSignal))?.value.toString('utf8') ?? null,
    );
  }

  async swapPointer(key: string, expected: string | null, next: string | null): Promise<SwapResult> {
    if (next !== null) checkPointerValue(next);
    const blob = this.blob(key);
    return this.call(async (abortSignal) => {
      const current = await this.download(blob, abortSignal);
      const currentValue = current?.value.toString('utf8') ?? null;
      if (currentValue !== expected) return { swapped: false, current: currentValue };
      if (next === null && current === null) return { swapped: true };
      if (await this.movePointer(key, current?.etag ?? null, next, abortSignal)) return { swapped: true };
      // Another writer moved it between our read and our write: tell the caller where it is now.
      const now = await this.download(blob, abortSignal);
      return { swapped: false, current: now?.value.toString('utf8') ?? null };
    });
  }

  /**
   * Moves the pointer from the version `etag` (null: absent) to `next` (null: removed); false when
   * another writer changed it first. Sent without the SDK's retries; an uncertain answer is settled
   * by reading the pointer back (see the class comment).
   */
  private async movePointer(
    key: string,
    etag: string | null,
    next: string | null,
    abortSignal: AbortSignal,
  ): Promise<boolean> {
    const writer = this.writer.getBlockBlobClient(this.namePrefix + key);
    const bytes = next === null ? null : Buffer.from(next, 'utf8');
    let madeContainer = false;
    for (let attempt = 0; ; attempt++) {
      try {
        if (bytes === null) await writer.delete({ conditions: { ifMatch: etag ?? '' }, abortSignal });
        else
          await writer.upload(bytes, bytes.length, {
            conditions: etag === null ? { ifNoneMatch: '*' } : { ifMatch: etag },
            abortSignal,
          });
        return true;
      } catch (error) {
        if (attempt > 0 || mayHaveLanded(error)) {
          if (abortSignal.aborted || !mayHaveLanded(error) || attempt + 1 >= CONDITIONAL_WRITE_TRIES) {
            throw writeNotConfirmed(error);
          }
          const now = await this.download(this.blob(key), abortSignal);
          if ((now?.value.toString('utf8') ?? null) === next) return true;
          if ((now?.etag ?? null) !== etag) throw writeNotConfirmed(error);
          continue;
        }
        if (isConditionFailure(error)) return false;
        if (isNotFound(error)) {
          // The container is made on the first write (a first value: nothing to be conditioned on).
          if (etag !== null) return false;
          if (madeContainer) throw error;
          await this.container.createIfNotExists({ abortSignal });
          madeContainer = true;
          attempt = -1;
          continue;
        }
        throw error;
      }
    }
  }

  async delete(key: string, options: DeleteOptions = {}): Promise<boolean> {
    const blob = this.blob(key);
    const { storedBefore } = options;
    return this.call(async (abortSignal) => {
      try {
        await blob.delete({
          abortSignal,
          ...(storedBefore === undefined ? {} : { conditions: { ifUnmodifiedSince: storedBefore } }),
        });
        return true;
      } catch (error) {
        // Absent (blob or container), or stored at or after `storedBefore` (412): it stays.
        if (isNotFound(error) || isAzureError(error, 412)) return false;
        throw error;
      }
    });
  }

  async touch(key: string): Promise<ObjectInfo | null> {
    const blob = this.blob(key);
    for (let attempt = 0; attempt < TOUCH_ATTEMPTS; attempt++) {
      const outcome = await this.call(async (abortSignal): Promise<ObjectInfo | 'absent' | null> => {
        try {
          const properties = await blob.getProperties({ abortSignal });
          const response = await blob.setMetadata(properties.metadata ?? {}, {
            conditions: { ifMatch: properties.etag ?? '' },
            abortSignal,
          });
          return {
            key,
            size: properties.contentLength ?? 0,
            storedAt: response.lastModified ?? new Date(),
          };
        } catch (error) {
          if (isNotFound(error)) return 'absent';
          // Changed (or deleted) between the read and the write: the next attempt reads it again.
          if (isConditionFailure(error)) return null;
          throw error;
        }
      });
      if (outcome === 'absent') return null;
      if (outcome !== null) return outcome;
    }
    throw new StorageUnavailableError(`${key} kept changing while it was touched; retry`);
  }

  async rewrite(key: string, transform: (stored: Buffer) => Buffer | null): Promise<RewriteOutcome> {
    const blob = this.blob(key);
    for (let attempt = 0; attempt < REWRITE_ATTEMPTS; attempt++) {
      const outcome = await this.call(async (abortSignal): Promise<RewriteOutcome | null> => {
        const stored = await this.download(blob, abortSignal);
        if (stored === null) return 'absent';
        const next = transform(stored.value);
        if (next === null) return 'kept';
        // Changed or deleted meanwhile: the next attempt reads it again (a deleted one stays so).
        return (await this.replaceAt(blob, stored.etag, next, abortSignal)) ? 'replaced' : null;
      });
      if (outcome !== null) return outcome;
    }
    throw new StorageUnavailableError(`${key} kept changing while it was rewritten; retry`);
  }

  private blob(key: string): BlockBlobClient {
    validateKey(key);
    return this.container.getBlockBlobClient(this.namePrefix + key);
  }

  private call<T>(operation: (abortSignal: AbortSignal) => Promise<T>): Promise<T> {
    return storageCall(this.timeoutMs, operation);
  }

  /** Upload on the version `etag` names; false when the blob changed or was deleted since. */
  private async replaceAt(
    blob: BlockBlobClient,
    etag: string,
    bytes: Buffer,
    abortSignal: AbortSignal,
  ): Promise<boolean> {
    try {
      await blob.upload(bytes, bytes.length, { conditions: { ifMatch: etag }, abortSignal });
      return true;
    } catch (error) {
      if (isConditionFailure(error) || isNotFound(error)) return false;
      throw error;
    }
  }

  /** Create-only upload; false when the blob exists. Makes the container on its first write. */
  private async create(blob: BlockBlobClient, bytes: Buffer, abortSignal: AbortSignal): Promise<boolean> {
    for (let attempt = 0; ; attempt++) {
      try {
        await blob.upload(bytes, bytes.length, {
          conditions: { ifNoneMatch: '*' },
          abortSignal,
        });
        return true;
      } catch (error) {
        if (isConditionFailure(error)) return false;
        if (isNotFound(error) && attempt === 0) {
          await this.container.createIfNotExists({ abortSignal });
          continue;
        }
        throw error;
      }
    }
  }

  private async download(
    blob: BlockBlobClient,
    abortSignal: AbortSignal,
  ): Promise<{ value: Buffer; etag: string } | null> {
    try {
      const response = await blob.download(0, undefined, { abortSignal });
      return { value: await readAllBytes(response.readableStreamBody), etag: response.etag ?? '' };
    } catch (error) {
      if (isNotFound(error)) return null;
      throw error;
    }
  }
}
