import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

import { BlobServiceClient, StorageSharedKeyCredential } from '@azure/storage-blob';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../shared/runtime/azurite';
import { BlobKeyValueStoreFactory, spaceContainerName } from '../../shared/storage/blobKeyValueStore';
import { LocalKeyValueStoreFactory } from '../../shared/storage/localKeyValueStore';
import { azurite } from '../support/azurite';
import { describeThreadStoreContract, MAX_VALUE_BYTES } from './threadStore.contract';

describeThreadStoreContract({
  name: 'local filesystem',
  async create() {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'cairn-threads-'));
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
