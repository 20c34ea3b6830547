import { randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { BlobServiceClient, StorageSharedKeyCredential } from '@azure/storage-blob';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import { apiKeysSetting, backendSettings, newTenant, startApp } from '../support/app';
import { tempDir } from '../support/cleanup';
import { startAzurite } from '../support/cleanup';
import { fixed, measure, table, watchRss } from './measure';
import { sized } from './mode';

/**
 * `npm run bench -- migration`: in one run against one Azurite, raw parallel SDK uploads of 5,000
 * files of 1 KiB against the migration of the same files through the HTTP API and the durable
 * orchestration in the local runtime; the re-run with nothing to copy; and the local runtime's
 * peak RSS while it migrates 50,000 files.
 */

const RAW_CONCURRENCY = 32;
/** Files of the speed comparison, and of the memory run. */
const SMALL = sized(5000, 100);
const LARGE = sized(50_000, 500);
const count = (files: number) => files.toLocaleString('en-US');

async function makeTree(files: number, perFolder = 100): Promise<{ root: string; paths: string[] }> {
  const root = tempDir('bench-migrate');
  const paths = Array.from(
    { length: files },
    (_, i) => `d${String(Math.floor(i / perFolder)).padStart(4, '0')}/f${String(i).padStart(6, '0')}.json`,
  );
  const value = Buffer.alloc(1024, 0x6d);
  for (let folder = 0; folder * perFolder < files; folder++) {
    await fs.mkdir(path.join(root, `d${String(folder).padStart(4, '0')}`));
  }
  await measure(paths.length, 16, (_w, i) => fs.writeFile(path.join(root, paths[i]!), value));
  return { root, paths };
}

export async function runMigrationBench(progress: (line: string) => void = () => {}): Promise<string> {
  const azurite = await startAzurite();
  const ops = newTenant('ops', true);
  const app = await startApp(
    {
      CAIRN_API_KEYS: apiKeysSetting([ops]),
      // Azurite keeps blobs in memory and slows down past tens of thousands of them; a longer
      // storage deadline keeps the 50,000-file run measuring memory, not the emulator's stalls.
      CAIRN_STORAGE_TIMEOUT_MS: '30000',
      // The sources are temp folders.
      CAIRN_MIGRATION_SOURCE_ROOTS: os.tmpdir(),
      ...backendSettings('blob', azurite.blobEndpoint),
    },
    undefined,
    { keepOutput: false },
  );
  const headers = { authorization: `Bearer ${ops.key}`, 'content-type': 'application/json' };

  async function migrate(
    tenant: string,
    root: string,
  ): Promise<{ seconds: number; report: { copied: number; skipped: number } }> {
    const started = performance.now();
    const response = await fetch(`${app.url}/api/migrations`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ tenant, sources: [{ root, prefix: 'state' }] }),
    });
    const { statusUri } = (await response.json()) as { statusUri: string };
    for (;;) {
      const status = (await (await fetch(statusUri, { headers })).json()) as {
        status: string;
        report: { copied: number; skipped: number };
      };
      if (status.status === 'completed')
        return { seconds: (performance.now() - started) / 1000, report: status.report };
      if (status.status === 'failed') throw new Error(`migration failed: ${JSON.stringify(status)}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  const small = await makeTree(SMALL);
  const service = new BlobServiceClient(
    azurite.blobEndpoint,
    new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY),
  );
  const container = service.getContainerClient(`raw${randomUUID().replaceAll('-', '').slice(0, 12)}`);
  await container.create();
  const raw = await measure(small.paths.length, RAW_CONCURRENCY, async (_w, i) => {
    const relative = small.paths[i]!;
    const value = await fs.readFile(path.join(small.root, relative));
    await container
      .getBlockBlobClient(`state/${relative}`)
      .upload(value, value.length, { conditions: { ifNoneMatch: '*' } });
  });
  const rawRate = small.paths.length / raw.seconds;

  progress(`raw: ${fixed(raw.seconds, 2)} s`);
  const first = await migrate('bench-a', small.root);
  progress(`first migration: ${fixed(first.seconds, 2)} s`);
  const second = await migrate('bench-a', small.root);
  progress(`second migration: ${fixed(second.seconds, 2)} s`);
  if (first.report.copied !== SMALL || second.report.skipped !== SMALL) {
    throw new Error(`unexpected reports: ${JSON.stringify([first.report, second.report])}`);
  }

  const large = await makeTree(LARGE, sized(500, 100));
  const rss = watchRss(app.child.pid ?? 0);
  const big = await migrate('bench-b', large.root);
  const peak = rss.stop();
  progress(`${count(LARGE)} files: ${fixed(big.seconds, 1)} s, peak RSS ${fixed(peak, 0)} MB`);

  await app.stop();
  await azurite.stop();
  await fs.rm(small.root, { recursive: true, force: true });
  await fs.rm(large.root, { recursive: true, force: true });

  const rate = (files: number, seconds: number) => fixed(files / seconds, 0);
  return [
    table(
      ['measurement', 'files', 'seconds', 'files/s', 'figure'],
      [
        [
          'raw parallel SDK uploads (create-only, 32 at once)',
          count(SMALL),
          fixed(raw.seconds, 2),
          rate(SMALL, raw.seconds),
          '',
        ],
        [
          'migration through the API (first run)',
          count(SMALL),
          fixed(first.seconds, 2),
          rate(SMALL, first.seconds),
          `**${fixed(SMALL / first.seconds / rawRate, 2)}× raw**`,
        ],
        [
          'migration again, nothing to copy',
          count(SMALL),
          fixed(second.seconds, 2),
          rate(SMALL, second.seconds),
          `**${fixed((second.seconds / first.seconds) * 100, 0)}% of the first run**`,
        ],
        [
          `migration of ${count(LARGE)} files`,
          count(LARGE),
          fixed(big.seconds, 1),
          rate(LARGE, big.seconds),
          `**local runtime peak RSS ${fixed(peak, 0)} MB**`,
        ],
      ],
    ),
  ].join('\n');
}
