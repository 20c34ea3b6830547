import http from 'node:http';
import type { AddressInfo } from 'node:net';

import { BlobServiceClient, StorageSharedKeyCredential } from '@azure/storage-blob';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import { createBlobServiceClient } from '../../shared/storage/azure/clients';
import { azurite } from './azurite';
import { STORAGE_TIMEOUT_MS } from './timeouts';

/**
 * A real storage fault, made on demand: an HTTP proxy in front of an Azurite endpoint that
 * forwards each request and returns its answer, except that it can
 * - drop the answer of a request after Azurite has done the work (`dropNext`): the connection is
 *   closed instead, as a connection reset after the storage committed;
 * - answer a request 503 ServerBusy without forwarding it (`busyNext`): nothing lands.
 * Each fault applies to the next request it matches, once.
 */
export interface FaultyProxy {
  /** The upstream endpoint (its account path included) through the proxy. */
  readonly endpoint: string;
  /** Drops the answer of the next forwarded request it matches (path percent-decoded). */
  dropNext: ((method: string, path: string, status: number, body: string) => boolean) | null;
  /** Runs once a dropped request has landed, before its connection is closed (another writer). */
  onDrop: (() => Promise<void>) | null;
  /** Answers the next request it matches 503 ServerBusy, without forwarding it. */
  busyNext: ((method: string, path: string) => boolean) | null;
  /** `METHOD path status` of each answer dropped. */
  readonly dropped: string[];
  /** `METHOD path` of each request refused 503. */
  readonly refused: string[];
  /** Clears the faults and what was recorded (between tests). */
  reset(): void;
  close(): Promise<void>;
}

export async function startFaultyProxy(upstreamEndpoint: string): Promise<FaultyProxy> {
  const upstream = new URL(upstreamEndpoint);
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const method = req.method ?? '';
      const path = decodeURIComponent(req.url ?? '');
      if (proxy.busyNext?.(method, path) === true) {
        proxy.busyNext = null;
        proxy.refused.push(`${method} ${path.split('?')[0]}`);
        res.writeHead(503, { 'x-ms-error-code': 'ServerBusy' });
        res.end();
        return;
      }
      const forward = http.request(
        { host: upstream.hostname, port: upstream.port, method, path: req.url, headers: req.headers },
        (answer) => {
          const body: Buffer[] = [];
          answer.on('data', (chunk: Buffer) => body.push(chunk));
          answer.on('end', () => {
            const status = answer.statusCode ?? 0;
            const bytes = Buffer.concat(body);
            if (proxy.dropNext?.(method, path, status, bytes.toString('utf8')) === true) {
              proxy.dropNext = null;
              proxy.dropped.push(`${method} ${path.split('?')[0]} ${status}`);
              const before = proxy.onDrop ?? (() => Promise.resolve());
              proxy.onDrop = null;
              // The write landed; its answer never arrives.
              void before().finally(() => req.socket.destroy());
              return;
            }
            res.writeHead(status, answer.headers);
            res.end(bytes);
          });
        },
      );
      forward.on('error', () => res.destroy());
      forward.end(Buffer.concat(chunks));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const proxy: FaultyProxy = {
    endpoint: `http://127.0.0.1:${port}${upstream.pathname.replace(/\/$/, '')}`,
    dropNext: null,
    onDrop: null,
    busyNext: null,
    dropped: [],
    refused: [],
    reset() {
      proxy.dropNext = null;
      proxy.onDrop = null;
      proxy.busyNext = null;
      proxy.dropped.length = 0;
      proxy.refused.length = 0;
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return proxy;
}

/** A `dropNext` rule: the next `method` request whose path contains `fragment` and that succeeded. */
export const landed =
  (method: string, fragment: string) =>
  (requestMethod: string, path: string, status: number): boolean =>
    requestMethod === method && path.includes(fragment) && status >= 200 && status < 300;

/**
 * The production Blob client (createBlobServiceClient, its SDK retries included) through `proxy`,
 * and a direct one to look at what is stored.
 */
export function blobClients(proxy: FaultyProxy): { viaProxy: BlobServiceClient; direct: BlobServiceClient } {
  return {
    viaProxy: createBlobServiceClient(
      { endpoint: proxy.endpoint, accountName: AZURITE_ACCOUNT, accountKey: AZURITE_ACCOUNT_KEY },
      STORAGE_TIMEOUT_MS,
    ),
    direct: new BlobServiceClient(
      azurite().blobEndpoint,
      new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY),
    ),
  };
}
