import { createHash, randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';

import { BlobServiceClient, StorageSharedKeyCredential } from '@azure/storage-blob';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import {
  plainArchiveStorage,
  sealedArchiveStorage,
  SealedSessions,
} from '../../shared/archive/sealedArchive';
import { SessionArchive } from '../../shared/archive/sessionArchive';
import { AuditTrail } from '../../shared/audit/auditTrail';
import { Encryption } from '../../shared/crypto/encryption';
import { SEAL_OVERHEAD } from '../../shared/crypto/sealedFormat';
import { SealingKeyValueStoreFactory } from '../../shared/crypto/sealedKeyValueStore';
import { BLOCK_BYTES } from '../../shared/protocol/archive/identifiers';
import { ChainVerifier } from '../../shared/protocol/audit/chain';
import { BlobImmutableObjectStore } from '../../shared/storage/azure/blobImmutableObjectStore';
import { BlobKeyValueStoreFactory } from '../../shared/storage/azure/blobKeyValueStore';
import { createTableClient } from '../../shared/storage/azure/clients';
import { TableSessionIndex } from '../../shared/storage/azure/sessionIndexTable';
import { TableAuditStore } from '../../shared/storage/azure/tableAuditStore';
import { MAX_OBJECT_BYTES } from '../../shared/storage/immutableObjectStore';
import { SealedThreadSpace } from '../../shared/threads/sealedThreadSpace';
import { ThreadStore } from '../../shared/threads/threadStore';
import { apiKeysSetting, backendSettings, newTenant, startApp } from '../support/app';
import { startAzurite } from '../support/cleanup';
import { sessionIndexSettings } from '../support/tables';
import { combine, fixed, measure, type Measurement, summarise, type Summary, table } from './measure';
import { sized } from './mode';

/**
 * `npm run bench -- crypto`: what encryption at rest and the audit trail cost, in one process
 * against the Azurite it starts itself (two, one after the other).
 *
 * 1. Encryption: two apps on the Blob backend of that Azurite, the same settings but for the keys:
 *    one without CAIRN_ENCRYPTION_KEYS, one with a key and CAIRN_ENCRYPT_TENANTS=* (so that
 *    key/value values are sealed too). Key/value PUT and GET of 1 KiB values, checkpoint puts (two
 *    changed channels of 1 KiB, each on the head) and getTuple of the latest checkpoint, over HTTP
 *    with 8 workers, keys off and on alternating (six rounds, twelve for checkpoints) after a
 *    warm-up, so that drift on a noisy machine hits both alike. The cost is how much lower the throughput is with keys (target
 *    at most 10 %).
 * 2. The same stores called in-process on that Azurite, keys off and on: what sealing itself costs
 *    without the HTTP hop.
 * 3. Audit: records appended by 8 concurrent writers through the audit trail on Table Storage: on
 *    one instance, then 4 + 4 on two instances contending for each seq; then the whole trail is
 *    read back and verified (gapless seq, every hash and link). Target: at least 100 records/s.
 * 4. Session archives, on a second Azurite started once the first is stopped, with two such apps
 *    again (every tenant's own bytes sealed on the keyed side): PUT of new 64 KiB blocks, and
 *    restores of a 1 MiB file (16 blocks), over HTTP and in-process.
 *
 * No figure is asserted; the tables are the result.
 */

const WORKERS = 8;
const ROUNDS = 6;
/**
 * Checkpoint operations make several storage requests each, so a round takes longer and one burst
 * of other work on the machine weighs more: more, shorter rounds.
 */
const CHECKPOINT_ROUNDS = 12;
const VALUE = randomBytes(1024);
const KV_KEYS_PER_WORKER = 16;
const AUDIT_RECORDS = sized(2000, 40);

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

function call(
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: Buffer | string } = {},
) {
  return new Promise<void>((resolve, reject) => {
    const request = http.request(
      url,
      { method: init.method ?? 'GET', headers: init.headers, agent },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => {
          const status = response.statusCode ?? 0;
          if (status >= 300) reject(new Error(`HTTP ${status}: ${Buffer.concat(chunks).toString()}`));
          else resolve();
        });
      },
    );
    request.on('error', reject);
    request.end(init.body);
  });
}

interface Target {
  readonly kvPut: (worker: number, index: number) => Promise<void>;
  readonly kvGet: (worker: number, index: number) => Promise<void>;
  readonly checkpointPut: (worker: number) => Promise<void>;
  readonly checkpointGet: (worker: number) => Promise<void>;
  /** Stores a new 64 KiB block of the worker's session (a new key every time). */
  readonly blockPut: (worker: number) => Promise<void>;
  /** Restores the 1 MiB file of the archive's bench session. */
  readonly fileGet: () => Promise<void>;
  /** Uploads and publishes that file. */
  readonly publishFile: () => Promise<void>;
}

/** A 64 KiB block, and the 1 MiB file (16 of its blocks) each side restores. */
const BLOCK = randomBytes(BLOCK_BYTES);
const FILE_BLOCKS = 16;
const FILE = {
  path: 'events.jsonl',
  generation: 'g1',
  size: FILE_BLOCKS * BLOCK_BYTES,
  sha256: createHash('sha256')
    .update(Buffer.concat(Array(FILE_BLOCKS).fill(BLOCK)))
    .digest('hex'),
};

/** The next block key of a worker's session: every put creates an object. */
function blockCounter(): (worker: number) => string {
  const counters = new Map<number, number>();
  return (worker) => {
    const n = counters.get(worker) ?? 0;
    counters.set(worker, n + 1);
    return `blocks/g1/${n}`;
  };
}

function target(baseUrl: string, apiKey: string): Target {
  const headers = { authorization: `Bearer ${apiKey}` };
  const kv = (worker: number, index: number) =>
    `${baseUrl}/api/kv/bench/w${worker}/k${index % KV_KEYS_PER_WORKER}`;
  const counters = new Map<number, number>();
  const value = () => ({ type: 'json', data: VALUE.toString('base64') });
  const nextBlock = blockCounter();
  const sessions = `${baseUrl}/api/sessions`;
  return {
    blockPut: (worker) =>
      call(`${sessions}/bench-w${worker}/objects/${nextBlock(worker)}`, {
        method: 'PUT',
        headers,
        body: BLOCK,
      }),
    fileGet: () => call(`${sessions}/bench-file/checkpoints/c1/files/${FILE.path}`, { headers }),
    publishFile: async () => {
      for (let index = 0; index < FILE_BLOCKS; index++) {
        await call(`${sessions}/bench-file/objects/blocks/g1/${index}`, {
          method: 'PUT',
          headers,
          body: BLOCK,
        });
      }
      await call(`${sessions}/bench-file/checkpoints`, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json' },
        body: JSON.stringify({ checkpointId: 'c1', parent: null, files: [FILE], data: null }),
      });
    },
    kvPut: (worker, index) => call(kv(worker, index), { method: 'PUT', headers, body: VALUE }),
    kvGet: (worker, index) => call(kv(worker, index), { headers }),
    checkpointPut: async (worker) => {
      const n = (counters.get(worker) ?? 0) + 1;
      counters.set(worker, n);
      const id = (k: number) => `c${String(k).padStart(8, '0')}`;
      await call(`${baseUrl}/api/threads/bench-w${worker}/checkpoints`, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json' },
        body: JSON.stringify({
          checkpointId: id(n),
          parent: n === 1 ? null : id(n - 1),
          checkpoint: {
            type: 'json',
            data: Buffer.from(JSON.stringify({ v: 4, id: id(n) })).toString('base64'),
          },
          metadata: { source: 'loop', step: n },
          channelVersions: { messages: n, state: n },
          values: { messages: value(), state: value() },
        }),
      });
    },
    checkpointGet: (worker) =>
      call(`${baseUrl}/api/threads/bench-w${worker}/checkpoints/latest`, { headers }),
  };
}

/**
 * Runs `a` and `b` in balanced rounds (a then b, then b then a, …) after a warm-up of each, so that
 * a load that rises or falls during the run weighs on both alike; the summary of each.
 */
async function balanced(
  a: (worker: number, index: number) => Promise<unknown>,
  b: (worker: number, index: number) => Promise<unknown>,
  options: { count: number; rounds: number },
): Promise<[Summary, Summary]> {
  const per = Math.round(options.count / options.rounds);
  await measure(Math.round(per / 2), WORKERS, a);
  await measure(Math.round(per / 2), WORKERS, b);
  const runsA: Measurement[] = [];
  const runsB: Measurement[] = [];
  for (let round = 0; round < options.rounds; round++) {
    if (round % 2 === 0) {
      runsA.push(await measure(per, WORKERS, a));
      runsB.push(await measure(per, WORKERS, b));
    } else {
      runsB.push(await measure(per, WORKERS, b));
      runsA.push(await measure(per, WORKERS, a));
    }
  }
  return [summarise(combine(runsA)), summarise(combine(runsB))];
}

/** How much lower `on`'s throughput is than `off`'s, in percent. */
const cost = (off: Summary, on: Summary) => `**${fixed((1 - on.opsPerSecond / off.opsPerSecond) * 100)} %**`;

export async function runCryptoBench(progress: (line: string) => void): Promise<string> {
  const azurite = await startAzurite();
  const tenant = newTenant('bench');
  const quiet = { keepOutput: false };
  const common = { CAIRN_API_KEYS: apiKeysSetting([tenant]), CAIRN_LOG_LEVEL: 'warn' };
  /** Two apps on `endpoints`, alike but for the keys (and every tenant's own bytes sealed). */
  const apps = (endpoints: { blobEndpoint: string; tableEndpoint: string }) =>
    Promise.all([
      startApp(
        {
          ...common,
          ...backendSettings('blob', endpoints.blobEndpoint),
          ...sessionIndexSettings(endpoints.tableEndpoint),
        },
        undefined,
        quiet,
      ),
      startApp(
        {
          ...common,
          ...backendSettings('blob', endpoints.blobEndpoint),
          ...sessionIndexSettings(endpoints.tableEndpoint),
          CAIRN_ENCRYPTION_KEYS: `k1:${randomBytes(32).toString('hex')}`,
          CAIRN_ENCRYPT_TENANTS: '*',
        },
        undefined,
        quiet,
      ),
    ]);
  const [plainApp, sealedApp] = await apps(azurite);
  const off = target(plainApp.url, tenant.key);
  const on = target(sealedApp.url, tenant.key);

  // Every key exists (a PUT replaces, a GET finds), every worker's thread has a head.
  for (const side of [off, on]) {
    await measure(WORKERS * KV_KEYS_PER_WORKER, WORKERS, (_w, i) =>
      side.kvPut(Math.floor(i / KV_KEYS_PER_WORKER), i % KV_KEYS_PER_WORKER),
    );
    await measure(WORKERS, WORKERS, (worker) => side.checkpointPut(worker));
  }

  const rows: string[][] = [];
  const compare = async (
    into: string[][],
    label: string,
    count: number,
    rounds: number,
    operation: (side: Target) => (worker: number, index: number) => Promise<void>,
    sides: [Target, Target] = [off, on],
  ) => {
    progress(label);
    // Under --quick: one round of a few operations per worker.
    const [plain, sealed] = await balanced(operation(sides[0]), operation(sides[1]), {
      count: sized(count, WORKERS * 2),
      rounds: sized(rounds, 1),
    });
    into.push([
      label,
      fixed(plain.opsPerSecond, 0),
      `${fixed(plain.p50Ms)} / ${fixed(plain.p99Ms)}`,
      fixed(sealed.opsPerSecond, 0),
      `${fixed(sealed.p50Ms)} / ${fixed(sealed.p99Ms)}`,
      cost(plain, sealed),
    ]);
  };
  const kvPut = (side: Target) => side.kvPut;
  const kvGet = (side: Target) => side.kvGet;
  const checkpointPut = (side: Target) => (worker: number) => side.checkpointPut(worker);
  const checkpointGet = (side: Target) => (worker: number) => side.checkpointGet(worker);
  const blockPut = (side: Target) => (worker: number) => side.blockPut(worker);
  const fileGet = (side: Target) => () => side.fileGet();
  await compare(rows, 'key/value PUT (1 KiB)', 2400, ROUNDS, kvPut);
  await compare(rows, 'key/value GET (1 KiB)', 2400, ROUNDS, kvGet);
  await compare(rows, 'checkpoint put (2 channels of 1 KiB)', 960, CHECKPOINT_ROUNDS, checkpointPut);
  await compare(rows, 'checkpoint getTuple (latest)', 1920, CHECKPOINT_ROUNDS, checkpointGet);
  await plainApp.stop();
  await sealedApp.stop();

  const direct = await directTargets(azurite.blobEndpoint, azurite.tableEndpoint, tenant.tenant);
  const directRows: string[][] = [];
  for (const side of direct) {
    await measure(WORKERS * KV_KEYS_PER_WORKER, WORKERS, (_w, i) =>
      side.kvPut(Math.floor(i / KV_KEYS_PER_WORKER), i % KV_KEYS_PER_WORKER),
    );
    await measure(WORKERS, WORKERS, (worker) => side.checkpointPut(worker));
  }
  await compare(directRows, 'key/value write (1 KiB)', 4800, ROUNDS, kvPut, direct);
  await compare(directRows, 'key/value read (1 KiB)', 4800, ROUNDS, kvGet, direct);
  await compare(
    directRows,
    'checkpoint put (2 channels of 1 KiB)',
    1920,
    CHECKPOINT_ROUNDS,
    checkpointPut,
    direct,
  );
  await compare(directRows, 'checkpoint getTuple (latest)', 3840, CHECKPOINT_ROUNDS, checkpointGet, direct);

  progress('audit appends');
  const tableName = `auditbench${randomUUID().replaceAll('-', '').slice(0, 16)}`;
  const service = {
    endpoint: azurite.tableEndpoint,
    accountName: AZURITE_ACCOUNT,
    accountKey: AZURITE_ACCOUNT_KEY,
  };
  const trail = () =>
    new AuditTrail({
      store: new TableAuditStore(createTableClient(service, tableName), 8000),
      repairGraceMs: 78_000,
    });
  const auditRows: string[][] = [];
  const appendRun = async (label: string, instances: AuditTrail[], tenantId: string) => {
    const result = await measure(AUDIT_RECORDS, WORKERS, (worker, index) =>
      (instances[worker % instances.length] as AuditTrail).record({
        tenant: tenantId,
        action: 'memory.written',
        actor: 'bench',
        subject: `w${worker}/${index}`,
        outcome: 'ok',
        details: { index },
      }),
    );
    const verifier = new ChainVerifier();
    const reader = trail();
    const seqs: number[] = [];
    for (let after = 0; ;) {
      const page = await reader.records(tenantId, { afterSeq: after, limit: 1000 });
      for (const record of page) {
        verifier.add(record);
        seqs.push(record.seq);
      }
      if (page.length < 1000) break;
      after = page.at(-1)?.seq ?? after;
    }
    const verified = verifier.result();
    const gapless = seqs.length === AUDIT_RECORDS && seqs.every((seq, index) => seq === index + 1);
    const sorted = [...result.latenciesMs].sort((a, b) => a - b);
    auditRows.push([
      label,
      String(AUDIT_RECORDS),
      `**${fixed(result.ops / result.seconds, 0)}**`,
      `${fixed(sorted[Math.floor(sorted.length / 2)] ?? NaN)} / ${fixed(sorted[Math.floor(sorted.length * 0.99)] ?? NaN)}`,
      gapless && verified.ok
        ? `yes (1-${verified.head[0]}, chain verified)`
        : `**no** (${verified.records} records, first broken ${verified.firstBroken})`,
    ]);
  };
  await appendRun('8 writers, one instance', [trail()], 'bench-one');
  await appendRun('8 writers, two instances (4 + 4)', [trail(), trail()], 'bench-two');
  await azurite.stop();

  // Session archives on an Azurite of their own: its time per request grows with what it holds
  // (see the prune bench), and after the checkpoints above 8 workers restoring with 16 reads in
  // flight each ran into the storage deadline.
  const archiveAzurite = await startAzurite();
  const [archivePlain, archiveSealed] = await apps(archiveAzurite);
  const archiveHttp: [Target, Target] = [
    target(archivePlain.url, tenant.key),
    target(archiveSealed.url, tenant.key),
  ];
  const archiveDirect = await directTargets(
    archiveAzurite.blobEndpoint,
    archiveAzurite.tableEndpoint,
    tenant.tenant,
  );
  for (const side of [...archiveHttp, ...archiveDirect]) await side.publishFile();
  await compare(rows, 'archive block PUT (64 KiB)', 480, ROUNDS, blockPut, archiveHttp);
  await compare(rows, 'archive file restore (1 MiB)', 240, ROUNDS, fileGet, archiveHttp);
  await compare(directRows, 'archive block put (64 KiB)', 480, ROUNDS, blockPut, archiveDirect);
  await compare(directRows, 'archive file restore (1 MiB)', 240, ROUNDS, fileGet, archiveDirect);
  await archivePlain.stop();
  await archiveSealed.stop();
  await archiveAzurite.stop();

  return [
    '### Encryption at rest: throughput with keys off and on (HTTP, Blob backend on Azurite, 8 workers)',
    '',
    table(
      ['operation', 'keys off ops/s', 'off p50 / p99 ms', 'keys on ops/s', 'on p50 / p99 ms', 'cost'],
      rows,
    ),
    '',
    '### Encryption at rest: the stores in-process on Azurite, keys off and on (8 workers)',
    '',
    table(
      ['operation', 'keys off ops/s', 'off p50 / p99 ms', 'keys on ops/s', 'on p50 / p99 ms', 'cost'],
      directRows,
    ),
    '',
    '### Audit trail: appends by 8 concurrent writers (Table Storage on Azurite)',
    '',
    table(['writers', 'records', 'records/s', 'p50 / p99 ms per append', 'gapless'], auditRows),
  ].join('\n');
}

/**
 * The key/value store and the thread store called directly on one Azurite, each over its own
 * containers: keys off (the backend as it is) and on (a passed key check, values sealed).
 */
async function directTargets(
  blobEndpoint: string,
  tableEndpoint: string,
  tenant: string,
): Promise<[Target, Target]> {
  const service = new BlobServiceClient(
    blobEndpoint,
    new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY),
  );
  const maxValueBytes = 2 * 1024 * 1024;
  // A deadline well above the app's default: a bench on a busy machine measures slowness, it does
  // not stop at it.
  const factory = (base: string, max = maxValueBytes) =>
    new BlobKeyValueStoreFactory(service, base, max, 30_000);
  const plainBase = `direct${randomUUID().replaceAll('-', '').slice(0, 16)}`;
  const sealedBase = `direct${randomUUID().replaceAll('-', '').slice(0, 16)}`;
  const encryption = new Encryption({
    keys: [{ id: 'k1', key: randomBytes(32) }],
    kvStores: factory(sealedBase),
    policy: '*',
  });
  await encryption.check();
  const { codec } = encryption;
  const sealedKv = new SealingKeyValueStoreFactory(
    factory(sealedBase),
    factory(sealedBase, maxValueBytes + SEAL_OVERHEAD),
    codec,
    '*',
  ).forTenant(tenant);
  const plainKv = factory(plainBase).forTenant(tenant);
  // One factory per side, as the app has one: both sides keep their known versions alike.
  const plainSpaces = factory(plainBase);
  const plainThreads = new ThreadStore({
    storeOf: (owner) => plainSpaces.forSpace('threads', owner),
    maxValueBytes,
  });
  const sealedSpaces = factory(sealedBase);
  const sealedThreads = new ThreadStore({
    storeOf: (owner) => new SealedThreadSpace(sealedSpaces.forSpace('threads', owner), owner, codec),
    maxValueBytes: maxValueBytes - SEAL_OVERHEAD,
    sealed: true,
  });
  // Session archives: each side on its own blobs and index table; the sealed side seals every tenant's.
  const archiveOf = (base: string, seal: boolean) => {
    const container = service.getContainerClient(base);
    const objects = (max: number) =>
      new BlobImmutableObjectStore(container, 'sessions/', 30_000, undefined, max);
    const index = new TableSessionIndex(
      createTableClient(
        { endpoint: tableEndpoint, accountName: AZURITE_ACCOUNT, accountKey: AZURITE_ACCOUNT_KEY },
        `${base}sessions`,
      ),
      30_000,
    );
    return new SessionArchive(
      seal
        ? sealedArchiveStorage({
            plain: objects(MAX_OBJECT_BYTES),
            roomy: objects(MAX_OBJECT_BYTES + SEAL_OVERHEAD),
            index,
            codec,
            policy: '*' as const,
            sessions: new SealedSessions(factory(base)),
          })
        : plainArchiveStorage(objects(MAX_OBJECT_BYTES), index),
    );
  };
  const side = (kv: typeof plainKv, threads: ThreadStore, archive: SessionArchive): Target => {
    const nextBlock = blockCounter();
    const counters = new Map<number, number>();
    const value = { type: 'json', data: VALUE };
    const id = (k: number) => `c${String(k).padStart(8, '0')}`;
    const key = (worker: number, index: number) => `bench/w${worker}/k${index % KV_KEYS_PER_WORKER}`;
    return {
      blockPut: async (worker) => {
        await archive.putObject(tenant, `bench-w${worker}`, nextBlock(worker), BLOCK);
      },
      fileGet: async () => {
        const { stream } = await archive.restoreFile(tenant, 'bench-file', 'c1', FILE.path);
        for await (const chunk of stream) void chunk;
      },
      publishFile: async () => {
        for (let index = 0; index < FILE_BLOCKS; index++) {
          await archive.putObject(tenant, 'bench-file', `blocks/g1/${index}`, BLOCK);
        }
        await archive.publishCheckpoint(tenant, 'bench-file', {
          checkpointId: 'c1',
          parent: null,
          files: [FILE],
          data: null,
        });
      },
      kvPut: async (worker, index) => {
        await kv.write(key(worker, index), VALUE);
      },
      kvGet: async (worker, index) => {
        await kv.read(key(worker, index));
      },
      checkpointPut: async (worker) => {
        const n = (counters.get(worker) ?? 0) + 1;
        counters.set(worker, n);
        await threads.putCheckpoint(tenant, `bench-w${worker}`, {
          checkpointId: id(n),
          ns: '',
          parent: n === 1 ? null : id(n - 1),
          v: 4,
          checkpoint: { type: 'json', data: Buffer.from(JSON.stringify({ v: 4, id: id(n) })) },
          metadata: { source: 'loop', step: n },
          channelVersions: { messages: n, state: n },
          values: { messages: value, state: value },
        });
      },
      checkpointGet: async (worker) => {
        await threads.getCheckpoint(tenant, `bench-w${worker}`, '');
      },
    };
  };
  return [
    side(plainKv, plainThreads, archiveOf(plainBase, false)),
    side(sealedKv, sealedThreads, archiveOf(sealedBase, true)),
  ];
}
