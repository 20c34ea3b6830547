import { randomUUID } from 'node:crypto';

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { claimDelivery } from '../../shared/coordination/chatCursors';
import {
  claimEmailWindow,
  initializeEmailCursor,
  readEmailCursor,
} from '../../shared/coordination/emailCursor';
import { StorageUnavailableError } from '../../shared/protocol/errors';
import { BlobKeyValueStoreFactory, tenantContainerName } from '../../shared/storage/azure/blobKeyValueStore';
import { azurite } from '../support/azurite';
import { blobClients, type FaultyProxy, landed, startFaultyProxy } from '../support/faultyProxy';
import { STORAGE_TIMEOUT_MS } from '../support/timeouts';

/**
 * A real fault, made on demand: a TCP proxy in front of Azurite that forwards a request, lets
 * Azurite commit it, and then drops the connection instead of returning the answer (a connection
 * reset after the storage did the work). The Blob client is the production one
 * (createBlobServiceClient: the SDK retries network errors, maxTries 4), so the SDK sends the
 * identical conditional request again, which Azure answers 412/409 because the first one landed.
 */
let proxy: FaultyProxy;

beforeAll(async () => {
  proxy = await startFaultyProxy(azurite().blobEndpoint);
});
afterEach(() => proxy.reset());
afterAll(() => proxy.close());

/** The production Blob client, through the proxy, and a direct one to look at what is stored. */
function stores() {
  const base = `c${randomUUID().replaceAll('-', '').slice(0, 20)}`;
  const { viaProxy, direct } = blobClients(proxy);
  return {
    store: new BlobKeyValueStoreFactory(viaProxy, base, 1 << 20, STORAGE_TIMEOUT_MS).forTenant('t1'),
    truth: new BlobKeyValueStoreFactory(direct, base, 1 << 20, STORAGE_TIMEOUT_MS).forTenant('t1'),
    cleanup: () => direct.getContainerClient(tenantContainerName(base, 't1')).deleteIfExists(),
  };
}

describe('a conditional Blob write whose first try landed and whose answer was lost', () => {
  it('(control) through the proxy without a fault, an append is stored once', async () => {
    const { store, truth, cleanup } = stores();
    try {
      await store.write('log.jsonl', Buffer.from('first\n'));
      await store.append('log.jsonl', Buffer.from('second\n'));
      expect((await truth.read('log.jsonl'))?.value.toString()).toBe('first\nsecond\n');
    } finally {
      await cleanup();
    }
  });

  it('an append acknowledged once is stored once', async () => {
    const { store, truth, cleanup } = stores();
    try {
      await store.write('log.jsonl', Buffer.from('first\n'));
      proxy.dropNext = landed('PUT', 'log.jsonl');
      await store.append('log.jsonl', Buffer.from('second\n'));
      expect(proxy.dropped).toHaveLength(1);
      expect((await truth.read('log.jsonl'))?.value.toString()).toBe('first\nsecond\n');
    } finally {
      proxy.dropped.length = 0;
      await cleanup();
    }
  });

  it('a chat claim whose cursor write landed either hands the id out or says unresolved', async () => {
    const { store, cleanup } = stores();
    try {
      const chat = '19:abc@thread.v2';
      proxy.dropNext = landed('PUT', 'chat_cursors/');
      const claim = await claimDelivery(store, chat, ['1764450000000']);
      expect(proxy.dropped).toHaveLength(1);
      // The id is now recorded as delivered; a later claim never hands it out.
      expect((await claimDelivery(store, chat, ['1764450000000'])).claimed).toEqual([]);
      // So this claim must either have delivered it, or told the caller it is unresolved.
      expect(claim.claimed.length > 0 || claim.reason === 'unresolved', JSON.stringify(claim)).toBe(true);
    } finally {
      proxy.dropped.length = 0;
      await cleanup();
    }
  });

  it('an email window claim that moved the cursor is not answered "lost"', async () => {
    const { store, truth, cleanup } = stores();
    try {
      await initializeEmailCursor(store, '2026-11-29T21:15:51.123Z');
      const before = await readEmailCursor(store);
      if (before.outcome !== 'present') throw new Error('no cursor');
      proxy.dropNext = landed('PUT', 'email_cursor');
      const result = await claimEmailWindow(store, {
        newCursor: '2026-11-29T21:16:51.123Z',
        etag: before.etag,
        claimId: 'c1',
        priorClaims: [],
      });
      expect(proxy.dropped).toHaveLength(1);
      const after = await readEmailCursor(truth);
      // The claim landed: the cursor moved past the window, with this claim's id.
      expect(after.cursor).toBe('2026-11-29T21:16:51.123Z');
      expect(after.recentClaims).toEqual(['c1']);
      // "lost" tells the caller another instance owns the window and nothing was written.
      expect(result).not.toBe('lost');
    } finally {
      proxy.dropped.length = 0;
      await cleanup();
    }
  });

  it('an append whose answer was lost and whose blob another writer then changed is a 503, never a second copy', async () => {
    const { store, truth, cleanup } = stores();
    try {
      await store.write('log.jsonl', Buffer.from('first\n'));
      proxy.dropNext = landed('PUT', 'log.jsonl');
      proxy.onDrop = async () => {
        await truth.append('log.jsonl', Buffer.from('other\n'));
      };
      await expect(store.append('log.jsonl', Buffer.from('second\n'))).rejects.toBeInstanceOf(
        StorageUnavailableError,
      );
      expect(proxy.dropped).toHaveLength(1);
      // It may have landed (it did): the caller is told "unavailable", and nothing is appended again.
      expect((await truth.read('log.jsonl'))?.value.toString()).toBe('first\nsecond\nother\n');
    } finally {
      await cleanup();
    }
  });

  it('a conditional write refused 503 (nothing landed) is tried again and lands once', async () => {
    const { store, truth, cleanup } = stores();
    try {
      const first = await store.write('state.json', Buffer.from('{"v":1}'), { ifAbsent: true });
      proxy.busyNext = (method, path) => method === 'PUT' && path.includes('state.json');
      const second = await store.write('state.json', Buffer.from('{"v":2}'), { ifMatch: first.etag });
      expect(proxy.refused).toHaveLength(1);
      const stored = await truth.read('state.json');
      expect({ value: stored?.value.toString(), etag: stored?.etag }).toEqual({
        value: '{"v":2}',
        etag: second.etag,
      });
      proxy.busyNext = (method, path) => method === 'PUT' && path.includes('log.jsonl');
      await store.append('log.jsonl', Buffer.from('one\n'));
      expect(proxy.refused).toHaveLength(2);
      expect((await truth.read('log.jsonl'))?.value.toString()).toBe('one\n');
    } finally {
      await cleanup();
    }
  });
});
