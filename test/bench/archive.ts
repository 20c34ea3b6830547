import { spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { appendFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';

import { BlobServiceClient, type ContainerClient, StorageSharedKeyCredential } from '@azure/storage-blob';
import { ArchiveClient } from '@cairn-state/client';
import { nodeHttpSender } from '@cairn-state/client';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import { BLOCK_BYTES } from '../../shared/protocol/archive/identifiers';
import { apiKeysSetting, backendSettings, newTenant, startApp } from '../support/app';
import { tempDir } from '../support/cleanup';
import { startAzurite } from '../support/cleanup';
import { sessionIndexSettings } from '../support/tables';
import { fixed, measure, processCpuMs, table, watchRss } from './measure';
import { sized } from './mode';

/**
 * `npm run bench -- archive`: in one process against one Azurite, a 64 MiB `events.jsonl` published
 * through the archive client and the HTTP API (Blob backend) against raw parallel SDK uploads of the
 * same 64 KiB blocks, restore against raw parallel downloads, five incremental publishes (each
 * after a 1 KiB append), and the peak RSS of the client (the `cairn` CLI as a child process) and of the local
 * runtime. After a warm-up of both, raw and API runs alternate (three rounds each) so that drift
 * hits both alike; both use the same number of requests in flight.
 *
 * An instance that stored a checkpoint's objects itself does not ask the storage about them again
 * when the checkpoint is published (SessionArchive.stored). So that the figure of the check in
 * storage is on record too, after the rounds one more publish goes through two instances: the
 * objects through one, the checkpoint through another (warmed up first), which lists the 1,024
 * blocks.
 */

const FILE_BYTES = sized(64, 2) * 1024 * 1024;
const BLOCKS = FILE_BYTES / BLOCK_BYTES;
const CONCURRENCY = 32;
const ROUNDS = sized(3, 1);
const WARM_UP_BLOCKS = sized(256, 8);
const MB = 1024 * 1024;

const INCREMENTAL_PUBLISHES = sized(5, 2);
const mean = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / values.length;

export async function runArchiveBench(): Promise<string> {
  const azurite = await startAzurite();
  const tenant = newTenant('bench');
  const settings = {
    CAIRN_API_KEYS: apiKeysSetting([tenant]),
    ...backendSettings('blob', azurite.blobEndpoint),
    ...sessionIndexSettings(azurite.tableEndpoint),
    CAIRN_LOG_LEVEL: 'warn',
  };
  const app = await startApp(settings, undefined, { keepOutput: false });
  const runtimeRss = watchRss(app.child.pid ?? 0);
  const work = tempDir('archive-bench');
  try {
    const events = randomBytes(FILE_BYTES);
    const service = new BlobServiceClient(
      azurite.blobEndpoint,
      new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY),
    );
    const client = new ArchiveClient({ url: app.url, token: tenant.key, concurrency: CONCURRENCY });

    // Warm-up, not measured: a 16 MiB publish and as many raw uploads, so that neither side's first
    // round pays for compiling its code paths.
    const warmContainer = service.getContainerClient(`warm${randomUUID().replaceAll('-', '').slice(0, 16)}`);
    await warmContainer.create();
    await uploadRaw(warmContainer, events, WARM_UP_BLOCKS);
    await warmContainer.delete();
    const warmDir = await mkdtemp(path.join(work, 'warm-'));
    await writeFile(path.join(warmDir, 'events.jsonl'), events.subarray(0, WARM_UP_BLOCKS * BLOCK_BYTES));
    await client.publishCheckpoint(warmDir, `warm-${randomBytes(4).toString('hex')}`);

    // CPU per block (ms) of each process, to tell where a ratio comes from on a small machine.
    const cpu = { rawClient: 0, rawStorage: 0, apiClient: 0, apiRuntime: 0, apiStorage: 0 };
    const appPid = app.child.pid ?? 0;
    const rawUpload: number[] = [];
    const apiPublish: number[] = [];
    const rawDownload: number[] = [];
    const apiRestore: number[] = [];
    let lastSession = { dir: '', id: '' };
    for (let round = 0; round < ROUNDS; round++) {
      const container = service.getContainerClient(`raw${randomUUID().replaceAll('-', '').slice(0, 16)}`);
      await container.create();
      let before = cpuSnapshot([azurite.pid]);
      rawUpload.push(await seconds(() => uploadRaw(container, events)));
      let used = cpuSince(before);
      cpu.rawClient += used.self / (BLOCKS * ROUNDS);
      cpu.rawStorage += (used.others[0] ?? 0) / (BLOCKS * ROUNDS);

      const dir = await mkdtemp(path.join(work, 'session-'));
      await writeFile(path.join(dir, 'events.jsonl'), events);
      const id = `bench-${round}-${randomBytes(4).toString('hex')}`;
      before = cpuSnapshot([appPid, azurite.pid]);
      apiPublish.push(await seconds(() => client.publishCheckpoint(dir, id)));
      used = cpuSince(before);
      cpu.apiClient += used.self / (BLOCKS * ROUNDS);
      cpu.apiRuntime += (used.others[0] ?? 0) / (BLOCKS * ROUNDS);
      cpu.apiStorage += (used.others[1] ?? 0) / (BLOCKS * ROUNDS);
      lastSession = { dir, id };

      rawDownload.push(await seconds(() => downloadRaw(container)));
      const target = path.join(work, `restored-${round}`);
      apiRestore.push(await seconds(() => client.restoreCheckpoint(id, target)));
      if (!(await readFile(path.join(target, 'events.jsonl'))).equals(events)) {
        throw new Error('the restored file differs from the published one');
      }
      await rm(target, { recursive: true, force: true });
      await container.delete();
    }

    // The incremental publish: 1 KiB appended to the last published session, then published, five
    // times (one publish of about 0.1 s is too short to stand for itself on a noisy machine).
    const incremental = { objectsUploaded: 0, requests: 0, seconds: [] as number[] };
    for (let append = 0; append < INCREMENTAL_PUBLISHES; append++) {
      await appendFile(path.join(lastSession.dir, 'events.jsonl'), Buffer.alloc(1024, 0x61));
      incremental.seconds.push(
        await seconds(async () => {
          const report = await client.publishCheckpoint(lastSession.dir, lastSession.id);
          incremental.objectsUploaded = Math.max(incremental.objectsUploaded, report.objectsUploaded);
          incremental.requests = Math.max(incremental.requests, report.requests);
        }),
      );
    }
    const incrementalSeconds = mean(incremental.seconds);

    // Once, after the rounds (so as not to weigh on them, as much as an idle instance would): the
    // checkpoint through another instance.
    const otherInstance = await startApp(settings, undefined, { keepOutput: false });
    let elsewhereSeconds: number;
    try {
      // Objects to `app`, the checkpoint itself to `otherInstance`.
      const send = nodeHttpSender();
      const twoInstances = new ArchiveClient({
        url: app.url,
        token: tenant.key,
        concurrency: CONCURRENCY,
        send: (request) =>
          send(
            request.method === 'POST' && request.url.endsWith('/checkpoints')
              ? { ...request, url: otherInstance.url + request.url.slice(app.url.length) }
              : request,
          ),
      });
      await twoInstances.publishCheckpoint(warmDir, `warm-elsewhere-${randomBytes(4).toString('hex')}`);
      const elsewhereDir = await mkdtemp(path.join(work, 'elsewhere-'));
      await writeFile(path.join(elsewhereDir, 'events.jsonl'), events);
      elsewhereSeconds = await seconds(() =>
        twoInstances.publishCheckpoint(elsewhereDir, `bench-elsewhere-${randomBytes(4).toString('hex')}`),
      );
    } finally {
      await otherInstance.stop();
    }

    // The client's memory: the CLI as its own process, publishing and restoring a fresh 64 MiB.
    const cliDir = await mkdtemp(path.join(work, 'cli-'));
    await writeFile(path.join(cliDir, 'events.jsonl'), events);
    const env = { PATH: process.env['PATH'] ?? '', CAIRN_URL: app.url, CAIRN_KEY: tenant.key };
    const cliSession = `bench-cli-${randomBytes(4).toString('hex')}`;
    const publishRss = await runCliRss(['checkpoint', 'publish', cliDir, '--session', cliSession], env);
    const restoreRss = await runCliRss(
      ['checkpoint', 'restore', '--session', cliSession, path.join(work, 'cli-restored')],
      env,
    );
    const peakRuntime = runtimeRss.stop();

    const rate = (secondsTaken: number) => FILE_BYTES / MB / secondsTaken;
    const publishRatio = rate(mean(apiPublish)) / rate(mean(rawUpload));
    const elsewhereRatio = rate(elsewhereSeconds) / rate(mean(rawUpload));
    const restoreRatio = rate(mean(apiRestore)) / rate(mean(rawDownload));
    const incrementalShare = (incrementalSeconds / mean(apiPublish)) * 100;
    const verdict = (ok: boolean) => (ok ? 'met' : '**missed**');

    return [
      `${FILE_BYTES / MB} MiB \`events.jsonl\` (${BLOCKS} blocks of 64 KiB), ${CONCURRENCY} requests in flight on both sides, mean of ${ROUNDS} alternating rounds; Blob backend on Azurite, same run.`,
      '',
      table(
        ['measurement', 'raw SDK', 'Cairn client + HTTP API', 'API/raw', 'target'],
        [
          [
            `first publish of ${FILE_BYTES / MB} MiB`,
            `${fixed(rate(mean(rawUpload)))} MB/s (${fixed(mean(rawUpload), 2)} s)`,
            `${fixed(rate(mean(apiPublish)))} MB/s (${fixed(mean(apiPublish), 2)} s)`,
            `**${fixed(publishRatio, 2)}×**`,
            `≥ 0.6×: ${verdict(publishRatio >= 0.6)}`,
          ],
          [
            'first publish, the checkpoint through another instance (its blocks checked by listing)',
            '',
            `${fixed(rate(elsewhereSeconds))} MB/s (${fixed(elsewhereSeconds, 2)} s), once`,
            `${fixed(elsewhereRatio, 2)}×`,
            '',
          ],
          [
            'CPU per 64 KiB block, publish (ms)',
            `${fixed(cpu.rawClient + cpu.rawStorage, 2)} = SDK ${fixed(cpu.rawClient, 2)} + Azurite ${fixed(cpu.rawStorage, 2)}`,
            `${fixed(cpu.apiClient + cpu.apiRuntime + cpu.apiStorage, 2)} = client ${fixed(cpu.apiClient, 2)} + runtime ${fixed(cpu.apiRuntime, 2)} + Azurite ${fixed(cpu.apiStorage, 2)}`,
            fixed((cpu.rawClient + cpu.rawStorage) / (cpu.apiClient + cpu.apiRuntime + cpu.apiStorage), 2),
            '',
          ],
          [
            `restore of ${FILE_BYTES / MB} MiB`,
            `${fixed(rate(mean(rawDownload)))} MB/s (${fixed(mean(rawDownload), 2)} s)`,
            `${fixed(rate(mean(apiRestore)))} MB/s (${fixed(mean(apiRestore), 2)} s)`,
            `**${fixed(restoreRatio, 2)}×**`,
            `≥ 0.6×: ${verdict(restoreRatio >= 0.6)}`,
          ],
        ],
      ),
      '',
      table(
        [`incremental publish after a 1 KiB append (${INCREMENTAL_PUBLISHES} times)`, 'value', 'target'],
        [
          [
            'objects uploaded (plus the manifest), at most',
            String(incremental.objectsUploaded),
            `≤ 2: ${verdict(incremental.objectsUploaded <= 2)}`,
          ],
          ['HTTP requests in all, at most', String(incremental.requests), ''],
          [
            'time, mean',
            `${fixed(incrementalSeconds * 1000, 0)} ms (${incremental.seconds.map((value) => fixed(value * 1000, 0)).join(', ')}) = **${fixed(incrementalShare, 1)} %** of the first publish`,
            `≤ 5 %: ${verdict(incrementalShare <= 5)}`,
          ],
        ],
      ),
      '',
      table(
        ['peak RSS', 'MB', 'target'],
        [
          [
            `client (\`cairn checkpoint publish\`, ${FILE_BYTES / MB} MiB)`,
            fixed(publishRss, 0),
            `< 256: ${verdict(publishRss < 256)}`,
          ],
          [
            `client (\`cairn checkpoint restore\`, ${FILE_BYTES / MB} MiB)`,
            fixed(restoreRss, 0),
            `< 256: ${verdict(restoreRss < 256)}`,
          ],
          ['local runtime (whole benchmark)', fixed(peakRuntime, 0), `< 256: ${verdict(peakRuntime < 256)}`],
        ],
      ),
    ].join('\n');
  } finally {
    runtimeRss.stop();
    await rm(work, { recursive: true, force: true });
    await app.stop();
    await azurite.stop();
  }
}

/** CPU time (ms) of this process and of `pids` (from /proc), to subtract later. */
function cpuSnapshot(pids: number[]): { self: number; others: number[]; pids: number[] } {
  const usage = process.cpuUsage();
  return { self: (usage.user + usage.system) / 1000, others: pids.map(processCpuMs), pids };
}

function cpuSince(before: { self: number; others: number[]; pids: number[] }): {
  self: number;
  others: number[];
} {
  const now = cpuSnapshot(before.pids);
  return { self: now.self - before.self, others: now.others.map((ms, i) => ms - (before.others[i] ?? 0)) };
}

async function seconds(operation: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await operation();
  return (performance.now() - started) / 1000;
}

async function uploadRaw(container: ContainerClient, events: Buffer, blocks = BLOCKS): Promise<void> {
  await measure(blocks, CONCURRENCY, async (_worker, index) => {
    const block = events.subarray(index * BLOCK_BYTES, (index + 1) * BLOCK_BYTES);
    await container.getBlockBlobClient(`blocks/${index}`).upload(block, block.length, {
      conditions: { ifNoneMatch: '*' },
    });
  });
}

async function downloadRaw(container: ContainerClient): Promise<void> {
  await measure(BLOCKS, CONCURRENCY, async (_worker, index) => {
    const response = await container.getBlockBlobClient(`blocks/${index}`).download();
    for await (const chunk of response.readableStreamBody ?? []) void chunk;
  });
}

/** Runs the `cairn` CLI and returns its peak RSS in MB; throws when it fails. */
async function runCliRss(args: string[], env: Record<string, string>): Promise<number> {
  const child = spawn(process.execPath, [path.resolve('client/cli/dist/cjs/bin.js'), ...args], { env });
  const rss = watchRss(child.pid ?? 0, 50);
  let stderr = '';
  child.stderr.on('data', (data: Buffer) => (stderr += data.toString()));
  child.stdout.resume();
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  const peak = rss.stop();
  if (code !== 0) throw new Error(`cairn ${args.join(' ')} failed (${code}): ${stderr}`);
  return peak;
}
