import { randomUUID } from 'node:crypto';
import { rm } from 'node:fs/promises';

import { BlobServiceClient, StorageSharedKeyCredential } from '@azure/storage-blob';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import { BlobKeyValueStoreFactory, spaceContainerName } from '../../shared/storage/azure/blobKeyValueStore';
import { LocalKeyValueStoreFactory } from '../../shared/storage/local/localKeyValueStore';
import { azurite } from '../support/azurite';
import { tempDir } from '../support/cleanup';
import { describeThreadStoreContract, MAX_VALUE_BYTES } from './threadStore.contract';

describeThreadStoreContract({
  name: 'local filesystem',
  async create() {
    const dir = tempDir('threads');
    return {
      factory: () => new LocalKeyValueStoreFactory(dir, MAX_VALUE_BYTES),
      destroy: () => rm(dir, { recursive: true, force: true }),
    };
  },
});

describeThreadStoreContract({
  name: 'Azure Blob (Azurite)',
  async create() {
    const service = new BlobServiceClient(
      azurite().blobEndpoint,
      new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY),
    );
    const base = `c${randomUUID().replaceAll('-', '').slice(0, 20)}`;
    return {
      factory: () => new BlobKeyValueStoreFactory(service, base, MAX_VALUE_BYTES, 10_000),
      async destroy() {
        for (const tenant of ['tenant-a', 'tenant-b']) {
          await service.getContainerClient(spaceContainerName(base, 'threads', tenant)).deleteIfExists();
        }
      },
    };
  },
});
