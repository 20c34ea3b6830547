import { randomUUID } from 'node:crypto';
import { rm } from 'node:fs/promises';
import path from 'node:path';

import { BlobServiceClient, StorageSharedKeyCredential } from '@azure/storage-blob';
import { describe, expect, it } from 'vitest';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import { StorageUnavailableError } from '../../shared/errors';
import { BlobImmutableObjectStore } from '../../shared/storage/azure/blobImmutableObjectStore';
import { LocalImmutableObjectStore } from '../../shared/storage/local/localImmutableObjectStore';
import { azurite } from '../support/azurite';
import { tempDir } from '../support/cleanup';
import { describeImmutableObjectStoreContract } from './immutableObjectStore.contract';

describeImmutableObjectStoreContract({
  name: 'local filesystem',
  async create() {
    const dir = tempDir('objects');
    return {
      store: new LocalImmutableObjectStore(path.join(dir, 'sessions'), path.join(dir, 'tmp')),
      destroy: () => rm(dir, { recursive: true, force: true }),
    };
  },
});

describeImmutableObjectStoreContract({
  name: 'Azure Blob (Azurite)',
  async create() {
    const service = new BlobServiceClient(
      azurite().blobEndpoint,
      new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY),
    );
    const container = service.getContainerClient(`o${randomUUID().replaceAll('-', '').slice(0, 20)}`);
    return {
      store: new BlobImmutableObjectStore(container, 'sessions/', 10_000, 3),
      destroy: async () => {
        await container.deleteIfExists();
      },
    };
  },
});

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
