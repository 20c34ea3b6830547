import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

import { BlobServiceClient, StorageSharedKeyCredential } from '@azure/storage-blob';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import { claimDelivery } from '../../shared/coordination/chatCursors';
import {
  claimEmailWindow,
  initializeEmailCursor,
  readEmailCursor,
} from '../../shared/coordination/emailCursor';
import { StorageUnavailableError } from '../../shared/protocol/errors';
import { BlobKeyValueStoreFactory, tenantContainerName } from '../../shared/storage/azure/blobKeyValueStore';
import { createBlobServiceClient } from '../../shared/storage/azure/clients';
import { azurite } from '../support/azurite';
import { STORAGE_TIMEOUT_MS } from '../support/timeouts';

/**
 * A real fault, made on demand: a TCP proxy in front of Azurite that forwards a request, lets
 * Azurite commit it, and then drops the connection instead of returning the answer (a connection
 * reset after the storage did the work). The Blob client is the production one
 * (createBlobServiceClient: the SDK retries network errors, maxTries 4), so the SDK sends the
 * identical conditional request again, which Azure answers 412/409 because the first one landed.
 */
let proxy: http.Server;
let proxyEndpoint: string;
let dropNext: ((method: string, path: string, status: number) => boolean) | null = null;
const dropped: string[] = [];
/** Runs once a dropped request has landed, before its connection is closed (another writer). */
let onDrop: (() => Promise<void>) | null = null;
/** Answers the next matching request 503 ServerBusy without forwarding it (nothing lands). */
let busyNext: ((method: string, path: string) => boolean) | null = null;
const refused: string[] = [];

beforeAll(async () => {
  const upstream = new URL(azurite().blobEndpoint);
  proxy = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const requested = decodeURIComponent(req.url ?? '');
      if (busyNext?.(req.method ?? '', requested) === true) {
        busyNext = null;
        refused.push(`${req.method} ${requested.split('?')[0]}`);
        res.writeHead(503, { 'x-ms-error-code': 'ServerBusy' });
        res.end();
        return;
      }
      const forward = http.request(
        {
          host: upstream.hostname,
          port: upstream.port,
          method: req.method,
          path: req.url,
          headers: req.headers,
        },
        (answer) => {
          const body: Buffer[] = [];
          answer.on('data', (chunk: Buffer) => body.push(chunk));
          answer.on('end', () => {
            const path = decodeURIComponent(req.url ?? '');
            const status = answer.statusCode ?? 0;
            if (dropNext?.(req.method ?? '', path, status) === true) {
              dropNext = null;
              dropped.push(`${req.method} ${path.split('?')[0]} ${status}`);
              const before = onDrop ?? (() => Promise.resolve());
              onDrop = null;
              // the write landed; its answer never arrives
              void before().finally(() => req.socket.destroy());
              return;
            }
            res.writeHead(status, answer.headers);
            res.end(Buffer.concat(body));
          });
        },
      );
      forward.on('error', () => res.destroy());
      forward.end(Buffer.concat(chunks));
    });
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  proxyEndpoint = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}${upstream.pathname}`;
});

afterEach(() => {
  dropNext = null;
  onDrop = null;
  busyNext = null;
  dropped.length = 0;
  refused.length = 0;
});

afterAll(async () => {
  await new Promise<void>((resolve) => proxy.close(() => resolve()));
});

/** The production Blob client, through the proxy, and a direct one to look at what is stored. */
function stores() {
  const base = `c${randomUUID().replaceAll('-', '').slice(0, 20)}`;
  const viaProxy = createBlobServiceClient(
    { endpoint: proxyEndpoint, accountName: AZURITE_ACCOUNT, accountKey: AZURITE_ACCOUNT_KEY },
    STORAGE_TIMEOUT_MS,
  );
  const direct = new BlobServiceClient(
    azurite().blobEndpoint,
    new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY),
  );
  return {
    store: new BlobKeyValueStoreFactory(viaProxy, base, 1 << 20, STORAGE_TIMEOUT_MS).forTenant('t1'),
    truth: new BlobKeyValueStoreFactory(direct, base, 1 << 20, STORAGE_TIMEOUT_MS).forTenant('t1'),
    cleanup: () => direct.getContainerClient(tenantContainerName(base, 't1')).deleteIfExists(),
  };
}

const landedPut = (fragment: string) => (method: string, path: string, status: number) =>
  method === 'PUT' && path.includes(fragment) && status >= 200 && status < 300;

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
      dropNext = landedPut('log.jsonl');
      await store.append('log.jsonl', Buffer.from('second\n'));
      expect(dropped).toHaveLength(1);
      expect((await truth.read('log.jsonl'))?.value.toString()).toBe('first\nsecond\n');
    } finally {
      dropped.length = 0;
      await cleanup();
    }
  });

  it('a chat claim whose cursor write landed either hands the id out or says unresolved', async () => {
    const { store, cleanup } = stores();
    try {
      const chat = '19:abc@thread.v2';
      dropNext = landedPut('chat_cursors/');
      const claim = await claimDelivery(store, chat, ['1764450000000']);
      expect(dropped).toHaveLength(1);
      // The id is now recorded as delivered; a later claim never hands it out.
      expect((await claimDelivery(store, chat, ['1764450000000'])).claimed).toEqual([]);
      // So this claim must either have delivered it, or told the caller it is unresolved.
      expect(claim.claimed.length > 0 || claim.reason === 'unresolved', JSON.stringify(claim)).toBe(true);
    } finally {
      dropped.length = 0;
      await cleanup();
    }
  });

  it('an email window claim that moved the cursor is not answered "lost"', async () => {
    const { store, truth, cleanup } = stores();
    try {
      await initializeEmailCursor(store, '2026-11-29T21:15:51.123Z');
      const before = await readEmailCursor(store);
      if (before.outcome !== 'present') throw new Error('no cursor');
      dropNext = landedPut('email_cursor');
      const result = await claimEmailWindow(store, {
        newCursor: '2026-11-29T21:16:51.123Z',
        etag: before.etag,
        claimId: 'c1',
        priorClaims: [],
      });
      expect(dropped).toHaveLength(1);
      const after = await readEmailCursor(truth);
      // The claim landed: the cursor moved past the window, with this claim's id.
      expect(after.cursor).toBe('2026-11-29T21:16:51.123Z');
      expect(after.recentClaims).toEqual(['c1']);
      // "lost" tells the caller another instance owns the window and nothing was written.
      expect(result).not.toBe('lost');
    } finally {
      dropped.length = 0;
      await cleanup();
    }
  });

  it('an append whose answer was lost and whose blob another writer then changed is a 503, never a second copy', async () => {
    const { store, truth, cleanup } = stores();
    try {
      await store.write('log.jsonl', Buffer.from('first\n'));
      dropNext = landedPut('log.jsonl');
      onDrop = async () => {
        await truth.append('log.jsonl', Buffer.from('other\n'));
      };
      await expect(store.append('log.jsonl', Buffer.from('second\n'))).rejects.toBeInstanceOf(
        StorageUnavailableError,
      );
      expect(dropped).toHaveLength(1);
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
      busyNext = (method, path) => method === 'PUT' && path.includes('state.json');
      const second = await store.write('state.json', Buffer.from('{"v":2}'), { ifMatch: first.etag });
      expect(refused).toHaveLength(1);
      const stored = await truth.read('state.json');
      expect({ value: stored?.value.toString(), etag: stored?.etag }).toEqual({
        value: '{"v":2}',
        etag: second.etag,
      });
      busyNext = (method, path) => method === 'PUT' && path.includes('log.jsonl');
      await store.append('log.jsonl', Buffer.from('one\n'));
      expect(refused).toHaveLength(2);
      expect((await truth.read('log.jsonl'))?.value.toString()).toBe('one\n');
    } finally {
      await cleanup();
    }
  });
});
