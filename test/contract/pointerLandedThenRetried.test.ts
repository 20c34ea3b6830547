import { randomUUID } from 'node:crypto';

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { StorageUnavailableError } from '../../shared/protocol/errors';
import { BlobImmutableObjectStore } from '../../shared/storage/azure/blobImmutableObjectStore';
import { azurite } from '../support/azurite';
import { blobClients, type FaultyProxy, landed, startFaultyProxy } from '../support/faultyProxy';
import { STORAGE_TIMEOUT_MS } from '../support/timeouts';

/**
 * The pointer twin of landedThenRetried.test.ts: a proxy in front of Azurite's Blob endpoint drops
 * the answer of a pointer move after Azurite committed it. The Blob client is the production one,
 * whose SDK would send the identical If-Match upload again, answered 412 because the first landed.
 * A session's publish reads `swapped: false` with another checkpoint as `current` as a stale
 * parent (409), so a move that landed must never be answered so.
 */
let proxy: FaultyProxy;

beforeAll(async () => {
  proxy = await startFaultyProxy(azurite().blobEndpoint);
});
afterEach(() => proxy.reset());
afterAll(() => proxy.close());

function stores() {
  const container = `p${randomUUID().replaceAll('-', '').slice(0, 20)}`;
  const { viaProxy, direct } = blobClients(proxy);
  return {
    store: new BlobImmutableObjectStore(
      viaProxy.getContainerClient(container),
      'sessions/',
      STORAGE_TIMEOUT_MS,
    ),
    truth: new BlobImmutableObjectStore(
      direct.getContainerClient(container),
      'sessions/',
      STORAGE_TIMEOUT_MS,
    ),
    cleanup: () => direct.getContainerClient(container).deleteIfExists(),
  };
}

describe('a pointer move whose first try landed and whose answer was lost', () => {
  it('(control) through the proxy without a fault, a pointer moves', async () => {
    const { store, truth, cleanup } = stores();
    try {
      expect(await store.swapPointer('s/latest', null, 'c1')).toEqual({ swapped: true });
      expect(await store.swapPointer('s/latest', 'c1', 'c2')).toEqual({ swapped: true });
      expect(await truth.readPointer('s/latest')).toBe('c2');
    } finally {
      await cleanup();
    }
  });

  it('a move that landed, then built on by another writer, is not answered "moved elsewhere"', async () => {
    const { store, truth, cleanup } = stores();
    try {
      await truth.swapPointer('s/latest', null, 'c1');
      proxy.dropNext = landed('PUT', 's/latest');
      // Another publisher reads c2 (ours, landed) and moves on to c3 before our answer is settled.
      proxy.onDrop = async () => {
        expect(await truth.swapPointer('s/latest', 'c2', 'c3')).toEqual({ swapped: true });
      };
      const answer = await store.swapPointer('s/latest', 'c1', 'c2').catch((error: unknown) => error);
      expect(proxy.dropped).toHaveLength(1);
      expect(await truth.readPointer('s/latest')).toBe('c3');
      // It landed: success, or 503 when that could not be told; never "another writer moved it".
      if (answer instanceof Error) expect(answer).toBeInstanceOf(StorageUnavailableError);
      else expect(answer).toEqual({ swapped: true });
    } finally {
      await cleanup();
    }
  });

  it('a first move (create-only) that landed is a success', async () => {
    const { store, truth, cleanup } = stores();
    try {
      await truth.put('s/warm', Buffer.from('x'));
      proxy.dropNext = landed('PUT', 's/latest');
      const answer = await store.swapPointer('s/latest', null, 'c1');
      expect(proxy.dropped).toHaveLength(1);
      expect(answer).toEqual({ swapped: true });
      expect(await truth.readPointer('s/latest')).toBe('c1');
    } finally {
      await cleanup();
    }
  });

  it('a removal on a version that landed is a success', async () => {
    const { store, truth, cleanup } = stores();
    try {
      await truth.swapPointer('s/latest', null, 'c1');
      proxy.dropNext = landed('DELETE', 's/latest');
      const answer = await store.swapPointer('s/latest', 'c1', null);
      expect(proxy.dropped).toHaveLength(1);
      expect(answer).toEqual({ swapped: true });
      expect(await truth.readPointer('s/latest')).toBeNull();
    } finally {
      await cleanup();
    }
  });

  it('a 503 ServerBusy on a move is tried again and the move lands once', async () => {
    const { store, truth, cleanup } = stores();
    try {
      await truth.swapPointer('s/latest', null, 'c1');
      proxy.busyNext = (method, path) => method === 'PUT' && path.includes('s/latest');
      expect(await store.swapPointer('s/latest', 'c1', 'c2')).toEqual({ swapped: true });
      expect(proxy.refused).toHaveLength(1);
      expect(await truth.readPointer('s/latest')).toBe('c2');
    } finally {
      await cleanup();
    }
  });
});
