import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

import {
  BlobServiceClient,
  newPipeline,
  type RequestPolicy,
  StorageSharedKeyCredential,
} from '@azure/storage-blob';
import { describe, expect, it } from 'vitest';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../shared/runtime/azurite';
import { BlobKeyValueStoreFactory, tenantContainerName } from '../../shared/storage/blobKeyValueStore';
import { LocalKeyValueStoreFactory } from '../../shared/storage/localKeyValueStore';
import { azurite } from '../support/azurite';
import { describeKeyValueStoreContract, MAX_VALUE_BYTES } from './keyValueStore.contract';

describeKeyValueStoreContract({
  name: 'local filesystem',
  async create() {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'cairn-kv-'));
    return {
      factory: new LocalKeyValueStoreFactory(dir, MAX_VALUE_BYTES),
      another: () => new LocalKeyValueStoreFactory(dir, MAX_VALUE_BYTES),
      destroy: () => rm(dir, { recursive: true, force: true }),
    };
  },
});

describeKeyValueStoreContract({
  name: 'Azure Blob (Azurite)',
  async create() {
    const service = new BlobServiceClient(
      azurite().blobEndpoint,
      new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY),
    );
    const base = `c${randomUUID().replaceAll('-', '').slice(0, 20)}`;
    return {
      factory: new BlobKeyValueStoreFactory(service, base, MAX_VALUE_BYTES, 10_000),
      another: () => new BlobKeyValueStoreFactory(service, base, MAX_VALUE_BYTES, 10_000),
      async destroy() {
        for (const tenant of ['tenant-a', 'tenant-b']) {
          await service.getContainerClient(tenantContainerName(base, tenant)).deleteIfExists();
        }
      },
    };
  },
});

describe('Azure Blob key/value store: values read again', () => {
  it('are revalidated by a HEAD and downloaded again only once they changed', async () => {
    const methods: string[] = [];
    const pipeline = newPipeline(new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY));
    pipeline.factories.unshift({
      create: (next: RequestPolicy): RequestPolicy => ({
        sendRequest: (request) => {
          methods.push(request.method);
          return next.sendRequest(request);
        },
      }),
    });
    const service = new BlobServiceClient(azurite().blobEndpoint, pipeline);
    const base = `c${randomUUID().replaceAll('-', '').slice(0, 20)}`;
    const container = service.getContainerClient(tenantContainerName(base, 'tenant-a'));
    const sent = async <T>(operation: () => Promise<T>): Promise<{ result: T; methods: string[] }> => {
      methods.length = 0;
      const result = await operation();
      return { result, methods: [...methods] };
    };
    try {
      const store = new BlobKeyValueStoreFactory(service, base, MAX_VALUE_BYTES, 10_000).forTenant(
        'tenant-a',
      );
      await store.write('state', Buffer.from('v1'));
      const kept = await sent(() => store.read('state'));
      expect(kept.result?.value.toString()).toBe('v1');
      expect(kept.methods).toEqual(['HEAD']);

      // Changed behind this instance's back: the HEAD shows a new ETag, so the value is downloaded.
      await container.getBlockBlobClient('state').upload('v2', 2);
      const changed = await sent(() => store.read('state'));
      expect(changed.result?.value.toString()).toBe('v2');
      expect(changed.methods).toEqual(['HEAD', 'GET']);
      expect((await sent(() => store.read('state'))).methods).toEqual(['HEAD']);

      // A value this instance has never seen is one download.
      const fresh = new BlobKeyValueStoreFactory(service, base, MAX_VALUE_BYTES, 10_000).forTenant(
        'tenant-a',
      );
      const first = await sent(() => fresh.read('state'));
      expect(first.result?.value.toString()).toBe('v2');
      expect(first.methods).toEqual(['GET']);
    } finally {
      await container.deleteIfExists();
    }
  });
});
