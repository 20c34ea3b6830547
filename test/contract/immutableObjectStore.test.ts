import { randomBytes, randomUUID } from 'node:crypto';
import { rm } from 'node:fs/promises';
import path from 'node:path';

import { BlobServiceClient, StorageSharedKeyCredential } from '@azure/storage-blob';
import { describe, expect, it } from 'vitest';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import { Encryption, type SealingCodec } from '../../shared/crypto/encryption';
import { SEAL_OVERHEAD } from '../../shared/crypto/sealedFormat';
import { SealedObjectStore } from '../../shared/crypto/sealedObjectStore';
import { StorageUnavailableError } from '../../shared/protocol/errors';
import { BlobImmutableObjectStore } from '../../shared/storage/azure/blobImmutableObjectStore';
import { MAX_OBJECT_BYTES } from '../../shared/storage/immutableObjectStore';
import { LocalImmutableObjectStore } from '../../shared/storage/local/localImmutableObjectStore';
import { LocalKeyValueStoreFactory } from '../../shared/storage/local/localKeyValueStore';
import { azurite } from '../support/azurite';
import { tempDir } from '../support/cleanup';
import { STORAGE_TIMEOUT_MS } from '../support/timeouts';
import {
  describeImmutableObjectStoreContract,
  describeRewritableObjectStoreContract,
} from './immutableObjectStore.contract';

/** The raw stores, taking objects `maxBytes` long (larger under sealed stores). */
const backends = [
  {
    name: 'local filesystem',
    create(maxBytes = MAX_OBJECT_BYTES) {
      const dir = tempDir('objects');
      return {
        store: new LocalImmutableObjectStore(
          path.join(dir, 'sessions'),
          path.join(dir, 'tmp'),
          undefined,
          maxBytes,
        ),
        destroy: () => rm(dir, { recursive: true, force: true }),
      };
    },
  },
  {
    name: 'Azure Blob (Azurite)',
    create(maxBytes = MAX_OBJECT_BYTES) {
      const service = new BlobServiceClient(
        azurite().blobEndpoint,
        new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY),
      );
      const container = service.getContainerClient(`o${randomUUID().replaceAll('-', '').slice(0, 20)}`);
      return {
        store: new BlobImmutableObjectStore(container, 'sessions/', STORAGE_TIMEOUT_MS, 3, maxBytes),
        destroy: async () => {
          await container.deleteIfExists();
        },
      };
    },
  },
];

/** A codec with one fresh key, its key check passed (the check record in a temp folder). */
async function sealingCodec(): Promise<{ codec: SealingCodec; dir: string }> {
  const dir = tempDir('keys');
  const encryption = new Encryption({
    keys: [{ id: 'k1', key: randomBytes(32) }],
    kvStores: new LocalKeyValueStoreFactory(dir, 1024 * 1024),
  });
  await encryption.check();
  return { codec: encryption.codec, dir };
}

for (const backend of backends) {
  describeImmutableObjectStoreContract({ name: backend.name, create: async () => backend.create() });
  describeRewritableObjectStoreContract({ name: backend.name, create: async () => backend.create() });
  // Sealed objects keep the whole contract in plain terms (sizes, the 2 MiB limit, retries).
  describeImmutableObjectStoreContract({
    name: `${backend.name}, sealed`,
    async create() {
      const raw = backend.create(MAX_OBJECT_BYTES + SEAL_OVERHEAD);
      const { codec, dir } = await sealingCodec();
      return {
        store: new SealedObjectStore(raw.store, 'tenant-a', codec, 'archive.object'),
        destroy: async () => {
          await raw.destroy();
          await rm(dir, { recursive: true, force: true });
        },
      };
    },
  });
}

describe('immutable object stores on failing storage', () => {
  it('Blob: an unreachable service is a fault for delete and pointer removal, never "absent"', async () => {
    const service = new BlobServiceClient(
      'http://127.0.0.1:1/devstoreaccount1',
      new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY),
    );
    const store = new BlobImmutableObjectStore(service.getContainerClient('down'), 'snapshots/', 3_000);
    await expect(store.delete('objects/a/0')).rejects.toBeInstanceOf(StorageUnavailableError);
    await expect(store.swapPointer('w/latest', 'c1', null)).rejects.toBeInstanceOf(StorageUnavailableError);
    await expect(store.head('objects/a/0')).rejects.toBeInstanceOf(StorageUnavailableError);
  });
});

describe('Blob touch', () => {
  it('keeps the metadata of the blob (Set Blob Metadata replaces all of it) and its bytes', async () => {
    const service = new BlobServiceClient(
      azurite().blobEndpoint,
      new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY),
    );
    const container = service.getContainerClient(`t${randomUUID().replaceAll('-', '').slice(0, 20)}`);
    try {
      const store = new BlobImmutableObjectStore(container, 'snapshots/', STORAGE_TIMEOUT_MS);
      const bytes = randomBytes(1000);
      await store.put('objects/ab/0', bytes);
      const blob = container.getBlockBlobClient('snapshots/objects/ab/0');
      await blob.setMetadata({ origin: 'first', kept: 'yes' });
      const before = await blob.getProperties();
      const touched = await store.touch('objects/ab/0');
      expect(touched).toMatchObject({ key: 'objects/ab/0', size: 1000 });
      const after = await blob.getProperties();
      expect(after.metadata).toEqual({ origin: 'first', kept: 'yes' });
      expect(after.etag).not.toBe(before.etag);
      expect(after.lastModified?.getTime()).toBe(touched?.storedAt.getTime());
      expect((await store.get('objects/ab/0'))?.equals(bytes)).toBe(true);
    } finally {
      await container.deleteIfExists();
    }
  });
});
