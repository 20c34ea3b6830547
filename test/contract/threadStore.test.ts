import { randomBytes, randomUUID } from 'node:crypto';
import { rm } from 'node:fs/promises';

import { BlobServiceClient, StorageSharedKeyCredential } from '@azure/storage-blob';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import { Encryption } from '../../shared/crypto/encryption';
import {
  BlobKeyValueStoreFactory,
  spaceContainerName,
  tenantContainerName,
} from '../../shared/storage/azure/blobKeyValueStore';
import type { KeyValueStoreFactory } from '../../shared/storage/keyValueStore';
import { LocalKeyValueStoreFactory } from '../../shared/storage/local/localKeyValueStore';
import { azurite } from '../support/azurite';
import { tempDir } from '../support/cleanup';
import { STORAGE_TIMEOUT_MS } from '../support/timeouts';
import { describeThreadStoreContract, MAX_VALUE_BYTES } from './threadStore.contract';

/** Two keys, the first sealing: the contract runs again with every value sealed at rest. */
async function sealing(stores: KeyValueStoreFactory) {
  const encryption = new Encryption({
    keys: [
      { id: 'k2', key: randomBytes(32) },
      { id: 'k1', key: randomBytes(32) },
    ],
    kvStores: stores,
  });
  await encryption.check();
  return encryption.codec;
}

function local(sealed: boolean) {
  return {
    name: sealed ? 'local filesystem, values sealed' : 'local filesystem',
    async create() {
      const dir = tempDir('threads');
      const factory = () => new LocalKeyValueStoreFactory(dir, MAX_VALUE_BYTES);
      return {
        factory,
        destroy: () => rm(dir, { recursive: true, force: true }),
        ...(sealed ? { codec: await sealing(factory()) } : {}),
      };
    },
  };
}

function blob(sealed: boolean) {
  return {
    name: sealed ? 'Azure Blob (Azurite), values sealed' : 'Azure Blob (Azurite)',
    async create() {
      const service = new BlobServiceClient(
        azurite().blobEndpoint,
        new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY),
      );
      const base = `c${randomUUID().replaceAll('-', '').slice(0, 20)}`;
      const factory = () => new BlobKeyValueStoreFactory(service, base, MAX_VALUE_BYTES, STORAGE_TIMEOUT_MS);
      return {
        factory,
        async destroy() {
          for (const tenant of ['tenant-a', 'tenant-b']) {
            await service.getContainerClient(spaceContainerName(base, 'threads', tenant)).deleteIfExists();
          }
          await service.getContainerClient(tenantContainerName(base, '@cairn')).deleteIfExists();
        },
        ...(sealed ? { codec: await sealing(factory()) } : {}),
      };
    },
  };
}

describeThreadStoreContract(local(false));
describeThreadStoreContract(blob(false));
describeThreadStoreContract(local(true));
describeThreadStoreContract(blob(true));
