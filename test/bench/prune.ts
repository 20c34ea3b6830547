import { spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import path from 'node:path';

import { BlobServiceClient, type ContainerClient, StorageSharedKeyCredential } from '@azure/storage-blob';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import { GRACE_MS } from '../../shared/jobs/retentionPrune';
import { MAX_DELETES_IN_FLIGHT } from '../../shared/retention/budget';
import { KEEP_EVERYTHING, RetentionPolicies } from '../../shared/retention/policy';
import { BlobKeyValueStoreFactory, spaceContainerName } from '../../shared/storage/azure/blobKeyValueStore';
import type { KeyValueStoreFactory } from '../../shared/storage/keyValueStore';
import { LocalKeyValueStoreFactory } from '../../shared/storage/local/localKeyValueStore';
import { recordingKeyValueStores } from '../../shared/tenants/recordingStores';
import { TenantDirectory } from '../../shared/tenants/tenantDirectory';
import { parseDataKey } from '../../shared/threads/layout';
import { ThreadStore } from '../../shared/threads/threadStore';
import { apiKeysSetting, type Backend, backendSettings, newTenant, stopProcess } from '../support/app';
import { onCleanUp, startAzurite, tempDir } from '../support/cleanup';
import { fixed, measure, table, watchRss } from './measure';
import { sized } from './mode';
import type { WorkerResult, WorkerRun } from './pruneWorker';

/**
 * `npm run bench -- prune`: the `retentionPrune` run over one tenant of threads of 50 checkpoints
 * with the policy `keepCheckpoints: 5` (set as `PUT /api/retention/policies/{tenant}` sets it), on
 * each backend:
 *
 * - the local backend with 2,000 threads (CAIRN_BENCH_PRUNE_THREADS for another number);
 * - the Blob backend on Azurite with 100 threads (CAIRN_BENCH_PRUNE_AZURITE_THREADS). Azurite keeps
 *   blob metadata in an in-memory database that scans every blob of the account on each request,
 *   and re-sorts its indexes after each delete, so its time per request grows with what it holds
 *   (the bench prints its raw delete rate with 1,000 blobs and with the bench's), which puts 2,000
 *   threads, some 300,000 blobs, out of its reach. For the same reason the prune process gets the
 *   longest storage deadline there is (CAIRN_STORAGE_TIMEOUT_MS=120000): requests wait in Azurite's
 *   queue for seconds.
 *
 * On each:
 *
 * 1. The threads are written in-process through the thread store, as the app writes them, 32
 *    threads at once: each checkpoint a put with one changed channel of 1 KiB, and a pending write.
 * 2. Prune runs in a process of their own (pruneWorker.ts) with the production budget
 *    (CAIRN_PRUNE_MAX_DELETES and CAIRN_PRUNE_MAX_SECONDS at their defaults) until one reports that
 *    nothing is left, then one more right after. The pruner's clock is two hours ahead, so that the
 *    checkpoints are past the one-hour grace that protects writes in flight. Storage requests are
 *    counted there (Blob: a policy in the client's pipeline; local: the calls of the key/value
 *    store); its peak RSS is sampled from here and read from the kernel at its end.
 * 3. What is stored before and after (the container listed, or the folder walked): objects, bytes
 *    and checkpoint records. Exactly 5 records must remain in each thread, the counts the runs
 *    report must match the difference, the run right after must delete nothing, and a sample of
 *    threads is read back (the history of the 5 newest checkpoints, the head's value).
 * 4. Raw: as many objects as the prune deleted, of their average size, written apart and deleted one
 *    request each (`deleteBlob`; `unlink` locally), as many in flight as a prune run sends at most.
 *
 * No figure is asserted; the counts are checked (the bench fails when one is wrong).
 */

const LOCAL_THREADS = Number(process.env['CAIRN_BENCH_PRUNE_THREADS'] ?? sized(2000, 20));
const AZURITE_THREADS = Number(process.env['CAIRN_BENCH_PRUNE_AZURITE_THREADS'] ?? sized(100, 10));
const CHECKPOINTS = 50;
const KEEP = 5;
const WRITERS = 32;
const SAMPLE_THREADS = 20;
const AZURITE_PROBE = 1000;
const MESSAGE = Buffer.from(JSON.stringify({ role: 'assistant', content: 'x'.repeat(1000) }));
const WORKER = path.resolve('dist/test/bench/pruneWorker.js');

const threadId = (index: number) => `thread-${String(index).padStart(5, '0')}`;
const checkpointId = (index: number) => `c${String(index).padStart(3, '0')}`;
const mib = (bytes: number) => fixed(bytes / (1024 * 1024), 1);
const count = (n: number) => n.toLocaleString('en-US');

interface Stored {
  readonly objects: number;
  readonly bytes: number;
  /** Checkpoint records per thread. */
  readonly records: Map<string, number>;
}

class StoredTally implements Stored {
  objects = 0;
  bytes = 0;
  readonly records = new Map<string, number>();
  add(key: string, size: number): void {
    this.objects += 1;
    this.bytes += size;
    const parsed = parseDataKey(key);
    if (parsed?.item?.kind === 'record') {
      this.records.set(parsed.threadId, (this.records.get(parsed.threadId) ?? 0) + 1);
    }
  }
}

async function storedInContainer(container: ContainerClient): Promise<Stored> {
  const stored = new StoredTally();
  for await (const blob of container.listBlobsFlat())
    stored.add(blob.name, blob.properties.contentLength ?? 0);
  return stored;
}

async function storedInFolder(root: string, stored = new StoredTally(), prefix = ''): Promise<Stored> {
  let entries;
  try {
    entries = await fs.readdir(root, { withFileTypes: true });
  } catch (error) {
    if ((error as { code?: unknown }).code === 'ENOENT') return stored;
    throw error;
  }
  for (const entry of entries) {
    const file = path.join(root, entry.name);
    if (entry.isDirectory()) await storedInFolder(file, stored, `${prefix}${entry.name}/`);
    else if (entry.isFile()) stored.add(`${prefix}${entry.name}`, (await fs.stat(file)).size);
  }
  return stored;
}

/** Runs the prune process to its end; its result, and its peak RSS as sampled from here. */
async function runWorker(
  env: Record<string, string>,
  progress: (line: string) => void,
): Promise<{ result: WorkerResult; sampledRssMb: number }> {
  const child = spawn(process.execPath, [WORKER, String(2 * GRACE_MS)], {
    env: { PATH: process.env['PATH'] ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const forget = onCleanUp(() => stopProcess(child));
  const rss = watchRss(child.pid ?? 0);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (data: Buffer) => (stdout += data.toString()));
  child.stderr.on('data', (data: Buffer) => {
    stderr += data.toString();
    for (const line of data.toString().split('\n')) if (line.startsWith('run ')) progress(`prune ${line}`);
  });
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  const sampledRssMb = rss.stop();
  forget();
  if (code !== 0) throw new Error(`the prune process exited with ${code}:\n${stderr}`);
  return { result: JSON.parse(stdout) as WorkerResult, sampledRssMb };
}

type Counted = 'objectsDeleted' | 'checkpointsDeleted' | 'bytesFreed';
const sum = (runs: readonly WorkerRun[], field: Counted) =>
  runs.reduce((total, run) => total + run.report.tenants.reduce((s, tenant) => s + tenant[field], 0), 0);

const KINDS = ['delete', 'list', 'read', 'head', 'write', 'other'];
function kinds(byKind: Readonly<Record<string, number>>): string {
  return KINDS.filter((kind) => (byKind[kind] ?? 0) > 0)
    .map((kind) => `${count(byKind[kind] ?? 0)} ${kind}`)
    .join(', ');
}

/** How raw deletion goes on one backend: write `n` objects of `size` bytes apart, then delete them. */
interface Raw {
  readonly what: string;
  deleteRate(n: number, size: number): Promise<{ seconds: number; rate: number }>;
}

interface Setup {
  readonly backend: Backend;
  readonly threads: number;
  /** The app's settings (the prune process gets them). */
  readonly settings: Record<string, string>;
  readonly factory: KeyValueStoreFactory;
  /** Where the tenant's thread space is, as the prune process names it in its counts. */
  readonly threadSpace: string;
  stored(): Promise<Stored>;
  readonly raw: Raw;
  /** Lines printed before the tables. */
  readonly notes: string[];
}

async function pruneBench(setup: Setup, tenant: string, progress: (line: string) => void): Promise<string> {
  const { threads: threadCount, factory } = setup;
  const directory = new TenantDirectory(factory);
  const kvStores = recordingKeyValueStores(factory, directory);
  const threads = new ThreadStore({
    storeOf: (t) => kvStores.forSpace('threads', t),
    maxValueBytes: kvStores.maxValueBytes,
  });

  // 1. The threads, written as the app writes them.
  const json = (value: Buffer) => ({ type: 'json', data: value });
  const writing = await measure(threadCount, WRITERS, async (_worker, index) => {
    const id = threadId(index);
    for (let step = 1; step <= CHECKPOINTS; step++) {
      await threads.putCheckpoint(tenant, id, {
        checkpointId: checkpointId(step),
        ns: '',
        parent: step === 1 ? null : checkpointId(step - 1),
        v: 4,
        checkpoint: json(Buffer.from(JSON.stringify({ id: checkpointId(step) }))),
        metadata: { step },
        channelVersions: { messages: step },
        values: { messages: json(MESSAGE) },
      });
      await threads.putWrites(tenant, id, {
        ns: '',
        checkpointId: checkpointId(step),
        taskId: 'agent',
        taskPath: '',
        writes: [{ channel: 'messages', idx: 0, value: json(Buffer.from(`"step ${step}"`)) }],
      });
    }
    if ((index + 1) % 100 === 0) progress(`${setup.backend}: wrote ${index + 1} of ${threadCount} threads`);
  });
  await new RetentionPolicies(factory, KEEP_EVERYTHING).set(tenant, { keepCheckpoints: KEEP });
  const before = await setup.stored();
  progress(`${setup.backend}: ${before.objects} objects, ${mib(before.bytes)} MiB`);

  // 2. The prune runs, in their own process.
  const { result, sampledRssMb } = await runWorker(setup.settings, progress);
  const after = await setup.stored();

  // 3. The counts must match what is stored.
  const objectsDeleted = sum(result.runs, 'objectsDeleted');
  const checkpointsDeleted = sum(result.runs, 'checkpointsDeleted');
  const bytesFreed = sum(result.runs, 'bytesFreed');
  const again = result.again;
  const problems: string[] = [];
  const eachThreadHas = (stored: Stored, n: number) =>
    stored.records.size === threadCount && [...stored.records.values()].every((records) => records === n);
  if (!eachThreadHas(before, CHECKPOINTS)) problems.push(`before: not ${CHECKPOINTS} records in each thread`);
  if (!eachThreadHas(after, KEEP)) problems.push(`after: not ${KEEP} records in each thread`);
  if (checkpointsDeleted !== threadCount * (CHECKPOINTS - KEEP))
    problems.push(`checkpointsDeleted ${checkpointsDeleted}, not ${threadCount * (CHECKPOINTS - KEEP)}`);
  if (objectsDeleted !== before.objects - after.objects)
    problems.push(`objectsDeleted ${objectsDeleted}, but ${before.objects - after.objects} objects went`);
  if (bytesFreed !== before.bytes - after.bytes)
    problems.push(`bytesFreed ${bytesFreed}, but ${before.bytes - after.bytes} bytes went`);
  if (sum([again], 'objectsDeleted') !== 0 || !again.report.complete)
    problems.push('the run right after deleted something or left work');
  const expected = Array.from({ length: KEEP }, (_, i) => checkpointId(CHECKPOINTS - i));
  for (let index = 0; index < threadCount; index += Math.max(1, Math.floor(threadCount / SAMPLE_THREADS))) {
    const history = await threads.listCheckpoints(tenant, threadId(index), { limit: 100 });
    const ids = history.checkpoints.map((tuple) => tuple.checkpointId);
    if (ids.join() !== expected.join()) problems.push(`${threadId(index)}: history ${ids.join(', ')}`);
    const head = await threads.getCheckpoint(tenant, threadId(index), '');
    if (!head.values['messages']?.data.equals(MESSAGE))
      problems.push(`${threadId(index)}: head value differs`);
  }
  if (problems.length > 0) throw new Error(`prune bench (${setup.backend}): ${problems.join('; ')}`);

  // 4. Raw deletion of as many objects of the same average size.
  const rawSize = Math.round(bytesFreed / objectsDeleted);
  const raw = await setup.raw.deleteRate(objectsDeleted, rawSize);

  const pruneMs = result.runs.reduce((total, run) => total + run.ms, 0);
  const requests = result.runs.reduce((total, run) => total + run.requests.total, 0);
  const byKind: Record<string, number> = {};
  for (const run of result.runs) {
    for (const [kind, n] of Object.entries(run.requests.byKind)) byKind[kind] = (byKind[kind] ?? 0) + n;
  }
  const pruneRate = objectsDeleted / (pruneMs / 1000);
  const inThreadSpace = again.requests.byContainer[setup.threadSpace] ?? {};
  const againListings = inThreadSpace['list'] ?? 0;
  const againElsewhere = again.requests.total - Object.values(inThreadSpace).reduce((a, b) => a + b, 0);
  const requestsName =
    setup.backend === 'blob'
      ? 'storage requests (counted in the Blob client pipeline)'
      : 'storage calls (of the key/value store, counted by a wrapper)';
  const runName = (index: number) => (index === result.runs.length ? 'right after' : String(index + 1));

  return [
    ...setup.notes,
    `Written beforehand, in-process through the thread store, ${WRITERS} threads at once: ` +
      `${count(threadCount * CHECKPOINTS)} checkpoints (one changed channel of ${fixed(MESSAGE.length / 1024, 1)} KiB ` +
      `and a pending write each) in ${fixed(writing.seconds, 0)} s.`,
    '',
    table(
      ['run', 'checkpoints deleted', 'objects deleted', 'MiB freed', requestsName, 'seconds', 'work left'],
      [...result.runs, again].map((run, index) => [
        runName(index),
        count(sum([run], 'checkpointsDeleted')),
        count(sum([run], 'objectsDeleted')),
        mib(sum([run], 'bytesFreed')),
        `${count(run.requests.total)} (${kinds(run.requests.byKind)})`,
        fixed(run.ms / 1000, 1),
        run.report.complete ? 'no' : 'yes',
      ]),
    ),
    '',
    table(
      ['measure', 'result'],
      [
        [
          `time to prune (${result.runs.length} run${result.runs.length === 1 ? '' : 's'}, each at most ${count(result.budget.maxDeletes)} deletions or ${result.budget.maxSeconds} s)`,
          `${fixed(pruneMs / 1000, 1)} s, ${fixed(pruneRate, 0)} objects/s`,
        ],
        [
          'deleted',
          `${count(checkpointsDeleted)} checkpoints (${CHECKPOINTS - KEEP} of each thread's ${CHECKPOINTS}), ` +
            `${count(objectsDeleted)} objects (checkpoint records, values, pending writes)`,
        ],
        [requestsName, `${count(requests)}: ${kinds(byKind)}`],
        [
          'per deleted object / per deleted checkpoint',
          `**${fixed(requests / objectsDeleted, 2)}** / ${fixed(requests / checkpointsDeleted, 2)}`,
        ],
        [
          'stored before → after',
          `${count(before.objects)} objects, ${mib(before.bytes)} MiB → ${count(after.objects)} objects, ` +
            `${mib(after.bytes)} MiB (${KEEP} checkpoints left in each thread)`,
        ],
        [
          'the run right after',
          `deleted ${sum([again], 'objectsDeleted')}; ${again.requests.total} ${setup.backend === 'blob' ? 'requests' : 'calls'}: ` +
            `**${againListings} listing** of the tenant's thread space, ${againElsewhere} in the system namespace ` +
            `(policies, tenant directory, prune state); ${fixed(again.ms, 0)} ms`,
        ],
        [
          'peak RSS of the prune process',
          `**${fixed(result.maxRssMb, 0)} MB** (kernel), ${fixed(sampledRssMb, 0)} MB sampled; target under 256 MB`,
        ],
        [
          `raw: ${setup.raw.what} of ${count(objectsDeleted)} objects of ${rawSize} bytes, ${MAX_DELETES_IN_FLIGHT} in flight`,
          `${fixed(raw.seconds, 1)} s, ${fixed(raw.rate, 0)} objects/s`,
        ],
        ['prune / raw deletion rate', `**${fixed(pruneRate / raw.rate, 2)}×**`],
      ],
    ),
  ].join('\n');
}

async function rawDeletes(
  n: number,
  write: (index: number) => Promise<unknown>,
  remove: (index: number) => Promise<unknown>,
): Promise<{ seconds: number; rate: number }> {
  await measure(n, MAX_DELETES_IN_FLIGHT, (_worker, index) => write(index));
  const deleting = await measure(n, MAX_DELETES_IN_FLIGHT, (_worker, index) => remove(index));
  return { seconds: deleting.seconds, rate: n / deleting.seconds };
}

async function onLocal(progress: (line: string) => void): Promise<string> {
  const tenant = newTenant('bench');
  const settings: Record<string, string> = {
    ...backendSettings('local', ''),
    CAIRN_API_KEYS: apiKeysSetting([tenant]),
  };
  const dataDir = settings['CAIRN_DATA_DIR'] ?? '';
  const rawDir = tempDir('bench-raw');
  const rawFile = (index: number) => path.join(rawDir, String(index % 100), String(index));
  const section = await pruneBench(
    {
      backend: 'local',
      threads: LOCAL_THREADS,
      settings,
      factory: new LocalKeyValueStoreFactory(dataDir, 2 * 1024 * 1024),
      threadSpace: `threads/${tenant.tenant}`,
      stored: async () => {
        const stored = await storedInFolder(path.join(dataDir, 'threads', tenant.tenant));
        return storedInFolder(path.join(dataDir, 'threads-long', tenant.tenant), stored as StoredTally);
      },
      raw: {
        what: '`unlink`',
        deleteRate: async (n, size) => {
          const body = Buffer.alloc(size, 'x');
          for (let folder = 0; folder < Math.min(n, 100); folder++) {
            await fs.mkdir(path.join(rawDir, String(folder)), { recursive: true });
          }
          return rawDeletes(
            n,
            (index) => fs.writeFile(rawFile(index), body),
            (index) => fs.unlink(rawFile(index)),
          );
        },
      },
      notes: [`### Local backend: ${count(LOCAL_THREADS)} threads × ${CHECKPOINTS} checkpoints`, ''],
    },
    tenant.tenant,
    progress,
  );
  await fs.rm(dataDir, { recursive: true, force: true });
  await fs.rm(rawDir, { recursive: true, force: true });
  return section;
}

async function onAzurite(progress: (line: string) => void): Promise<string> {
  const azurite = await startAzurite();
  const tenant = newTenant('bench');
  const settings: Record<string, string> = {
    ...backendSettings('blob', azurite.blobEndpoint),
    CAIRN_API_KEYS: apiKeysSetting([tenant]),
    CAIRN_STORAGE_TIMEOUT_MS: '120000',
  };
  const base = settings['CAIRN_BLOB_CONTAINER'] ?? '';
  const service = new BlobServiceClient(
    azurite.blobEndpoint,
    new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY),
  );
  const rawContainer = async (name: string) => {
    const container = service.getContainerClient(name);
    await container.create();
    return container;
  };
  const rawBlobDeletes = async (container: ContainerClient, n: number, size: number) => {
    const body = Buffer.alloc(size, 'x');
    const name = (index: number) => `d/raw/${String(index).padStart(7, '0')}`;
    return rawDeletes(
      n,
      (index) => container.getBlockBlobClient(name(index)).upload(body, body.length),
      (index) => container.deleteBlob(name(index)),
    );
  };
  // Azurite's own cost per request, before it holds anything else.
  const probe = await rawBlobDeletes(await rawContainer(`${base}-probe`), AZURITE_PROBE, 465);
  let rawRate = NaN;
  let heldAtRaw = 0;
  const threadContainer = spaceContainerName(base, 'threads', tenant.tenant);
  const section = await pruneBench(
    {
      backend: 'blob',
      threads: AZURITE_THREADS,
      settings,
      factory: new BlobKeyValueStoreFactory(service, base, 2 * 1024 * 1024, 120_000),
      threadSpace: threadContainer,
      stored: () => storedInContainer(service.getContainerClient(threadContainer)),
      raw: {
        what: '`deleteBlob`',
        deleteRate: async (n, size) => {
          heldAtRaw = n + (await storedInContainer(service.getContainerClient(threadContainer))).objects;
          const raw = await rawBlobDeletes(await rawContainer(`${base}-raw`), n, size);
          rawRate = raw.rate;
          return raw;
        },
      },
      notes: [
        `### Blob backend on Azurite: ${count(AZURITE_THREADS)} threads × ${CHECKPOINTS} checkpoints`,
        '',
      ],
    },
    tenant.tenant,
    progress,
  );
  await azurite.stop();
  return [
    section,
    '',
    `Azurite's raw \`deleteBlob\` rate falls as it holds more: ${fixed(probe.rate, 0)} blobs/s holding ${count(AZURITE_PROBE)} blobs, ` +
      `${fixed(rawRate, 0)} blobs/s holding some ${count(heldAtRaw)} (${MAX_DELETES_IN_FLIGHT} in flight, 465 bytes and the average size above). ` +
      `The storage deadline of the prune process is 120 s here (CAIRN_STORAGE_TIMEOUT_MS; 8 s by default).`,
  ].join('\n');
}

export async function runPruneBench(progress: (line: string) => void): Promise<string> {
  return [await onLocal(progress), await onAzurite(progress)].join('\n\n');
}
