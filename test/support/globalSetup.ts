import { existsSync } from 'node:fs';
import path from 'node:path';

import type { TestProject } from 'vitest/node';

import { type Azurite, startAzurite } from '../../dev/azurite';
import { scaled } from './timeouts';

export interface AzuriteInfo {
  blobEndpoint: string;
  queueEndpoint: string;
  tableEndpoint: string;
  connectionString: string;
}

let azurites: Azurite[] = [];

/**
 * One Azurite (in memory, free ports) per vitest worker for the whole run; every test uses fresh
 * names in it. Azurite answers one request at a time and scans its collections per request, so
 * files running side by side each get their own: one file's load never stalls another's calls.
 * Their blob garbage collection is off (test/support/azuriteWithoutGc.cjs).
 */
export async function setup(project: TestProject): Promise<void> {
  const preload = path.resolve('test/support/azuriteWithoutGc.cjs');
  if (!existsSync(path.resolve('dist/dev/host/serve.js'))) {
    throw new Error('dist/ is missing: run the tests with `npm test` (it builds first)');
  }
  const workers = Math.max(1, project.config.maxWorkers);
  const started = await Promise.allSettled(
    Array.from({ length: workers }, () =>
      startAzurite({
        startTimeoutMs: scaled(30_000),
        preload,
      }),
    ),
  );
  azurites = started.flatMap((outcome) => (outcome.status === 'fulfilled' ? [outcome.value] : []));
  const failure = started.find((outcome) => outcome.status === 'rejected');
  if (failure !== undefined) {
    await teardown();
    throw failure.reason;
  }
  project.provide(
    'azurites' as never,
    azurites.map((azurite): AzuriteInfo => ({
      blobEndpoint: azurite.blobEndpoint,
      queueEndpoint: azurite.queueEndpoint,
      tableEndpoint: azurite.tableEndpoint,
      connectionString: azurite.connectionString,
    })) as never,
  );
}

export async function teardown(): Promise<void> {
  await Promise.all(azurites.map((azurite) => azurite.stop()));
  azurites = [];
}
