import type { ContainerClient } from '@azure/storage-blob';

import {
  digestOfSnapshotName,
  type MemorySnapshotStore,
  snapshotName,
  snapshotTenantDir,
} from '../../memory/searchSnapshot';
import { readAllBytes } from '../../protocol/streams';
import { isNotFound, storageCall } from './azureErrors';

/** Blob names of memory snapshots start with this, in the container named exactly CAIRN_BLOB_CONTAINER. */
export const MEMORY_SNAPSHOT_PREFIX = 'memory-snapshots/';

/**
 * Memory search snapshots (shared/memory/searchSnapshot.ts) as block blobs
 * `memory-snapshots/<32 hex digits of SHA-256(tenant)>/<subtree digest or root>`: one Put Blob per
 * write (Azure stores a blob whole or not at all, so a reader never sees part of one), replaced in
 * place; the container is created on the first write. Every call has the storage deadline, and a
 * fault is StorageUnavailableError (the search index then reads the rows instead).
 */
export class BlobMemorySnapshots implements MemorySnapshotStore {
  constructor(
    private readonly container: ContainerClient,
    private readonly timeoutMs: number,
  ) {}

  async read(tenant: string, digest: string, maxBytes: number): Promise<Buffer | null> {
    return storageCall(this.timeoutMs, async (abortSignal) => {
      try {
        const response = await this.blob(tenant, digest).download(0, undefined, { abortSignal });
        if ((response.contentLength ?? 0) > maxBytes) {
          response.readableStreamBody?.resume();
          return null;
        }
        return await readAllBytes(response.readableStreamBody, response.contentLength);
      } catch (error) {
        if (isNotFound(error)) return null;
        throw error;
      }
    });
  }

  async write(tenant: string, digest: string, bytes: Buffer): Promise<void> {
    await storageCall(this.timeoutMs, async (abortSignal) => {
      const blob = this.blob(tenant, digest);
      try {
        await blob.upload(bytes, bytes.length, { abortSignal });
      } catch (error) {
        if (!isNotFound(error)) throw error;
        await this.container.createIfNotExists({ abortSignal });
        await blob.upload(bytes, bytes.length, { abortSignal });
      }
    });
  }

  async delete(tenant: string, digest: string): Promise<void> {
    await storageCall(this.timeoutMs, async (abortSignal) => {
      try {
        await this.blob(tenant, digest).deleteIfExists({ abortSignal });
      } catch (error) {
        if (!isNotFound(error)) throw error;
      }
    });
  }

  async list(tenant: string): Promise<{ digest: string; storedAt: Date }[]> {
    const prefix = `${MEMORY_SNAPSHOT_PREFIX}${snapshotTenantDir(tenant)}/`;
    return storageCall(this.timeoutMs, async (abortSignal) => {
      const found: { digest: string; storedAt: Date }[] = [];
      try {
        for await (const blob of this.container.listBlobsFlat({ prefix, abortSignal })) {
          const digest = digestOfSnapshotName(blob.name.slice(prefix.length));
          if (digest !== null) found.push({ digest, storedAt: blob.properties.lastModified });
        }
      } catch (error) {
        if (!isNotFound(error)) throw error;
      }
      return found;
    });
  }

  private blob(tenant: string, digest: string) {
    return this.container.getBlockBlobClient(
      `${MEMORY_SNAPSHOT_PREFIX}${snapshotTenantDir(tenant)}/${snapshotName(digest)}`,
    );
  }
}
