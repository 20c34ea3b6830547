import { setImmediate as nextTurn } from 'node:timers/promises';

import { describe, expect, it } from 'vitest';

import { Encryption } from '../../shared/crypto/encryption';
import { keyValueRewrapTarget } from '../../shared/crypto/rewrap';
import { StorageUnavailableError } from '../../shared/protocol/errors';
import type { KeyValueStore, KeyValueStoreFactory } from '../../shared/storage/keyValueStore';
import { LocalKeyValueStoreFactory } from '../../shared/storage/local/localKeyValueStore';
import { tempDir } from '../support/cleanup';

/**
 * A rewrap page stops at the first storage fault: no key is read after it, and the page rejects
 * only once the keys already being re-sealed settled (the activity fails and is retried whole; a
 * page is idempotent). The fault is injected in front of a real local store.
 */
describe('a rewrap page and a storage fault', () => {
  it('starts no key after the first failure and settles the running ones first', async () => {
    const local = new LocalKeyValueStoreFactory(tempDir('rewrap-stop'), 1024 * 1024);
    const encryption = new Encryption({ keys: [{ id: 'k1', key: Buffer.alloc(32, 7) }], kvStores: local });
    await encryption.check();
    const tenant = 'rewrap-stop-tenant';
    const real = local.forTenant(tenant);
    const keys = Array.from({ length: 40 }, (_, index) => `rs/${String(index).padStart(2, '0')}`);
    for (const key of keys)
      await real.write(
        key,
        Buffer.from(encryption.codec.seal(Buffer.from(key), { tenant, kind: 'kv', key })),
      );
    const read: string[] = [];
    let running = 0;
    const faulty: KeyValueStore = Object.create(real) as KeyValueStore;
    faulty.read = async (key) => {
      read.push(key);
      running++;
      try {
        if (key === keys[0]) throw new StorageUnavailableError('injected fault');
        await nextTurn();
        await nextTurn();
        return await real.read(key);
      } finally {
        running--;
      }
    };
    const factory: KeyValueStoreFactory = Object.create(local) as KeyValueStoreFactory;
    factory.forTenant = () => faulty;
    const target = keyValueRewrapTarget(factory, encryption.codec, '*');
    const failure = await target.rewrapPage(tenant, null, 100).then(
      () => undefined,
      (error: unknown) => ({ error, runningAtRejection: running }),
    );
    expect(failure?.error).toBeInstanceOf(StorageUnavailableError);
    expect(failure?.runningAtRejection).toBe(0);
    // At most the pool's width (8) started: the first one failed, the others were already running.
    expect(read.length).toBeLessThanOrEqual(8);
    expect(read).toContain(keys[0]);
  });
});
