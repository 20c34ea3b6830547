import http from 'node:http';

import type { TableEntity } from '@azure/data-tables';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import { createTableClient } from '../../shared/storage/azure/clients';
import { rowKeyOf } from '../../shared/storage/azure/tableMemoryStore';
import { apiKeysSetting, backendSettings, newTenant, startApp } from '../support/app';
import { startAzurite } from '../support/cleanup';
import { memoryTableSettings } from '../support/tables';
import { alternate, fixed, measure, type Summary, table, watchRss } from './measure';
import { sized } from './mode';

/**
 * `npm run bench -- memory`: 10,000 facts in 100 namespaces on Azurite's Table service, and in the
 * same run, on the same table, each memory operation over HTTP against the raw Table Storage call
 * it maps onto:
 *
 * - recall (GET /api/memory/facts) against `getEntity` of the fact's row;
 * - remember (PUT, replacing an existing fact) against `upsertEntity` of the same row (remember is
 *   a conditional write on the version the instance knows, or a read and a conditional write when
 *   it knows none or a stale one: a raw upsert of a row makes the app's known version stale);
 * - search with text, limit 10, in one namespace (POST /api/memory/search) against the range query
 *   that reads that namespace's rows (all 100 of them, as the search does before ranking).
 *
 * Raw and API runs alternate (five rounds each, after a warm-up), at concurrency 1 and 8. Targets:
 * recall at least 0.6× raw get; search p95 under 100 ms.
 */

const NAMESPACES = sized(100, 5);
const FACTS_PER_NAMESPACE = 100;
const VOCABULARY = Array.from({ length: 400 }, (_, i) => `word${i.toString(36)}`);
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

/** A deterministic pseudo-random sequence, so every run stores and asks for the same things. */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    return state / 2 ** 31;
  };
}

const namespaceOf = (n: number) => `bench/ns${String(n).padStart(2, '0')}`;
const keyOf = (i: number) => `fact-${String(i).padStart(3, '0')}`;

function valueOf(next: () => number, n: number, i: number): { text: string; n: number; i: number } {
  const text = Array.from({ length: 16 }, () => VOCABULARY[Math.floor(next() * VOCABULARY.length)]).join(' ');
  return { text, n, i };
}

function request(
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: string } = {},
) {
  return new Promise<number>((resolve, reject) => {
    const call = http.request(
      url,
      { method: init.method ?? 'GET', headers: init.headers, agent },
      (response) => {
        response.on('data', () => {});
        response.on('end', () => {
          const status = response.statusCode ?? 0;
          if (status >= 300) reject(new Error(`HTTP ${status} for ${init.method ?? 'GET'} ${url}`));
          else resolve(status);
        });
      },
    );
    call.on('error', reject);
    call.end(init.body);
  });
}

export async function runMemoryBench(progress: (line: string) => void): Promise<string> {
  const azurite = await startAzurite();
  const tenant = newTenant('bench');
  const tableSettings = memoryTableSettings(azurite.tableEndpoint);
  const app = await startApp(
    {
      CAIRN_API_KEYS: apiKeysSetting([tenant]),
      ...backendSettings('blob', azurite.blobEndpoint),
      ...tableSettings,
    },
    undefined,
    { keepOutput: false },
  );
  const rss = watchRss(app.child.pid ?? 0);
  const tableName = tableSettings['CAIRN_MEMORY_TABLE'] ?? '';
  const tableClient = createTableClient(
    { endpoint: azurite.tableEndpoint, accountName: AZURITE_ACCOUNT, accountKey: AZURITE_ACCOUNT_KEY },
    tableName,
  );
  const headers = { authorization: `Bearer ${tenant.key}`, 'content-type': 'application/json' };
  const factUrl = (n: number, i: number) =>
    `${app.url}/api/memory/facts?${new URLSearchParams({ namespace: namespaceOf(n), key: keyOf(i) }).toString()}`;

  // Seed through the API: what the raw calls then read are the rows Cairn wrote.
  const seed = random(42);
  const values = Array.from({ length: NAMESPACES * FACTS_PER_NAMESPACE }, (_, index) =>
    valueOf(seed, Math.floor(index / FACTS_PER_NAMESPACE), index % FACTS_PER_NAMESPACE),
  );
  const seeding = await measure(values.length, 16, async (_worker, index) => {
    const value = values[index];
    if (value === undefined) return;
    await request(factUrl(value.n, value.i), { method: 'PUT', headers, body: JSON.stringify({ value }) });
    if (index % 2000 === 1999) progress(`seeded ${index + 1} facts`);
  });

  const pick = random(7);
  const anyFact = () => ({
    n: Math.floor(pick() * NAMESPACES),
    i: Math.floor(pick() * FACTS_PER_NAMESPACE),
  });
  const query = () =>
    `${VOCABULARY[Math.floor(pick() * VOCABULARY.length)]} ${VOCABULARY[Math.floor(pick() * VOCABULARY.length)]}`;
  // The row a remember of (n, i) writes, as Cairn writes it (the plain codec stores the JSON): the
  // raw upsert replaces the same rows of the same partition, so both sides work on the same data.
  const rawUpsertEntity = (n: number, i: number): TableEntity => ({
    partitionKey: tenant.tenant,
    rowKey: rowKeyOf(namespaceOf(n), keyOf(i)),
    ns: namespaceOf(n),
    key: keyOf(i),
    value: Buffer.from(JSON.stringify(values[n * FACTS_PER_NAMESPACE + i])),
    createdAt: { value: String(Date.now()), type: 'Int64' },
    updatedAt: { value: String(Date.now()), type: 'Int64' },
  });

  const api = {
    recall: async () => {
      const { n, i } = anyFact();
      await request(factUrl(n, i), { headers });
    },
    remember: async () => {
      const { n, i } = anyFact();
      await request(factUrl(n, i), {
        method: 'PUT',
        headers,
        body: JSON.stringify({ value: values[n * FACTS_PER_NAMESPACE + i] }),
      });
    },
    search: async () => {
      const n = Math.floor(pick() * NAMESPACES);
      await request(`${app.url}/api/memory/search`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ namespace: namespaceOf(n), text: query(), limit: 10 }),
      });
    },
  };
  const raw = {
    recall: async () => {
      const { n, i } = anyFact();
      await tableClient.getEntity(tenant.tenant, rowKeyOf(namespaceOf(n), keyOf(i)));
    },
    remember: async () => {
      const { n, i } = anyFact();
      await tableClient.upsertEntity(rawUpsertEntity(n, i), 'Replace');
    },
    search: async () => {
      const n = Math.floor(pick() * NAMESPACES);
      const start = rowKeyOf(namespaceOf(n), '').split('-')[0] ?? '';
      const end = start.slice(0, -1) + String.fromCharCode(start.charCodeAt(start.length - 1) + 1);
      const rows = tableClient.listEntities({
        queryOptions: {
          filter: `PartitionKey eq '${tenant.tenant}' and RowKey ge '${start}' and RowKey lt '${end}'`,
        },
      });
      for await (const page of rows.byPage({ maxPageSize: 1000 })) void page;
    },
  };
  const labels = {
    recall: ['recall (GET /api/memory/facts)', 'getEntity'],
    remember: ['remember (PUT, replace)', 'upsertEntity (Replace)'],
    search: ['search, text, limit 10, one namespace of 100', 'range query of that namespace'],
  } as const;
  const counts = { recall: sized(400, 20), remember: sized(400, 20), search: sized(200, 12) };

  const rows: string[][] = [];
  const summaries = new Map<string, readonly [Summary, Summary]>();
  for (const operation of ['recall', 'remember', 'search'] as const) {
    for (const concurrency of [1, 8]) {
      progress(`${operation} at concurrency ${concurrency}`);
      const count = counts[operation] * (concurrency === 1 ? 1 : 4);
      const result = await alternate(raw[operation], api[operation], {
        count,
        concurrency,
        rounds: 5,
        warmUp: count / 4,
      });
      summaries.set(`${operation}/${concurrency}`, result);
      const [rawSummary, apiSummary] = result;
      rows.push([
        labels[operation][0],
        labels[operation][1],
        String(concurrency),
        fixed(rawSummary.opsPerSecond, 0),
        `${fixed(rawSummary.p50Ms)} / ${fixed(rawSummary.p95Ms)}`,
        fixed(apiSummary.opsPerSecond, 0),
        `${fixed(apiSummary.p50Ms)} / ${fixed(apiSummary.p95Ms)}`,
        `**${fixed(apiSummary.opsPerSecond / rawSummary.opsPerSecond, 2)}×**`,
      ]);
    }
  }
  const peak = rss.stop();
  await app.stop();
  await azurite.stop();

  const verdicts = [1, 8].map((concurrency) => {
    const [rawGet, recall] = summaries.get(`recall/${concurrency}`) ?? [];
    const [, search] = summaries.get(`search/${concurrency}`) ?? [];
    const ratio = (recall?.opsPerSecond ?? NaN) / (rawGet?.opsPerSecond ?? NaN);
    return `- concurrency ${concurrency}: recall ${fixed(ratio, 2)}× raw get (target ≥ 0.6×: ${ratio >= 0.6 ? 'met' : 'missed'}); search p95 ${fixed(search?.p95Ms ?? NaN)} ms (target < 100 ms: ${(search?.p95Ms ?? Infinity) < 100 ? 'met' : 'missed'})`;
  });

  return [
    `### Memory on Table Storage (Azurite): ${NAMESPACES * FACTS_PER_NAMESPACE} facts in ${NAMESPACES} namespaces, HTTP API vs the raw Table call`,
    '',
    `Seeded through the API at 16 in flight: ${fixed(seeding.ops / seeding.seconds, 0)} facts/s.`,
    '',
    table(
      [
        'API operation',
        'raw Table call',
        'concurrency',
        'raw ops/s',
        'raw p50 / p95 ms',
        'API ops/s',
        'API p50 / p95 ms',
        'API/raw',
      ],
      rows,
    ),
    '',
    ...verdicts,
    '',
    `Peak RSS of the local runtime during the benchmark: ${fixed(peak, 0)} MB.`,
  ].join('\n');
}
