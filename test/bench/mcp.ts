import http from 'node:http';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { apiKeysSetting, type Backend, backendSettings, newTenant, startApp } from '../support/app';
import { startAzurite } from '../support/cleanup';
import { memoryTableSettings } from '../support/tables';
import { alternate, fixed, interleave, measure, processCpuMs, type Summary, table } from './measure';

/**
 * `npm run bench -- mcp`: what the MCP layer costs. 1,000 facts in 10 namespaces (each read once
 * before measuring); in the same run, against the same app, a recall of a fact:
 *
 * - the HTTP route, `GET /api/memory/facts`, with node:http (keep-alive), and with `fetch` (the
 *   HTTP client the official MCP client uses);
 * - the `recall` tool over MCP, as a JSON-RPC `tools/call` POST to `/api/mcp` with the same
 *   node:http client and agent: the difference is the MCP layer on the server (JSON-RPC,
 *   validation, tool dispatch, the larger answer). The 1.3× target is this row's;
 * - the `recall` tool through the official MCP client SDK (`Client.callTool`, its own fetch), as
 *   an agent host calls it: the client's own work is included, on the same two cores as the app.
 *   It is compared with the route through node:http, and with the route through fetch (the same
 *   HTTP stack: what is left is the MCP work of both ends). No target: the client is not Cairn's.
 *
 * Each MCP way and its route are interleaved call by call (test/bench/measure.ts `interleave`):
 * every iteration recalls one fact both ways, in alternating order, so that both see the same
 * facts and the same moments of a loaded machine; a warm-up of both comes first. The app's CPU
 * time per call (from /proc, in 10 ms ticks) is measured apart, in short alternating blocks of
 * one way each (a tick cannot be split between two calls of a pair). On Table Storage (Blob
 * backend with a table service, Azurite) and on the local backend, at concurrency 1 and 8.
 */

const NAMESPACES = 10;
const FACTS_PER_NAMESPACE = 100;
/** Iterations (one call each way) per row, by concurrency: enough for a p95 of each. */
const PAIRS = { 1: 1000, 8: 1500 } as const;
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

const namespaceOf = (n: number) => `bench/ns${n}`;
const keyOf = (i: number) => `fact-${String(i).padStart(3, '0')}`;

function request(
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: string } = {},
) {
  return new Promise<string>((resolve, reject) => {
    // With its length, as fetch and the MCP clients send a body (not chunked).
    const headers =
      init.body === undefined
        ? init.headers
        : { ...init.headers, 'content-length': String(Buffer.byteLength(init.body)) };
    const call = http.request(url, { method: init.method ?? 'GET', headers, agent }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        const status = response.statusCode ?? 0;
        if (status >= 300) reject(new Error(`HTTP ${status} for ${init.method ?? 'GET'} ${url}`));
        else resolve(Buffer.concat(chunks).toString('utf8'));
      });
    });
    call.on('error', reject);
    call.end(init.body);
  });
}

interface BackendFigures {
  readonly rows: string[][];
  readonly verdicts: string[];
}

async function benchBackend(
  backend: Backend,
  endpoints: { blobEndpoint: string; tableEndpoint: string },
  progress: (line: string) => void,
): Promise<BackendFigures> {
  const tenant = newTenant('bench');
  const app = await startApp(
    {
      CAIRN_API_KEYS: apiKeysSetting([tenant]),
      ...backendSettings(backend, endpoints.blobEndpoint),
      ...(backend === 'blob' ? memoryTableSettings(endpoints.tableEndpoint) : {}),
    },
    undefined,
    { keepOutput: false },
  );
  const headers = { authorization: `Bearer ${tenant.key}`, 'content-type': 'application/json' };
  const factUrl = (n: number, i: number) =>
    `${app.url}/api/memory/facts?${new URLSearchParams({ namespace: namespaceOf(n), key: keyOf(i) }).toString()}`;

  await measure(NAMESPACES * FACTS_PER_NAMESPACE, 16, async (_worker, index) => {
    const n = Math.floor(index / FACTS_PER_NAMESPACE);
    const i = index % FACTS_PER_NAMESPACE;
    await request(factUrl(n, i), {
      method: 'PUT',
      headers,
      body: JSON.stringify({ value: { n, i, text: 'x'.repeat(200) } }),
    });
  });
  // Each fact read once, so that no way measures the storage's first reads (Azurite's are slow).
  await measure(NAMESPACES * FACTS_PER_NAMESPACE, 16, async (_worker, index) => {
    await request(factUrl(Math.floor(index / FACTS_PER_NAMESPACE), index % FACTS_PER_NAMESPACE), { headers });
  });
  progress(`${backend}: seeded ${NAMESPACES * FACTS_PER_NAMESPACE} facts`);

  // The fact of an iteration: spread over every namespace and key, the same for both ways.
  const factOf = (index: number) => {
    const hash = Math.imul(index + 1, 0x9e3779b1) >>> 0;
    return { n: hash % NAMESPACES, i: (hash >>> 8) % FACTS_PER_NAMESPACE };
  };

  const mcpHeaders = {
    ...headers,
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': '2025-11-25',
  };
  let id = 0;
  const route = async (_worker: number, index: number) => {
    const { n, i } = factOf(index);
    await request(factUrl(n, i), { headers });
  };
  const routeFetch = async (_worker: number, index: number) => {
    const { n, i } = factOf(index);
    const answer = await fetch(factUrl(n, i), { headers });
    await answer.text();
    if (answer.status !== 200) throw new Error(`HTTP ${answer.status} for GET ${factUrl(n, i)}`);
  };
  const jsonRpc = async (_worker: number, index: number) => {
    const { n, i } = factOf(index);
    const answer = await request(`${app.url}/api/mcp`, {
      method: 'POST',
      headers: mcpHeaders,
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: ++id,
        method: 'tools/call',
        params: { name: 'recall', arguments: { namespace: namespaceOf(n), key: keyOf(i) } },
      }),
    });
    if (answer.includes('"isError":true')) throw new Error(`recall failed: ${answer}`);
  };
  // Eight clients, one per worker, each with its own initialized connection; new ones for each
  // phase of a row, so that no client serves more than some 1,200 calls (the SDK client's fetch leaves an abort
  // listener behind on its transport's signal per call: a client serving every row would carry
  // thousands of them, and Node warns).
  let clients: Client[] = [];
  const connectClients = async () => {
    await Promise.all(clients.map((mcp) => mcp.close()));
    clients = await Promise.all(
      Array.from({ length: 8 }, async () => {
        const mcp = new Client({ name: 'cairn-bench', version: '1.0.0' });
        await mcp.connect(
          new StreamableHTTPClientTransport(new URL(`${app.url}/api/mcp`), {
            requestInit: { headers: { authorization: `Bearer ${tenant.key}` } },
          }),
        );
        return mcp;
      }),
    );
  };
  const sdk = async (worker: number, index: number) => {
    const { n, i } = factOf(index);
    const answer = await clients[worker]!.callTool({
      name: 'recall',
      arguments: { namespace: namespaceOf(n), key: keyOf(i) },
    });
    if (answer.isError === true) throw new Error('recall failed');
  };

  const rows: string[][] = [];
  const verdicts: string[] = [];
  // `target`: the server's MCP layer alone (the same client both ways), which the 1.3× is for.
  const ways = [
    ['MCP `recall`, JSON-RPC POST (same HTTP client)', 'node:http', route, jsonRpc, true],
    ['MCP `recall`, official client SDK', 'node:http', route, sdk, false],
    ['MCP `recall`, official client SDK', 'fetch', routeFetch, sdk, false],
  ] as const;
  const place = backend === 'blob' ? 'Table Storage' : 'local files';
  const appCpuMs = () => processCpuMs(app.child.pid ?? -1);
  for (const concurrency of [1, 8] as const) {
    for (const [label, via, baseline, way, target] of ways) {
      progress(`${backend}: ${label} against the route through ${via} at concurrency ${concurrency}`);
      await connectClients();
      const pairs = PAIRS[concurrency];
      const [http, mcp]: readonly [Summary, Summary] = await interleave(baseline, way, {
        count: pairs,
        concurrency,
        warmUp: pairs / 6,
      });
      // CPU apart: ten rounds of a block of each way (warm already).
      await connectClients();
      const [httpCpu, mcpCpu] = await alternate(baseline, way, {
        count: pairs / 2,
        concurrency,
        rounds: 10,
        warmUp: 0,
        cost: appCpuMs,
      });
      const p50 = mcp.p50Ms / http.p50Ms;
      const p95 = mcp.p95Ms / http.p95Ms;
      const cpuUs = (summary: Summary) => fixed((summary.costPerOp ?? NaN) * 1000, 0);
      rows.push([
        place,
        label,
        via,
        String(concurrency),
        target ? '≤ 1.3×' : 'none',
        `${fixed(http.p50Ms, 2)} / ${fixed(http.p95Ms, 2)}`,
        `${fixed(mcp.p50Ms, 2)} / ${fixed(mcp.p95Ms, 2)}`,
        `**${fixed(p50, 2)}× / ${fixed(p95, 2)}×**`,
        `${cpuUs(httpCpu)} / ${cpuUs(mcpCpu)}`,
        fixed(http.opsPerSecond, 0),
      ]);
      const ratios = `${fixed(p50, 2)}× p50, ${fixed(p95, 2)}× p95`;
      const where = `${place}, ${label} against the route through ${via}, concurrency ${concurrency}`;
      if (target) {
        const met = p50 <= 1.3 && p95 <= 1.3;
        verdicts.push(`- ${where}: ${ratios} (target ≤ 1.3×: ${met ? 'met' : 'missed'})`);
      } else {
        verdicts.push(`- ${where}: ${ratios} (no target: the client's own work included)`);
      }
    }
  }
  await Promise.all(clients.map((mcp) => mcp.close()));
  await app.stop();
  return { rows, verdicts };
}

export async function runMcpBench(progress: (line: string) => void): Promise<string> {
  const azurite = await startAzurite();
  const figures: BackendFigures[] = [];
  try {
    for (const backend of ['blob', 'local'] as const)
      figures.push(await benchBackend(backend, azurite, progress));
  } finally {
    await azurite.stop();
  }
  return [
    `### MCP \`recall\` against \`GET /api/memory/facts\`: ${NAMESPACES * FACTS_PER_NAMESPACE} facts, a random one per iteration, recalled both ways`,
    '',
    table(
      [
        'facts on',
        'MCP way',
        'route through',
        'concurrency',
        'target',
        'HTTP route p50 / p95 ms',
        'MCP p50 / p95 ms',
        'MCP/route p50 / p95',
        'app CPU µs/call route / MCP',
        'pairs/s',
      ],
      figures.flatMap((entry) => entry.rows),
    ),
    '',
    'Each row interleaves the MCP way with the route call by call (one fact both ways per',
    `iteration, in alternating order, after a warm-up of both; ${PAIRS[1]} iterations at concurrency 1, ${PAIRS[8]} at 8). The 1.3× target applies to the`,
    'JSON-RPC POST rows only: sent with the same node:http client and agent as the route, their',
    "ratio is the MCP layer on the server. The official client's rows keep its own work (JSON-RPC",
    'framing, schema validation of every answer, its fetch stack) on the same two cores as the app:',
    'an agent host pays that in its own process, not Cairn; against the route through fetch (its',
    "HTTP stack) what is left is the MCP work of client and server. The app's CPU per call (from",
    "/proc, in 10 ms ticks, in alternating blocks of one way each) is the server's share alone.",
    'At concurrency 8 a call mostly waits behind the seven others in flight, of both ways, so the',
    'two latencies come close by construction: there the CPU column tells the ways apart.',
    '',
    ...figures.flatMap((entry) => entry.verdicts),
  ].join('\n');
}
