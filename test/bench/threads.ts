import { promises as fs, statSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import { BlobServiceClient, StorageSharedKeyCredential } from '@azure/storage-blob';
import { CairnClient, CairnHttpError, type HttpSender, nodeHttpSender } from '@cairn-state/client';
import { CairnCheckpointSaver } from '@cairn-state/langgraph';
import { AIMessage, type BaseMessage, HumanMessage } from '@langchain/core/messages';
import type { RunnableConfig } from '@langchain/core/runnables';
import { END, MessagesAnnotation, START, StateGraph } from '@langchain/langgraph';
import {
  type BaseCheckpointSaver,
  type Checkpoint,
  type CheckpointMetadata,
  uuid6,
} from '@langchain/langgraph-checkpoint';
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import { spaceContainerName } from '../../shared/storage/azure/blobKeyValueStore';
import { LocalKeyValueStoreFactory } from '../../shared/storage/local/localKeyValueStore';
import { FANOUT, MAX_SEGMENTS } from '../../shared/threads/chunks';
import { parseDataKey, threadKey } from '../../shared/threads/layout';
import {
  decodeCheckpointRecord,
  decodeThreadRecord,
  isChunkedSource,
  isInlineSource,
  producerOf,
  producersNamed,
} from '../../shared/threads/records';
import { apiKeysSetting, backendSettings, newTenant, type RunningApp, startApp } from '../support/app';
import { startAzurite, tempDir } from '../support/cleanup';
import { fixed, measure, type Measurement, percentile, table, watchRss } from './measure';
import { sized } from './mode';

/**
 * `npm run bench -- threads`: the LangGraph checkpointer on Cairn's thread store, next to
 * LangGraph's own `SqliteSaver` (`@langchain/langgraph-checkpoint-sqlite`, a file on this machine's
 * disk), in one process against an Azurite and apps it starts itself:
 *
 * 1. Growth: a 200-turn conversation (one user and one assistant message a turn; the assistant is a
 *    deterministic stub, no model) through the same `StateGraph` with the messages reducer, once per
 *    saver. Cairn's bytes are every file of the tenant's thread space on the local backend (values,
 *    checkpoint records, pending writes, the thread record), measured after each turn; the same
 *    conversation on the Blob backend is summed from the container's blob list at the end. The
 *    serialised messages are the messages channel's value at the last checkpoint, as the saver sent
 *    it (read back through the API); the storage requests of a getTuple of the latest are counted
 *    from its stored record (thread record, pending writes, one read per pack its values name).
 *    SqliteSaver's are the bytes of its rows (every column of `checkpoints` and `writes`: ids,
 *    serialised checkpoints, metadata and writes, without SQLite's page and index overhead) after
 *    each turn, and the database file at the end after a WAL checkpoint (TRUNCATE).
 * 2. Speed: `put` (one changed channel of about 6 KB, as a turn of that conversation) and `getTuple`
 *    of the latest, one at a time through the saver over HTTP against the Blob backend on Azurite,
 *    and 8 concurrent threads each doing put + putWrites + getTuple; the same with SqliteSaver.
 * 3. Runs, on two app instances on one Azurite: 16 concurrent `reject` starters on a fresh thread,
 *    half through each instance, in each of 20 repetitions (exactly one may start); a holder that
 *    stops renewing a 2 s lease, and how long until another instance's starter gets the thread.
 * 4. Peak RSS of each app while all of the above runs (target: under 256 MB).
 *
 * No figure is asserted; the tables are the result.
 */

const TURNS = sized(200, 10);
const SPEED_OPS = sized(300, 30);
const WORKERS = 8;
const ROUNDS_PER_WORKER = sized(40, 4);
const RACES = sized(20, 2);
const STARTERS = 16;
const LEASE_SECONDS = 2;
const LEASE_TRIALS = sized(3, 1);
const GROWTH_ROWS = new Set([1, 2, 10, 50, 100, 150, 200]);
/** The growth of a turn is also given as the mean of the turns up to it, this many. */
const MEAN_OF = 10;
/** Targets of values stored by what they add (docs/threads.md, "Storage layout and cost"). */
const STORED_PER_MESSAGE_BYTES = 3;
const LINEAR_GROWTH = 1.5;

const userText = (turn: number) =>
  `Turn ${turn}: could you summarise where we are with the migration plan, and list what is still open for the next release? Keep it short.`;
const assistantText = (turn: number) =>
  `Here is where we are after turn ${turn}: the storage move is done and the API is stable. Three items remain: retention, the audit export and the dashboard. I would start with retention, since it bounds what the other two store.`;

function conversation(checkpointer: BaseCheckpointSaver) {
  let turn = 0;
  return new StateGraph(MessagesAnnotation)
    .addNode('assistant', () => ({ messages: [new AIMessage(assistantText(++turn))] }))
    .addEdge(START, 'assistant')
    .addEdge('assistant', END)
    .compile({ checkpointer });
}

/** Bytes of every file under `folder` (0 when it does not exist). */
async function filesBytes(folder: string): Promise<number> {
  let entries;
  try {
    entries = await fs.readdir(folder, { withFileTypes: true });
  } catch (error) {
    if ((error as { code?: unknown }).code === 'ENOENT') return 0;
    throw error;
  }
  const sizes = await Promise.all(
    entries.map(async (entry) => {
      const file = path.join(folder, entry.name);
      if (entry.isDirectory()) return filesBytes(file);
      return entry.isFile() ? (await fs.stat(file)).size : 0;
    }),
  );
  return sizes.reduce((a, b) => a + b, 0);
}

/** What this bench uses of better-sqlite3's `Database` (the package ships no types). */
interface SqliteDatabase {
  prepare(sql: string): { get(): unknown };
  pragma(statement: string): unknown;
  close(): void;
}

const databaseOf = (saver: SqliteSaver) => saver.db as unknown as SqliteDatabase;

function sqliteRowBytes(saver: SqliteSaver): number {
  const row = (sql: string) => (databaseOf(saver).prepare(sql).get() as { bytes: number | null }).bytes ?? 0;
  return (
    row(`SELECT SUM(LENGTH(thread_id) + LENGTH(checkpoint_ns) + LENGTH(checkpoint_id)
         + COALESCE(LENGTH(parent_checkpoint_id), 0) + COALESCE(LENGTH(type), 0)
         + LENGTH(checkpoint) + LENGTH(metadata)) AS bytes FROM checkpoints`) +
    row(`SELECT SUM(LENGTH(thread_id) + LENGTH(checkpoint_ns) + LENGTH(checkpoint_id) + LENGTH(task_id)
         + 8 + LENGTH(channel) + COALESCE(LENGTH(type), 0) + LENGTH(value)) AS bytes FROM writes`)
  );
}

/** An HTTP sender that counts the requests it sends. */
function countingSender(): { send: HttpSender; count: () => number } {
  const inner = nodeHttpSender();
  let requests = 0;
  return {
    send: (spec) => {
      requests += 1;
      return inner(spec);
    },
    count: () => requests,
  };
}

const kb = (bytes: number) => fixed(bytes / 1024, 1);

async function growth(
  localApp: RunningApp,
  localDataDir: string,
  blobApp: RunningApp,
  blobContainer: string,
  blobService: BlobServiceClient,
  token: string,
  tenant: string,
  progress: (line: string) => void,
): Promise<string> {
  const localSender = countingSender();
  const cairn = new CairnCheckpointSaver({
    url: `${localApp.url}/api`,
    token,
    send: localSender.send,
    scope: 'growth',
  });
  const blobSaver = new CairnCheckpointSaver({ url: `${blobApp.url}/api`, token, scope: 'growth' });
  const sqliteFile = path.join(tempDir('bench-sqlite'), 'checkpoints.db');
  const sqlite = SqliteSaver.fromConnString(sqliteFile);
  const graphs = { cairn: conversation(cairn), blob: conversation(blobSaver), sqlite: conversation(sqlite) };
  const config: RunnableConfig = { configurable: { thread_id: 'conversation-1' } };
  const threadSpace = [
    path.join(localDataDir, 'threads', tenant),
    path.join(localDataDir, 'threads-long', tenant),
  ];
  const cairnBytes = async () => (await Promise.all(threadSpace.map(filesBytes))).reduce((a, b) => a + b, 0);

  const rows: string[][] = [];
  const perTurn: number[] = [];
  let cairnBefore = 0;
  let sqliteBefore = 0;
  let lastMessages: BaseMessage[] = [];
  for (let turn = 1; turn <= TURNS; turn++) {
    const input = { messages: [new HumanMessage(userText(turn))] };
    lastMessages = (await graphs.cairn.invoke(input, config)).messages;
    await graphs.blob.invoke(input, config);
    await graphs.sqlite.invoke(input, config);
    const cairnTotal = await cairnBytes();
    const sqliteTotal = sqliteRowBytes(sqlite);
    perTurn.push(cairnTotal - cairnBefore);
    if (GROWTH_ROWS.has(turn)) {
      rows.push([
        String(turn),
        kb(cairnTotal - cairnBefore),
        kb(meanOfLast(perTurn, MEAN_OF)),
        kb(sqliteTotal - sqliteBefore),
        kb(cairnTotal),
        kb(sqliteTotal),
        fixed(cairnTotal / sqliteTotal, 2),
      ]);
    }
    cairnBefore = cairnTotal;
    sqliteBefore = sqliteTotal;
    if (turn % 50 === 0) progress(`growth: turn ${turn}`);
  }
  if (lastMessages.length !== 2 * TURNS)
    throw new Error(`the conversation has ${lastMessages.length} messages`);
  const sqliteState = await graphs.sqlite.getState(config);
  if ((sqliteState.values as { messages: BaseMessage[] }).messages.length !== 2 * TURNS) {
    throw new Error('SqliteSaver lost messages');
  }

  databaseOf(sqlite).pragma('wal_checkpoint(TRUNCATE)');
  const sqliteFileBytes = statSync(sqliteFile).size;
  databaseOf(sqlite).close();
  let blobBytes = 0;
  let blobs = 0;
  for await (const blob of blobService.getContainerClient(blobContainer).listBlobsFlat()) {
    blobBytes += blob.properties.contentLength ?? 0;
    blobs += 1;
  }
  const cairnTotal = cairnBefore;
  const sqliteTotal = sqliteBefore;
  const name = cairn.threadName('conversation-1');
  const latest = await new CairnClient({ url: `${localApp.url}/api`, token }).threads.getCheckpoint(name);
  const serialised = latest?.values['messages']?.data.length ?? 0;
  const reads = await latestReads(localDataDir, tenant, name);
  const parts = await storedParts(localDataDir, tenant);
  const putsOfMessages = 2 * TURNS;
  const readBound =
    2 + Math.min(MAX_SEGMENTS, (FANOUT - 1) * (Math.ceil(Math.log(putsOfMessages) / Math.log(FANOUT)) + 1));
  const early = meanOfLast(perTurn.slice(0, Math.min(10, TURNS)), MEAN_OF);
  const late = meanOfLast(perTurn, MEAN_OF);
  const single = (perTurn.at(-1) ?? 0) / (perTurn[Math.min(10, TURNS) - 1] ?? 1);
  const verdict = (met: boolean) => (met ? 'met' : 'missed');
  return [
    `### Growth: a ${TURNS}-turn conversation (${2 * TURNS} messages), KiB`,
    '',
    table(
      [
        'turn',
        'Cairn this turn',
        `Cairn, mean of the last ${MEAN_OF} turns`,
        'SqliteSaver this turn',
        'Cairn total',
        'SqliteSaver total',
        'Cairn / SqliteSaver',
      ],
      rows,
    ),
    '',
    table(
      ['stored after the last turn', 'KiB'],
      [
        ['Cairn, local backend: every file of the thread space', kb(cairnTotal)],
        [`Cairn, Blob backend: every blob of the thread container (${blobs} blobs)`, kb(blobBytes)],
        ['SqliteSaver: bytes of its rows (checkpoints and writes)', kb(sqliteTotal)],
        ['SqliteSaver: database file after a WAL checkpoint (TRUNCATE)', kb(sqliteFileBytes)],
      ],
    ),
    '',
    `Cairn stores ${fixed(cairnTotal / sqliteTotal, 2)}× SqliteSaver's row bytes (${fixed(cairnTotal / sqliteFileBytes, 2)}× its file), ` +
      `with ${fixed(localSender.count() / TURNS, 1)} HTTP requests a turn (3 checkpoints a turn).`,
    '',
    table(
      ['what the local backend holds after the last turn', 'KiB'],
      [
        [
          'checkpoint records: JSON without the segments (checkpoint, metadata, versions, sources)',
          kb(parts.json - parts.pieces),
        ],
        ["checkpoint records: the values' segments (pieces, JSON)", kb(parts.pieces)],
        ['checkpoint records: values held inline whole (under 1 KiB)', kb(parts.inline)],
        ['checkpoint records: packs, the chunks each put added (merges included)', kb(parts.packs)],
        ['pending writes', kb(parts.writes)],
        ['thread record, namespace marks, other', kb(parts.other)],
      ],
    ),
    '',
    table(
      ['target (values stored by what they add)', 'measured', 'verdict'],
      [
        [
          `stored ≤ ${STORED_PER_MESSAGE_BYTES}× the serialised messages (the messages channel's value at the last turn, ${kb(serialised)} KiB)`,
          `${kb(cairnTotal)} KiB, ${fixed(cairnTotal / serialised, 2)}×`,
          verdict(cairnTotal <= STORED_PER_MESSAGE_BYTES * serialised),
        ],
        [
          `linear: what turn ${TURNS} adds ≤ ${LINEAR_GROWTH}× what turn ${Math.min(10, TURNS)} adds (means of ${MEAN_OF} turns; single turns in brackets)`,
          `${kb(late)} / ${kb(early)} KiB = ${fixed(late / early, 2)}× (${fixed(single, 2)}×)`,
          verdict(late <= LINEAR_GROWTH * early),
        ],
        [
          `getTuple of the latest at turn ${TURNS}: storage requests ≤ 2 + min(${MAX_SEGMENTS}, ${FANOUT - 1} × (⌈log${FANOUT}(n)⌉ + 1)), n = ${putsOfMessages} puts of the channel`,
          `${reads} (bound ${readBound})`,
          verdict(reads <= readBound),
        ],
      ],
    ),
  ].join('\n');
}

function meanOfLast(values: readonly number[], count: number): number {
  const last = values.slice(-count);
  return last.reduce((a, b) => a + b, 0) / Math.max(1, last.length);
}

/**
 * Storage requests of a getTuple of the latest checkpoint of `threadId`, from what is stored (local
 * backend, not sealed): the thread record, the pending writes, one read per record whose pack a
 * segment of its values names or that holds one of its values inline, one per value stored apart.
 */
async function latestReads(dataDir: string, tenant: string, threadId: string): Promise<number> {
  const store = new LocalKeyValueStoreFactory(dataDir, 64 * 1024 * 1024).forSpace('threads', tenant);
  const stored = await store.read(threadKey(threadId));
  if (stored === null) throw new Error(`no thread ${threadId}`);
  const head = decodeThreadRecord(stored.value, threadId).heads.get('');
  if (head === undefined) throw new Error('no head');
  const records = producersNamed(head.record);
  let apart = 0;
  for (const source of Object.values(head.record.valueSources)) {
    if (isChunkedSource(source)) continue;
    if (isInlineSource(source)) records.add(producerOf(source));
    else apart += 1;
  }
  return 2 + records.size + apart;
}

/**
 * What the bytes of a tenant's thread space (local backend, not sealed) are made of: the bytes
 * stored. A checkpoint record is stored compressed (one DEFLATE stream of its JSON, its inline
 * values and its pack), so its stored bytes are shared among those parts in proportion to their
 * sizes before compression (a record stored plain gets exactly its parts' sizes).
 */
async function storedParts(dataDir: string, tenant: string) {
  const store = new LocalKeyValueStoreFactory(dataDir, 64 * 1024 * 1024).forSpace('threads', tenant);
  const parts = { json: 0, pieces: 0, inline: 0, packs: 0, writes: 0, other: 0 };
  for (let cursor: string | null | undefined; cursor !== null;) {
    const page = await store.listItems({ limit: 1000, ...(cursor === undefined ? {} : { cursor }) });
    for (const item of page.items) {
      const kind = parseDataKey(item.key)?.item?.kind;
      if (kind === 'writes') parts.writes += item.size;
      else if (kind !== 'record') parts.other += item.size;
      else {
        const {
          inline: inlined,
          pack,
          ...rest
        } = decodeCheckpointRecord((await store.read(item.key))!.value, item.key);
        const packs = pack?.length ?? 0;
        const inline = Object.values(inlined ?? {}).reduce((sum, bytes) => sum + bytes.length, 0);
        const json = Buffer.byteLength(JSON.stringify(rest));
        const pieces = rest.pieces === undefined ? 0 : Buffer.byteLength(JSON.stringify(rest.pieces));
        const share = item.size / (json + inline + packs);
        parts.packs += packs * share;
        parts.inline += inline * share;
        parts.json += json * share;
        parts.pieces += pieces * share;
      }
    }
    cursor = page.cursor;
  }
  return parts;
}

/** A checkpoint as a turn of the conversation makes it: one changed channel of about 6 KB. */
function turnCheckpoint(version: number, messages: readonly string[]): Checkpoint {
  return {
    v: 4,
    id: uuid6(-1),
    ts: new Date().toISOString(),
    channel_values: { messages, 'branch:to:assistant': null },
    channel_versions: { __start__: 1, messages: version, 'branch:to:assistant': version },
    versions_seen: { assistant: { 'branch:to:assistant': version - 1 }, __input__: {} },
  };
}

const MESSAGES = Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? userText(i) : assistantText(i)));

interface SpeedRow {
  put: Measurement;
  getTuple: Measurement;
  concurrent: Measurement;
}

async function speedOf(saver: BaseCheckpointSaver, prefix: string): Promise<SpeedRow> {
  const metadata: CheckpointMetadata = { source: 'loop', step: 0, parents: {} };
  const chain = async (threadId: string, count: number) => {
    let config: RunnableConfig = { configurable: { thread_id: threadId, checkpoint_ns: '' } };
    let version = 1;
    return measure(count, 1, async () => {
      version += 1;
      config = await saver.put(config, turnCheckpoint(version, MESSAGES), metadata, {
        messages: version,
        'branch:to:assistant': version,
      });
    });
  };
  // Warm-up of every path (V8, sockets, the SDK), then the measured runs.
  await chain(`${prefix}-warm`, 30);
  const put = await chain(`${prefix}-put`, SPEED_OPS);
  const latest = { configurable: { thread_id: `${prefix}-put` } };
  await measure(30, 1, () => saver.getTuple(latest));
  const getTuple = await measure(SPEED_OPS, 1, async () => {
    if ((await saver.getTuple(latest)) === undefined) throw new Error('no checkpoint');
  });
  const configs: RunnableConfig[] = Array.from({ length: WORKERS }, (_, w) => ({
    configurable: { thread_id: `${prefix}-w${w}`, checkpoint_ns: '' },
  }));
  const versions = configs.map(() => 1);
  const concurrent = await measure(WORKERS * ROUNDS_PER_WORKER, WORKERS, async (w) => {
    versions[w]! += 1;
    const version = versions[w]!;
    const stored = await saver.put(configs[w]!, turnCheckpoint(version, MESSAGES), metadata, {
      messages: version,
      'branch:to:assistant': version,
    });
    configs[w] = stored;
    await saver.putWrites(stored, [['messages', [assistantText(version)]]], `task-${version}`, '~assistant');
    if ((await saver.getTuple({ configurable: { thread_id: `${prefix}-w${w}` } })) === undefined) {
      throw new Error('no checkpoint');
    }
  });
  return { put, getTuple, concurrent };
}

function latencyCells(measurement: Measurement): string[] {
  const sorted = [...measurement.latenciesMs].sort((a, b) => a - b);
  return [
    fixed(percentile(sorted, 50), 2),
    fixed(percentile(sorted, 95), 2),
    fixed(percentile(sorted, 99), 2),
  ];
}

async function speed(blobApp: RunningApp, token: string, progress: (line: string) => void): Promise<string> {
  const cairn = await speedOf(
    new CairnCheckpointSaver({ url: `${blobApp.url}/api`, token, scope: 'speed' }),
    'cairn',
  );
  progress('speed: Cairn done');
  const sqliteFile = path.join(tempDir('bench-sqlite'), 'speed.db');
  const sqliteSaver = SqliteSaver.fromConnString(sqliteFile);
  const sqlite = await speedOf(sqliteSaver, 'sqlite');
  databaseOf(sqliteSaver).close();
  const rate = (m: Measurement) => fixed(m.ops / m.seconds, 0);
  return [
    '### Speed: one operation at a time (ms), and 8 threads at once',
    '',
    table(
      ['saver', 'operation', 'p50', 'p95', 'p99', 'ops/s'],
      [
        [
          'Cairn (HTTP, Blob backend on Azurite)',
          'put (1 changed channel, 6 KB)',
          ...latencyCells(cairn.put),
          rate(cairn.put),
        ],
        [
          'Cairn (HTTP, Blob backend on Azurite)',
          'getTuple (latest)',
          ...latencyCells(cairn.getTuple),
          rate(cairn.getTuple),
        ],
        [
          'SqliteSaver (file, in process)',
          'put (1 changed channel, 6 KB)',
          ...latencyCells(sqlite.put),
          rate(sqlite.put),
        ],
        [
          'SqliteSaver (file, in process)',
          'getTuple (latest)',
          ...latencyCells(sqlite.getTuple),
          rate(sqlite.getTuple),
        ],
      ],
    ),
    '',
    table(
      [
        'saver',
        `${WORKERS} threads × put + putWrites + getTuple`,
        'rounds/s',
        'saver calls/s',
        'round p50 / p95 ms',
      ],
      [cairn, sqlite].map((row, index) => {
        const cells = latencyCells(row.concurrent);
        return [
          index === 0 ? 'Cairn (HTTP, Blob backend on Azurite)' : 'SqliteSaver (file, in process)',
          `${row.concurrent.ops} rounds`,
          rate(row.concurrent),
          fixed((3 * row.concurrent.ops) / row.concurrent.seconds, 0),
          `${cells[0]} / ${cells[1]}`,
        ];
      }),
    ),
  ].join('\n');
}

async function runs(
  apps: readonly RunningApp[],
  token: string,
  progress: (line: string) => void,
): Promise<string> {
  const clients = apps.map((app) => new CairnClient({ url: `${app.url}/api`, token }));
  const results: { started: number; busy: number; other: number }[] = [];
  for (let race = 0; race < RACES; race++) {
    const thread = `race-${race}`;
    const outcomes = await Promise.allSettled(
      Array.from({ length: STARTERS }, (_, i) =>
        clients[i % clients.length]!.threads.startRun(thread, { onBusy: 'reject' }),
      ),
    );
    results.push({
      started: outcomes.filter((outcome) => outcome.status === 'fulfilled').length,
      busy: outcomes.filter(
        (outcome) =>
          outcome.status === 'rejected' &&
          outcome.reason instanceof CairnHttpError &&
          outcome.reason.code === 'thread_busy',
      ).length,
      other: outcomes.filter(
        (outcome) =>
          outcome.status === 'rejected' &&
          !(outcome.reason instanceof CairnHttpError && outcome.reason.code === 'thread_busy'),
      ).length,
    });
  }
  progress('runs: races done');
  const exactlyOne = results.filter((result) => result.started === 1).length;

  const freedAfter: number[] = [];
  for (let trial = 0; trial < LEASE_TRIALS; trial++) {
    const thread = `lease-${trial}`;
    // The holder (through one instance) never renews its lease, as a crashed worker would.
    await clients[0]!.threads.startRun(thread, { onBusy: 'reject', leaseSeconds: LEASE_SECONDS });
    const held = Date.now();
    for (;;) {
      try {
        await clients[1]!.threads.startRun(thread, { onBusy: 'reject' });
        break;
      } catch (error) {
        if (!(error instanceof CairnHttpError && error.code === 'thread_busy')) throw error;
        if (Date.now() - held > (LEASE_SECONDS + 30) * 1000) {
          throw new Error('the lease never freed the thread', { cause: error });
        }
      }
      await sleep(50);
    }
    freedAfter.push((Date.now() - held) / 1000);
  }
  progress('runs: leases done');
  return [
    `### Runs: two app instances on one Azurite (Blob backend)`,
    '',
    table(
      ['measure', 'result'],
      [
        [
          `${STARTERS} concurrent \`reject\` starters on a fresh thread, ${RACES} repetitions`,
          `exactly one run in **${exactlyOne} of ${RACES}** (started per repetition: ${[...new Set(results.map((r) => r.started))].join(', ')}; 409 thread_busy: ${results.reduce((s, r) => s + r.busy, 0)}; other outcomes: ${results.reduce((s, r) => s + r.other, 0)})`,
        ],
        [
          `a holder stops renewing a ${LEASE_SECONDS} s lease; a starter on the other instance retries every 50 ms`,
          `thread free after ${freedAfter.map((s) => `${fixed(s, 2)} s`).join(', ')} (limit: ${LEASE_SECONDS + 5} s)`,
        ],
      ],
    ),
  ].join('\n');
}

export async function runThreadsBench(progress: (line: string) => void = () => undefined): Promise<string> {
  const azurite = await startAzurite();
  const tenant = newTenant('bench');
  const keys = { CAIRN_API_KEYS: apiKeysSetting([tenant]) };
  const quiet = { keepOutput: false };
  const blobSettings = backendSettings('blob', azurite.blobEndpoint);
  const localSettings = backendSettings('local', azurite.blobEndpoint);
  // Two instances on one Blob container (the fleet case), and one on the local backend.
  const blobApps = [
    await startApp({ ...keys, ...blobSettings }, undefined, quiet),
    await startApp({ ...keys, ...blobSettings }, undefined, quiet),
  ];
  const localApp = await startApp({ ...keys, ...localSettings }, undefined, quiet);
  const apps = [...blobApps, localApp];
  const watches = apps.map((app) => watchRss(app.child.pid ?? 0));
  const blobService = new BlobServiceClient(
    azurite.blobEndpoint,
    new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY),
  );
  const threadContainer = spaceContainerName(blobSettings['CAIRN_BLOB_CONTAINER']!, 'threads', tenant.tenant);

  const sections = [
    await growth(
      localApp,
      localSettings['CAIRN_DATA_DIR']!,
      blobApps[0]!,
      threadContainer,
      blobService,
      tenant.key,
      tenant.tenant,
      progress,
    ),
  ];
  // The growth thread is the only one in the container when it is summed; the rest come after.
  sections.push(await speed(blobApps[0]!, tenant.key, progress));
  sections.push(await runs(blobApps, tenant.key, progress));
  const peaks = watches.map((watch) => watch.stop());
  for (const app of apps) await app.stop();
  await azurite.stop();
  sections.push(
    `Peak RSS of the apps during the benchmark: ${fixed(peaks[0]!, 0)} MB and ${fixed(peaks[1]!, 0)} MB (the two Blob instances), ${fixed(peaks[2]!, 0)} MB (local backend); target under 256 MB.`,
  );
  return sections.join('\n\n');
}
