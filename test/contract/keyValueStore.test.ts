import { randomBytes, randomUUID } from 'node:crypto';
import { rm } from 'node:fs/promises';

import {
  BlobServiceClient,
  newPipeline,
  type RequestPolicy,
  StorageSharedKeyCredential,
} from '@azure/storage-blob';
import { describe, expect, it } from 'vitest';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import { Encryption } from '../../shared/crypto/encryption';
import { SEAL_OVERHEAD } from '../../shared/crypto/sealedFormat';
import { SealingKeyValueStoreFactory } from '../../shared/crypto/sealedKeyValueStore';
import { PayloadTooLargeError, PreconditionFailedError } from '../../shared/protocol/errors';
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
import { describeKeyValueStoreContract, MAX_VALUE_BYTES } from './keyValueStore.contract';

describeKeyValueStoreContract({
  name: 'local filesystem',
  async create() {
    const dir = tempDir('kv');
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
      factory: new BlobKeyValueStoreFactory(service, base, MAX_VALUE_BYTES, STORAGE_TIMEOUT_MS),
      another: () => new BlobKeyValueStoreFactory(service, base, MAX_VALUE_BYTES, STORAGE_TIMEOUT_MS),
      async destroy() {
        for (const tenant of ['tenant-a', 'tenant-b']) {
          await service.getContainerClient(tenantContainerName(base, tenant)).deleteIfExists();
          await service.getContainerClient(spaceContainerName(base, 'threads', tenant)).deleteIfExists();
        }
      },
    };
  },
});

/**
 * The contract again with every tenant's values sealed at rest (CAIRN_ENCRYPT_TENANTS=*): the
 * sealing store keeps it whole, plain sizes and limits included.
 */
function sealed(
  name: string,
  make: (maxValueBytes: number) => KeyValueStoreFactory,
  destroy: () => Promise<void>,
) {
  return async () => {
    const encryption = new Encryption({
      keys: [{ id: 'k1', key: randomBytes(32) }],
      kvStores: make(MAX_VALUE_BYTES),
    });
    await encryption.check();
    const build = () =>
      new SealingKeyValueStoreFactory(
        make(MAX_VALUE_BYTES),
        make(MAX_VALUE_BYTES + SEAL_OVERHEAD),
        encryption.codec,
        '*',
      );
    return { factory: build(), another: build, destroy, name };
  };
}

describeKeyValueStoreContract({
  name: 'local filesystem, values sealed',
  async create() {
    const dir = tempDir('kv');
    return sealed(
      'local',
      (max) => new LocalKeyValueStoreFactory(dir, max),
      () => rm(dir, { recursive: true, force: true }),
    )();
  },
});

describeKeyValueStoreContract({
  name: 'Azure Blob (Azurite), values sealed',
  async create() {
    const service = new BlobServiceClient(
      azurite().blobEndpoint,
      new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY),
    );
    const base = `c${randomUUID().replaceAll('-', '').slice(0, 20)}`;
    return sealed(
      'blob',
      (max) => new BlobKeyValueStoreFactory(service, base, max, STORAGE_TIMEOUT_MS),
      async () => {
        for (const tenant of ['tenant-a', 'tenant-b', '@cairn']) {
          await service.getContainerClient(tenantContainerName(base, tenant)).deleteIfExists();
          await service.getContainerClient(spaceContainerName(base, 'threads', tenant)).deleteIfExists();
        }
      },
    )();
  },
});

describe('Azure Blob key/value store: values read again', () => {
  it('are downloaded on condition of the kept version, and sent again only once they changed', async () => {
    const sentLog: string[] = [];
    const pipeline = newPipeline(new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY));
    pipeline.factories.unshift({
      create: (next: RequestPolicy): RequestPolicy => ({
        sendRequest: async (request) => {
          const conditional = request.headers.get('if-none-match') === undefined ? '' : ' if-none-match';
          // The SDK's deserialisation below this policy throws on 304 and 404.
          try {
            const response = await next.sendRequest(request);
            sentLog.push(`${request.method}${conditional} ${response.status}`);
            return response;
          } catch (error) {
            sentLog.push(`${request.method}${conditional} ${(error as { statusCode?: number }).statusCode}`);
            throw error;
          }
        },
      }),
    });
    const service = new BlobServiceClient(azurite().blobEndpoint, pipeline);
    const base = `c${randomUUID().replaceAll('-', '').slice(0, 20)}`;
    const container = service.getContainerClient(tenantContainerName(base, 'tenant-a'));
    const sent = async <T>(operation: () => Promise<T>): Promise<{ result: T; requests: string[] }> => {
      sentLog.length = 0;
      const result = await operation();
      return { result, requests: [...sentLog] };
    };
    try {
      const store = new BlobKeyValueStoreFactory(
        service,
        base,
        MAX_VALUE_BYTES,
        STORAGE_TIMEOUT_MS,
      ).forTenant('tenant-a');
      const buffer = Buffer.from('v1');
      const written = await store.write('state', buffer);
      buffer.write('XX'); // the writer's buffer is its own again: what is kept is a copy
      const kept = await sent(() => store.read('state'));
      expect(kept.result).toEqual({ value: Buffer.from('v1'), etag: written.etag });
      expect(kept.requests).toEqual(['GET if-none-match 304']);

      // Changed behind this instance's back: Azure sends the new bytes.
      await container.getBlockBlobClient('state').upload('v2', 2);
      const changed = await sent(() => store.read('state'));
      expect(changed.result?.value.toString()).toBe('v2');
      expect(changed.requests).toEqual(['GET if-none-match 200']);
      expect((await sent(() => store.read('state'))).requests).toEqual(['GET if-none-match 304']);

      // An append on the kept version is one request; on a version changed behind its back, the
      // write is refused, the current value read, and the append made on it.
      const appended = await sent(() => store.append('state', Buffer.from('+a')));
      expect(appended.requests).toEqual(['PUT 201']);
      await container.getBlockBlobClient('state').upload('v3', 2);
      const rebased = await sent(() => store.append('state', Buffer.from('+b')));
      expect(rebased.requests).toEqual(['PUT 412', 'GET if-none-match 200', 'PUT 201']);
      expect((await store.read('state'))?.value.toString()).toBe('v3+b');
      // A condition the kept version does not meet is checked on the current version, and refused.
      const refused = await sent(() =>
        store.append('state', Buffer.from('+c'), { ifMatch: written.etag }).catch((error: unknown) => error),
      );
      expect(refused.result).toBeInstanceOf(PreconditionFailedError);
      expect(refused.requests).toEqual(['GET if-none-match 304']);

      // An append that would pass the limit is decided on the current version: one read, then 413.
      const big = await store.write('big', Buffer.alloc(MAX_VALUE_BYTES - 10));
      const tooBig = await sent(() => store.append('big', Buffer.alloc(20)).catch((error: unknown) => error));
      expect(tooBig.result).toBeInstanceOf(PayloadTooLargeError);
      expect(tooBig.requests).toEqual(['GET if-none-match 304']);
      expect((await store.head('big'))?.etag).toBe(big.etag);

      // Deleted behind its back: absent, and nothing is kept any more.
      await container.getBlockBlobClient('state').delete();
      const deleted = await sent(() => store.read('state'));
      expect(deleted.result).toBeNull();
      expect(deleted.requests).toEqual(['GET if-none-match 404']);
      expect((await sent(() => store.read('state'))).requests).toEqual(['GET 404']);
      // An append that requires the key (If-Match: *) after it was deleted elsewhere writes nothing.
      await store.write('gone', Buffer.from('x'));
      await container.getBlockBlobClient('gone').delete();
      await expect(store.append('gone', Buffer.from('y'), { ifMatch: '*' })).rejects.toBeInstanceOf(
        PreconditionFailedError,
      );
      expect(await store.head('gone')).toBeNull();

      // A value this instance has never seen is a plain download.
      await container.getBlockBlobClient('state').upload('v3', 2);
      const fresh = new BlobKeyValueStoreFactory(
        service,
        base,
        MAX_VALUE_BYTES,
        STORAGE_TIMEOUT_MS,
      ).forTenant('tenant-a');
      const first = await sent(() => fresh.read('state'));
      expect(first.result?.value.toString()).toBe('v3');
      expect(first.requests).toEqual(['GET 200']);

      // An append to a key this instance knows nothing of is tried as a create-only upload: one
      // request when the key is absent; an existing key refuses it, and is read and appended to.
      const created = await sent(() => fresh.append('new-key', Buffer.from('n1')));
      expect(created.requests).toEqual(['PUT if-none-match 201']);
      expect((await store.read('new-key'))?.value.toString()).toBe('n1');
      await container.getBlockBlobClient('other-key').upload('o1', 2);
      const existing = await sent(() => fresh.append('other-key', Buffer.from('+o2')));
      expect(existing.requests).toEqual([existing.requests[0], 'GET 200', 'PUT 201']);
      expect(existing.requests[0]).toMatch(/^PUT if-none-match 4(09|12)$/);
      expect((await fresh.read('other-key'))?.value.toString()).toBe('o1+o2');
    } finally {
      await container.deleteIfExists();
    }
  });
});
