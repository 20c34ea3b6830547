import { randomUUID } from 'node:crypto';
import http from 'node:http';

import { BlobServiceClient, StorageSharedKeyCredential } from '@azure/storage-blob';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import { claimDelivery } from '../../shared/coordination/chatCursors';
import { BlobKeyValueStoreFactory } from '../../shared/storage/azure/blobKeyValueStore';
import { apiKeysSetting, backendSettings, newTenant, startApp } from '../support/app';
import { startAzurite } from '../support/cleanup';
import { alternate, ratioCells, table } from './measure';
import { sized } from './mode';

/**
 * `npm run bench -- coordination`: in one process against one Azurite it starts itself,
 *
 * 1. uncontended chat delivery claims through Cairn's HTTP API (Blob backend; each worker claims one
 *    new message id per request on a chat of its own) against raw conditional blob writes of a
 *    cursor-sized value (`upload` with If-Match on the version the worker wrote last), alternating
 *    the two for two rounds each so that drift on a noisy machine hits both alike. Target: API ≥ 0.5×.
 * 2. 16-way contention on one chat cursor: 16 claimers offering the same 40 ids to an absent cursor
 *    (the case), and 16 claimers offering ids of their own (every one must win a write),
 *    over HTTP (claimed / nothing new / contention per request, and ids claimed twice: always 0),
 *    and in-process with the same `claimDelivery` on the Blob store to count the conditional writes
 *    each claim tried (never more than 4: after 4 lost writes a claim reports `contention`).
 *
 * No figure is asserted; the table is the result. Each measurement takes a few seconds.
 */

const WORKERS = 8;
const CLAIMS_PER_ROUND = sized(400, 40);
const CONTENTION_ROUNDS = sized(10, 2);
const CLAIMERS = 16;
const IDS_PER_CHAT = 40;

/** Teams-like message ids: millisecond timestamps of equal length, growing. */
const messageId = (n: number) => String(1_764_450_000_000 + n);

const SAME_IDS = Array.from({ length: IDS_PER_CHAT }, (_, i) => messageId(i));

/** A cursor of 50 seen ids, the size a claim writes in the steady state. */
const CURSOR_VALUE = Buffer.from(
  JSON.stringify({
    last_ts: '2026-11-29T21:16:51.123Z',
    seen_ids_tail: Array.from({ length: 50 }, (_, i) => messageId(i)),
    bootstrapped: true,
    last_written_at: '2026-11-29T21:16:52.000Z',
  }) + '\n',
);

interface ClaimAnswer {
  claimed: string[];
  reason: string | null;
}

/**
 * The API client: node's http with keep-alive, the transport the Azure SDK uses for the raw writes
 * (as in the kv benchmark), so that the comparison is of the servers, not of two client stacks.
 */
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

function postJson(url: string, apiKey: string, body: unknown): Promise<ClaimAnswer> {
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const request = http.request(
      url,
      {
        method: 'POST',
        agent,
        headers: {
          authorization: `Bearer ${apiKey}`,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(payload),
        },
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => {
          const text = Buffer.concat(chunks).toString();
          if (response.statusCode !== 200) reject(new Error(`HTTP ${response.statusCode}: ${text}`));
          else resolve(JSON.parse(text) as ClaimAnswer);
        });
      },
    );
    request.on('error', reject);
    request.end(payload);
  });
}

export async function runCoordinationBench(): Promise<string> {
  const azurite = await startAzurite();
  const tenant = newTenant('bench');
  const app = await startApp(
    { CAIRN_API_KEYS: apiKeysSetting([tenant]), ...backendSettings('blob', azurite.blobEndpoint) },
    undefined,
    { keepOutput: false },
  );
  try {
    const claim = (chat: string, candidateIds: string[]) =>
      postJson(`${app.url}/api/chats/${encodeURIComponent(chat)}/claims`, tenant.key, { candidateIds });

    // Raw: one blob per worker, each write conditional on the version the worker wrote last.
    const service = new BlobServiceClient(
      azurite.blobEndpoint,
      new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY),
    );
    const container = service.getContainerClient(`raw${randomUUID().replaceAll('-', '').slice(0, 16)}`);
    await container.create();
    const rawEtags: string[] = [];
    for (let worker = 0; worker < WORKERS; worker++) {
      const response = await container
        .getBlockBlobClient(`cursor-${worker}`)
        .upload(CURSOR_VALUE, CURSOR_VALUE.length);
      rawEtags[worker] = response.etag ?? '';
    }
    const rawWrite = async (worker: number) => {
      const response = await container
        .getBlockBlobClient(`cursor-${worker}`)
        .upload(CURSOR_VALUE, CURSOR_VALUE.length, { conditions: { ifMatch: rawEtags[worker] ?? '' } });
      rawEtags[worker] = response.etag ?? '';
    };

    // API: one chat per worker (created by a first claim), one new id per claim.
    const chats = Array.from({ length: WORKERS }, (_, worker) => `19:bench-${worker}@thread.v2`);
    const nextId = Array.from({ length: WORKERS }, () => 0);
    let apiMisses = 0;
    const apiClaim = async (worker: number) => {
      const id = messageId(nextId[worker]!++);
      const answer = await claim(chats[worker]!, [id]);
      if (answer.claimed.length !== 1) apiMisses++;
    };
    for (let worker = 0; worker < WORKERS; worker++) await apiClaim(worker);

    const rows: string[][] = [];
    for (const concurrency of [1, WORKERS]) {
      const [rawSummary, apiSummary] = await alternate(
        (worker) => rawWrite(worker),
        (worker) => apiClaim(worker),
        { count: CLAIMS_PER_ROUND, concurrency, rounds: 2, warmUp: 40 },
      );
      rows.push([String(concurrency), ...ratioCells(rawSummary, apiSummary)]);
    }

    // 16-way contention, two ways: the case (16 claimers, the same 40 ids, an absent cursor:
    // the first write takes all, the others find nothing new) and the hard case (16 claimers offering
    // ids of their own to one cursor: every claimer must win a write, so they really contend).
    const scenarios: { name: string; offer: (claimer: number, round: number) => string[] }[] = [
      { name: `same ${IDS_PER_CHAT} ids, absent cursor`, offer: () => SAME_IDS },
      {
        name: 'own 2 ids each, one cursor',
        offer: (claimer, round) => [
          messageId(1000 * round + 2 * claimer),
          messageId(1000 * round + 2 * claimer + 1),
        ],
      },
    ];
    const httpRows: string[][] = [];
    for (const scenario of scenarios) {
      const counts = { requests: 0, claimed: 0, nothingNew: 0, contention: 0, unresolved: 0, twice: 0 };
      for (let round = 0; round < CONTENTION_ROUNDS; round++) {
        const chat = `19:contended-${round}-${randomUUID().slice(0, 8)}@thread.v2`;
        const answers = await Promise.all(
          Array.from({ length: CLAIMERS }, (_, claimer) => claim(chat, scenario.offer(claimer, round))),
        );
        for (const answer of answers) {
          counts.requests++;
          if (answer.claimed.length > 0) counts.claimed++;
          else if (answer.reason === 'contention') counts.contention++;
          else if (answer.reason === 'unresolved') counts.unresolved++;
          else counts.nothingNew++;
        }
        const all = answers.flatMap((answer) => answer.claimed);
        counts.twice += all.length - new Set(all).size;
      }
      httpRows.push([
        scenario.name,
        String(counts.requests),
        String(counts.claimed),
        String(counts.nothingNew),
        String(counts.contention),
        String(counts.unresolved),
        String(counts.twice),
      ]);
    }

    // The same in-process, to see the attempts each claim took (the HTTP answer does not carry them).
    const store = new BlobKeyValueStoreFactory(
      service,
      `b${randomUUID().replaceAll('-', '').slice(0, 20)}`,
      2 * 1024 * 1024,
      8000,
    ).forTenant(tenant.tenant);
    const attemptRows: string[][] = [];
    for (const scenario of scenarios) {
      const buckets = new Map<string, number>();
      let maxAttempts = 0;
      let twice = 0;
      for (let round = 0; round < CONTENTION_ROUNDS; round++) {
        const chat = `19:direct-${round}-${randomUUID().slice(0, 8)}@thread.v2`;
        const claims = await Promise.all(
          Array.from({ length: CLAIMERS }, (_, claimer) =>
            claimDelivery(store, chat, scenario.offer(claimer, round)),
          ),
        );
        for (const result of claims) {
          maxAttempts = Math.max(maxAttempts, result.attempts);
          const bucket =
            result.reason !== null
              ? result.reason
              : result.claimed.length > 0
                ? `won in ${result.attempts}`
                : 'nothing new';
          buckets.set(bucket, (buckets.get(bucket) ?? 0) + 1);
        }
        const all = claims.flatMap((result) => result.claimed);
        twice += all.length - new Set(all).size;
      }
      attemptRows.push([
        scenario.name,
        ...[1, 2, 3, 4].map((n) => String(buckets.get(`won in ${n}`) ?? 0)),
        String(buckets.get('nothing new') ?? 0),
        String(buckets.get('contention') ?? 0),
        String(buckets.get('unresolved') ?? 0),
        String(maxAttempts),
        String(twice),
      ]);
    }

    return [
      '### Uncontended chat delivery claims (HTTP API, Blob backend) vs raw conditional blob writes',
      '',
      table(
        [
          'concurrency',
          'raw If-Match writes/s',
          'raw p50 / p99 ms',
          'API claims/s',
          'API p50 / p99 ms',
          'API/raw (target ≥ 0.5×)',
        ],
        rows,
      ),
      '',
      `Claims that did not claim their one new id: ${apiMisses}.`,
      '',
      `### 16-way contention: ${CLAIMERS} concurrent claimers on one chat cursor, ${CONTENTION_ROUNDS} rounds each`,
      '',
      'Over HTTP (each answer: claimed something, nothing new, or a reason):',
      '',
      table(
        ['scenario', 'claims', 'claimed', 'nothing new', 'contention', 'unresolved', 'ids claimed twice'],
        httpRows,
      ),
      '',
      'In-process `claimDelivery` on the Blob store, by the conditional writes each claim tried (never more than 4):',
      '',
      table(
        [
          'scenario',
          'won in 1',
          'won in 2',
          'won in 3',
          'won in 4',
          'nothing new',
          'contention',
          'unresolved',
          'max attempts',
          'ids claimed twice',
        ],
        attemptRows,
      ),
    ].join('\n');
  } finally {
    await app.stop();
    await azurite.stop();
  }
}

if (require.main === module) {
  runCoordinationBench().then(
    (text) => {
      console.log(text);
      process.exit(0);
    },
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
