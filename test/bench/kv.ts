import { randomUUID } from 'node:crypto';
import http from 'node:http';

import { BlobServiceClient, StorageSharedKeyCredential } from '@azure/storage-blob';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import { LocalKeyValueStoreFactory } from '../../shared/storage/local/localKeyValueStore';
import { apiKeysSetting, backendSettings, newTenant, startApp } from '../support/app';
import { tempDir } from '../support/cleanup';
import { startAzurite } from '../support/cleanup';
import { alternate, fixed, measure, ratioCells, table, watchRss } from './measure';
import { sized } from './mode';

/**
 * `npm run bench -- kv`: in one process against one Azurite, the same operations as raw
 * `@azure/storage-blob` calls and through Cairn's HTTP API (Blob backend), and the local backend
 * through HTTP against direct calls of the same store class. Raw and API runs alternate (five
 * rounds each, of a fifth of the operations) so that drift on a noisy machine hits both alike.
 */

type Operation = (worker: number, index: number) => Promise<unknown>;

interface Target {
  /** Creates or replaces the key and remembers its ETag for `cas`. */
  seed: Operation;
  get: Operation;
  put: Operation;
  cas: Operation;
  append: Operation;
  list: Operation;
}

const VALUE = Buffer.alloc(1024, 0x61);
const LINE = Buffer.alloc(100, 0x62);
const KEYS_PER_WORKER = 16;
const WORKERS = 8;
const key = (worker: number, index: number) => `bench/w${worker}/k${index % KEYS_PER_WORKER}`;
/** Conditional PUTs have keys of their own: unconditional PUTs would change their versions. */
const casKey = (worker: number, index: number) => `cas/w${worker}/k${index % KEYS_PER_WORKER}`;

/**
 * The API client: node's http with keep-alive, the same transport the Azure SDK uses for the raw
 * calls, so that the comparison is of the servers, not of two client stacks.
 */
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

interface Reply {
  readonly status: number;
  readonly etag: string | undefined;
}

function call(
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: Buffer | string } = {},
) {
  return new Promise<Reply>((resolve, reject) => {
    const request = http.request(
      url,
      { method: init.method ?? 'GET', headers: init.headers, agent },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => {
          const status = response.statusCode ?? 0;
          if (status >= 300) reject(new Error(`HTTP ${status}: ${Buffer.concat(chunks).toString()}`));
          else resolve({ status, etag: response.headers.etag });
        });
      },
    );
    request.on('error', reject);
    request.end(init.body);
  });
}

function httpTarget(baseUrl: string, apiKey: string, etags: Map<string, string>): Target {
  const headers = { authorization: `Bearer ${apiKey}` };
  const kv = (k: string) => `${baseUrl}/api/kv/${k}`;
  return {
    seed: async (w, i) => {
      await call(kv(key(w, i)), { method: 'PUT', headers, body: VALUE });
      const response = await call(kv(casKey(w, i)), { method: 'PUT', headers, body: VALUE });
      etags.set(casKey(w, i), response.etag ?? '');
    },
    get: (w, i) => call(kv(key(w, i)), { headers }),
    put: (w, i) => call(kv(key(w, i)), { method: 'PUT', headers, body: VALUE }),
    cas: async (w, i) => {
      const k = casKey(w, i);
      const response = await call(kv(k), {
        method: 'PUT',
        headers: { ...headers, 'if-match': etags.get(k) ?? '"none"' },
        body: VALUE,
      });
      etags.set(k, response.etag ?? '');
    },
    append: (w) => call(kv(`append/w${w}`), { method: 'POST', headers, body: LINE }),
    list: () => call(`${baseUrl}/api/keys?prefix=list/&limit=100`, { headers }),
  };
}

export async function runKvBench(): Promise<string> {
  const azurite = await startAzurite();
  const tenant = newTenant('bench');
  const common = { CAIRN_API_KEYS: apiKeysSetting([tenant]) };
  const quiet = { keepOutput: false };
  const blobApp = await startApp(
    { ...common, ...backendSettings('blob', azurite.blobEndpoint) },
    undefined,
    quiet,
  );
  const localApp = await startApp(
    { ...common, ...backendSettings('local', azurite.blobEndpoint) },
    undefined,
    quiet,
  );
  const blobRss = watchRss(blobApp.child.pid ?? 0);
  const localRss = watchRss(localApp.child.pid ?? 0);

  const service = new BlobServiceClient(
    azurite.blobEndpoint,
    new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY),
  );
  const container = service.getContainerClient(`raw${randomUUID().replaceAll('-', '').slice(0, 16)}`);
  await container.create();
  const rawEtags = new Map<string, string>();
  const raw: Target = {
    seed: async (w, i) => {
      await container.getBlockBlobClient(key(w, i)).upload(VALUE, VALUE.length);
      const response = await container.getBlockBlobClient(casKey(w, i)).upload(VALUE, VALUE.length);
      rawEtags.set(casKey(w, i), response.etag ?? '');
    },
    get: async (w, i) => {
      const response = await container.getBlockBlobClient(key(w, i)).download();
      for await (const chunk of response.readableStreamBody ?? []) void chunk;
    },
    put: (w, i) => container.getBlockBlobClient(key(w, i)).upload(VALUE, VALUE.length),
    cas: async (w, i) => {
      const k = casKey(w, i);
      const response = await container
        .getBlockBlobClient(k)
        .upload(VALUE, VALUE.length, { conditions: { ifMatch: rawEtags.get(k) ?? '"none"' } });
      rawEtags.set(k, response.etag ?? '');
    },
    append: (w) => container.getAppendBlobClient(`append/w${w}`).appendBlock(LINE, LINE.length),
    list: async () => {
      await container.listBlobsFlat({ prefix: 'list/' }).byPage({ maxPageSize: 100 }).next();
    },
  };

  const localDir = tempDir('bench-direct');
  const directStore = new LocalKeyValueStoreFactory(localDir, 2 * 1024 * 1024).forTenant(tenant.tenant);
  const directEtags = new Map<string, string>();
  const direct: Target = {
    seed: async (w, i) => {
      await directStore.write(key(w, i), VALUE);
      directEtags.set(casKey(w, i), (await directStore.write(casKey(w, i), VALUE)).etag);
    },
    get: (w, i) => directStore.read(key(w, i)),
    put: (w, i) => directStore.write(key(w, i), VALUE),
    cas: async (w, i) => {
      const k = casKey(w, i);
      const result = await directStore.write(k, VALUE, { ifMatch: directEtags.get(k) ?? '"none"' });
      directEtags.set(k, result.etag);
    },
    append: (w) => directStore.append(`append/w${w}`, LINE),
    list: () => directStore.list({ prefix: 'list/', limit: 100 }),
  };

  const apiBlob = httpTarget(blobApp.url, tenant.key, new Map());
  const apiLocal = httpTarget(localApp.url, tenant.key, new Map());

  // Seed: every key exists (so PUT replaces and conditional PUT has a version), 200 keys to list.
  const listKeys = Array.from({ length: sized(200, 20) }, (_, i) => `list/${String(i).padStart(4, '0')}`);
  for (const target of [raw, apiBlob, apiLocal, direct]) {
    await measure(WORKERS * KEYS_PER_WORKER, 8, (_w, i) =>
      target.seed(Math.floor(i / KEYS_PER_WORKER), i % KEYS_PER_WORKER),
    );
  }
  for (let w = 0; w < WORKERS; w++) await container.getAppendBlobClient(`append/w${w}`).create();
  await measure(listKeys.length, 8, (_w, i) => container.getBlockBlobClient(listKeys[i]!).upload('x', 1));
  for (const baseUrl of [blobApp.url, localApp.url]) {
    await measure(listKeys.length, 8, (_w, i) =>
      call(`${baseUrl}/api/kv/${listKeys[i]!}`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${tenant.key}` },
        body: 'x',
      }),
    );
  }
  await measure(listKeys.length, 8, (_w, i) => directStore.write(listKeys[i]!, Buffer.from('x')));

  type Measured = Exclude<keyof Target, 'seed'>;
  const operations: Measured[] = ['get', 'put', 'cas', 'append', 'list'];
  const labels: Record<Measured, string> = {
    get: 'GET',
    put: 'PUT (replace)',
    cas: 'conditional PUT (If-Match)',
    append: 'append (POST)',
    list: 'list page of 100',
  };
  // Enough operations per figure that one scheduling hiccup of the machine does not decide it.
  const counts = (operation: Measured, concurrency: number) =>
    (operation === 'list' ? sized(60, 4) : sized(240, 8)) * (concurrency === 1 ? 1 : 8);
  const ROUNDS = sized(5, 1);

  // The warm-up is half as many operations again, on each side: what is measured is the steady
  // state, after V8 has compiled the hot paths of the SDK, the server and the client.
  const compare = (a: Target, b: Target, operation: Measured, concurrency: number) =>
    alternate(a[operation], b[operation], {
      count: counts(operation, concurrency),
      concurrency,
      rounds: ROUNDS,
      warmUp: counts(operation, concurrency) / 2,
    });

  const blobRows: string[][] = [];
  const localRows: string[][] = [];
  for (const operation of operations) {
    for (const concurrency of [1, 8]) {
      const [rawSummary, apiSummary] = await compare(raw, apiBlob, operation, concurrency);
      blobRows.push([labels[operation], String(concurrency), ...ratioCells(rawSummary, apiSummary)]);
      const [directSummary, httpSummary] = await compare(direct, apiLocal, operation, concurrency);
      localRows.push([
        labels[operation],
        String(concurrency),
        fixed(directSummary.opsPerSecond, 0),
        `${fixed(directSummary.p50Ms, 2)} / ${fixed(directSummary.p99Ms, 2)}`,
        fixed(httpSummary.opsPerSecond, 0),
        `${fixed(httpSummary.p50Ms, 2)} / ${fixed(httpSummary.p99Ms, 2)}`,
        `**+${fixed(httpSummary.p50Ms - directSummary.p50Ms, 2)} ms**`,
      ]);
    }
  }
  const peakBlob = blobRss.stop();
  const peakLocal = localRss.stop();
  await blobApp.stop();
  await localApp.stop();
  await azurite.stop();

  return [
    '### Blob backend (Azurite): raw `@azure/storage-blob` vs the HTTP API',
    '',
    table(
      [
        'operation',
        'concurrency',
        'raw ops/s',
        'raw p50 / p99 ms',
        'API ops/s',
        'API p50 / p99 ms',
        'API/raw',
      ],
      blobRows,
    ),
    '',
    '### Local backend: direct store calls vs the HTTP API',
    '',
    table(
      [
        'operation',
        'concurrency',
        'direct ops/s',
        'direct p50 / p99 ms',
        'API ops/s',
        'API p50 / p99 ms',
        'HTTP adds (p50)',
      ],
      localRows,
    ),
    '',
    `Peak RSS of the local runtime during the benchmark: ${fixed(peakBlob, 0)} MB (Blob backend), ${fixed(peakLocal, 0)} MB (local backend).`,
  ].join('\n');
}
