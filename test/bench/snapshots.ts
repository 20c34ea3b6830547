import { spawn } from 'node:child_process';
import { createHash, generateKeyPairSync, randomBytes, randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';

import { BlobServiceClient, type ContainerClient, StorageSharedKeyCredential } from '@azure/storage-blob';
import { CairnClient } from '@cairn-state/client';
import { loadSnapshot } from '@cairn-state/client';
import { saveSnapshot } from '@cairn-state/client';
import { type HttpSender, nodeHttpSender } from '@cairn-state/client';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import { readAllBytes } from '../../shared/protocol/streams';
import { apiKeysSetting, backendSettings, newTenant, startApp, type TestTenant } from '../support/app';
import { startAzurite, tempDir } from '../support/cleanup';
import { fixed, measure, table, watchRss } from './measure';
import { sized } from './mode';

/**
 * `npm run bench -- snapshots`: in one process against one Azurite (Blob backend), a 64 MiB workspace
 * of 2,000 files saved through the snapshot client and the HTTP API against raw parallel SDK uploads
 * of the same files (each read from disk, one blob each), and loaded against raw parallel downloads
 * (each written to disk), with the same number of files in flight on both sides. After a warm-up
 * of both, raw and API runs alternate (four rounds, the side that goes first alternating too) so
 * that drift hits both alike; every round saves as a new tenant, and both sides' blobs are deleted
 * after each round, so that no round finds the parts of an earlier one or a fuller Azurite. Then a re-save
 * after changing one file (the parts and requests it sends), and the peak RSS of the `cairn` CLI
 * as a child process saving and loading the same workspace.
 */

const FILES = sized(2000, 40);
const TOTAL_BYTES = sized(64, 8) * 1024 * 1024;
const CONCURRENCY = 16;
const ROUNDS = sized(4, 1);
const MB = 1024 * 1024;
/** A few larger files, one of them over the 2 MiB part size (so some files have several parts). */
const LARGE_FILES = [3 * MB, 1536 * 1024, 1024 * 1024, 768 * 1024, 512 * 1024];

const mean = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / values.length;

interface Workspace {
  readonly root: string;
  /** Relative paths and sizes. */
  readonly files: { path: string; size: number }[];
}

/** 2,000 files in 40 folders, 64 MiB in all: five larger files, the rest of 1 KiB to about 60 KiB. */
function makeWorkspace(root: string): Workspace {
  const small = FILES - LARGE_FILES.length;
  const smallBytes = TOTAL_BYTES - LARGE_FILES.reduce((sum, size) => sum + size, 0);
  const weights = Array.from({ length: small }, (_, index) => 1 + ((index * 7919) % 97));
  const weightSum = weights.reduce((sum, weight) => sum + weight, 0);
  const sizes = weights.map((weight) => Math.max(1024, Math.floor((smallBytes * weight) / weightSum)));
  sizes[sizes.length - 1] =
    (sizes[sizes.length - 1] ?? 0) + smallBytes - sizes.reduce((sum, size) => sum + size, 0);
  const all = [...LARGE_FILES, ...sizes];
  const files = all.map((size, index) => ({ path: `dir${index % 40}/file${index}.bin`, size }));
  for (const file of files) {
    const absolute = path.join(root, file.path);
    mkdirSync(path.dirname(absolute), { recursive: true });
    writeFileSync(absolute, randomBytes(file.size));
  }
  return { root, files };
}

export async function runSnapshotsBench(progress: (line: string) => void): Promise<string> {
  const azurite = await startAzurite();
  const tenants = Array.from({ length: ROUNDS + 3 }, (_, index) => newTenant(`bench${index}`));
  const settings: Record<string, string> = {
    CAIRN_API_KEYS: apiKeysSetting(tenants),
    ...backendSettings('blob', azurite.blobEndpoint),
    CAIRN_LOG_LEVEL: 'warn',
  };
  const app = await startApp(settings, undefined, { keepOutput: false });
  const runtimeRss = watchRss(app.child.pid ?? 0);
  const work = tempDir('snapshots-bench');
  try {
    const { privateKey, publicKey } = generateKeyPairSync('ed25519');
    const keyFile = path.join(work, 'bench.key');
    const publicFile = path.join(work, 'bench.pub');
    await writeFile(keyFile, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    await writeFile(publicFile, publicKey.export({ type: 'spki', format: 'pem' }));
    const workspace = makeWorkspace(path.join(work, 'workspace'));
    const service = new BlobServiceClient(
      azurite.blobEndpoint,
      new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY),
    );
    const apiOf = (tenant: TestTenant, send?: HttpSender) =>
      new CairnClient({ url: app.url, token: tenant.key, ...(send === undefined ? {} : { send }) }).snapshots;
    const [warmTenant, cliTenant, ...roundTenants] = tenants as [TestTenant, TestTenant, ...TestTenant[]];

    // Warm-up, not measured: a whole save and load and a raw upload and download, so that neither
    // side's first round pays for compiling its code paths.
    progress('warming up');
    const warm = await saveSnapshot(apiOf(warmTenant), workspace.root, {
      workspaceId: 'warm',
      privateKey,
      concurrency: CONCURRENCY,
    });
    await loadSnapshot(apiOf(warmTenant), warm.id, path.join(work, 'warm-loaded'), {
      publicKey,
      concurrency: CONCURRENCY,
    });
    await rm(path.join(work, 'warm-loaded'), { recursive: true, force: true });
    const warmContainer = service.getContainerClient(`warm${randomUUID().replaceAll('-', '').slice(0, 16)}`);
    await warmContainer.create();
    await uploadRaw(warmContainer, workspace);
    await downloadRaw(warmContainer, workspace, path.join(work, 'warm-raw'));
    await rm(path.join(work, 'warm-raw'), { recursive: true, force: true });
    await warmContainer.delete();
    // Azurite's cost per upload grows with the blobs already in the container (measured: about half
    // again with 2,000 more): the raw side uploads into a new container each round, so the API side
    // starts each round with the snapshot blobs of the container deleted too.
    const cairnContainer = service.getContainerClient(settings['CAIRN_BLOB_CONTAINER'] ?? '');
    await deleteTenantBlobs(cairnContainer, warmTenant);

    const rawUpload: number[] = [];
    const apiSave: number[] = [];
    const rawDownload: number[] = [];
    const apiLoad: number[] = [];
    let last = { tenant: warmTenant, id: warm.id };
    for (let round = 0; round < ROUNDS; round++) {
      progress(`round ${round + 1} of ${ROUNDS}`);
      const container = service.getContainerClient(`raw${randomUUID().replaceAll('-', '').slice(0, 16)}`);
      await container.create();
      const tenant = roundTenants[round] ?? warmTenant;
      let id = '';
      const rawSide = {
        upload: async () => rawUpload.push(await seconds(() => uploadRaw(container, workspace))),
        download: async () =>
          rawDownload.push(
            await seconds(() => downloadRaw(container, workspace, path.join(work, `raw-${round}`))),
          ),
      };
      const target = path.join(work, `loaded-${round}`);
      const apiSide = {
        upload: async () =>
          apiSave.push(
            await seconds(async () => {
              ({ id } = await saveSnapshot(apiOf(tenant), workspace.root, {
                workspaceId: 'bench',
                privateKey,
                concurrency: CONCURRENCY,
              }));
            }),
          ),
        download: async () =>
          apiLoad.push(
            await seconds(() =>
              loadSnapshot(apiOf(tenant), id, target, { publicKey, concurrency: CONCURRENCY }),
            ),
          ),
      };
      // Which side goes first alternates from round to round.
      const [first, second] = round % 2 === 0 ? [rawSide, apiSide] : [apiSide, rawSide];
      await first.upload();
      await second.upload();
      await first.download();
      await second.download();
      last = { tenant, id };
      const probe = workspace.files[round * 7]!;
      if (
        !(await readFile(path.join(target, probe.path))).equals(
          await readFile(path.join(workspace.root, probe.path)),
        )
      ) {
        throw new Error('a loaded file differs from the saved one');
      }
      // Not measured: both sides leave the storage as they found it, so that no round works on a
      // fuller Azurite than the one before (the last round's snapshot stays, for the re-save).
      await Promise.all([
        rm(path.join(work, `raw-${round}`), { recursive: true, force: true }),
        rm(target, { recursive: true, force: true }),
        container.delete(),
        round < ROUNDS - 1 ? deleteTenantBlobs(cairnContainer, tenant) : Promise.resolve(),
      ]);
    }

    // Re-save after changing one file: what goes over the wire.
    progress('re-save after one change');
    // A small file (the first five are the large ones).
    const changed = workspace.files[sized(100, 20)]!;
    await writeFile(path.join(workspace.root, changed.path), randomBytes(changed.size));
    const counts = { partPuts: 0, publishes: 0, requests: 0 };
    const inner = nodeHttpSender();
    const counting: HttpSender = (request) => {
      counts.requests++;
      if (request.method === 'PUT' && request.url.includes('/snapshots/objects/')) counts.partPuts++;
      if (request.method === 'POST' && request.url.endsWith('/snapshots')) counts.publishes++;
      return inner(request);
    };
    let resave = { partsUploaded: 0, parent: null as string | null };
    const resaveSeconds = await seconds(async () => {
      resave = await saveSnapshot(apiOf(last.tenant, counting), workspace.root, {
        workspaceId: 'bench',
        privateKey,
        concurrency: CONCURRENCY,
      });
    });
    if (resave.parent !== last.id) throw new Error('the re-save was not published on the previous snapshot');

    // The client's memory: the CLI as its own process, saving and loading the workspace.
    progress('CLI peak RSS');
    const env = { PATH: process.env['PATH'] ?? '', CAIRN_URL: app.url, CAIRN_KEY: cliTenant.key };
    const saved = await runCli(
      ['snapshot', 'save', workspace.root, '--workspace', 'cli', '--key', keyFile],
      env,
    );
    const loaded = await runCli(
      ['snapshot', 'load', saved.stdout.trim(), path.join(work, 'cli-loaded'), '--public-key', publicFile],
      env,
    );
    const peakRuntime = runtimeRss.stop();

    const rate = (secondsTaken: number) => TOTAL_BYTES / MB / secondsTaken;
    const saveRatio = rate(mean(apiSave)) / rate(mean(rawUpload));
    const loadRatio = rate(mean(apiLoad)) / rate(mean(rawDownload));
    const verdict = (ok: boolean) => (ok ? 'met' : '**missed**');
    const cell = (values: number[]) =>
      `${fixed(rate(mean(values)))} MB/s (${fixed(mean(values), 2)} s: ${values.map((value) => fixed(value, 2)).join(', ')})`;

    return [
      `${TOTAL_BYTES / MB} MiB workspace of ${FILES} files (1 KiB to 3 MiB; one file over the 2 MiB part size), ${CONCURRENCY} files in flight on both sides, mean of ${ROUNDS} alternating rounds (each side first in half of them); Blob backend on Azurite, same run. Raw: each file read from disk and uploaded as one blob (create-only); downloaded (one request) and written to disk. Cairn: \`saveSnapshot\` (walk, hash, upload parts, sign, publish) and \`loadSnapshot\` (verify manifest, download, check SHA-256, fsync, modes, rename).`,
      '',
      table(
        ['measurement', 'raw SDK', 'Cairn client + HTTP API', 'API/raw', 'target'],
        [
          [
            `save of ${TOTAL_BYTES / MB} MiB`,
            cell(rawUpload),
            cell(apiSave),
            `**${fixed(saveRatio, 2)}×**`,
            `≥ 0.6×: ${verdict(saveRatio >= 0.6)}`,
          ],
          [
            `load of ${TOTAL_BYTES / MB} MiB`,
            cell(rawDownload),
            cell(apiLoad),
            `**${fixed(loadRatio, 2)}×**`,
            `≥ 0.6×: ${verdict(loadRatio >= 0.6)}`,
          ],
        ],
      ),
      '',
      table(
        ['re-save after changing one file', 'value', 'target'],
        [
          ['parts uploaded', String(resave.partsUploaded), `1: ${verdict(resave.partsUploaded === 1)}`],
          ['part PUT requests', String(counts.partPuts), `1: ${verdict(counts.partPuts === 1)}`],
          ['manifest publishes', String(counts.publishes), `1: ${verdict(counts.publishes === 1)}`],
          ['HTTP requests in all (read latest, parts, publish)', String(counts.requests), ''],
          ['time', `${fixed(resaveSeconds * 1000, 0)} ms (hashing ${TOTAL_BYTES / MB} MiB included)`, ''],
        ],
      ),
      '',
      table(
        ['peak RSS', 'MB', 'target'],
        [
          [
            `client (\`cairn snapshot save\`, ${TOTAL_BYTES / MB} MiB, ${FILES.toLocaleString('en-US')} files)`,
            fixed(saved.rss, 0),
            `< 256: ${verdict(saved.rss < 256)}`,
          ],
          [
            `client (\`cairn snapshot load\`, ${TOTAL_BYTES / MB} MiB, ${FILES.toLocaleString('en-US')} files)`,
            fixed(loaded.rss, 0),
            `< 256: ${verdict(loaded.rss < 256)}`,
          ],
          ['local runtime (whole benchmark)', fixed(peakRuntime, 0), ''],
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

/** Every blob of a tenant's snapshots (the Blob backend's layout: snapshots/<hash of the tenant>/). */
async function deleteTenantBlobs(container: ContainerClient, tenant: TestTenant): Promise<void> {
  const prefix = `snapshots/${createHash('sha256').update(tenant.tenant).digest('hex').slice(0, 32)}/`;
  const names: string[] = [];
  for await (const blob of container.listBlobsFlat({ prefix })) names.push(blob.name);
  await measure(names.length, CONCURRENCY, (_worker, index) => container.deleteBlob(names[index] ?? ''));
}

async function seconds(operation: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await operation();
  return (performance.now() - started) / 1000;
}

async function uploadRaw(container: ContainerClient, workspace: Workspace): Promise<void> {
  await measure(workspace.files.length, CONCURRENCY, async (_worker, index) => {
    const file = workspace.files[index]!;
    const bytes = await readFile(path.join(workspace.root, file.path));
    await container
      .getBlockBlobClient(file.path)
      .upload(bytes, bytes.length, { conditions: { ifNoneMatch: '*' } });
  });
}

async function downloadRaw(container: ContainerClient, workspace: Workspace, target: string): Promise<void> {
  await measure(workspace.files.length, CONCURRENCY, async (_worker, index) => {
    const file = workspace.files[index]!;
    const response = await container.getBlockBlobClient(file.path).download();
    const bytes = await readAllBytes(response.readableStreamBody);
    const destination = path.join(target, file.path);
    await mkdir(path.dirname(destination), { recursive: true });
    await writeFile(destination, bytes);
  });
}

/** Runs the `cairn` CLI; returns its stdout and peak RSS in MB; throws when it fails. */
async function runCli(args: string[], env: Record<string, string>): Promise<{ stdout: string; rss: number }> {
  const child = spawn(process.execPath, [path.resolve('client/cli/dist/cjs/bin.js'), ...args], { env });
  const rss = watchRss(child.pid ?? 0, 50);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (data: Buffer) => (stdout += data.toString()));
  child.stderr.on('data', (data: Buffer) => (stderr += data.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  const peak = rss.stop();
  if (code !== 0) throw new Error(`cairn ${args.join(' ')} failed (${code}): ${stderr}`);
  return { stdout, rss: peak };
}
