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

let azurite: Azurite | undefined;

/** One Azurite (in memory, free ports) for the whole run; every test uses fresh names in it. */
export async function setup(project: TestProject): Promise<void> {
  if (!existsSync(path.resolve('dist/dev/host/serve.js'))) {
    throw new Error('dist/ is missing: run the tests with `npm test` (it builds first)');
  }
  azurite = await startAzurite({ startTimeoutMs: scaled(30_000) });
  project.provide(
    'azurite' as never,
    {
      blobEndpoint: azurite.blobEndpoint,
      queueEndpoint: azurite.queueEndpoint,
      tableEndpoint: azurite.tableEndpoint,
      connectionString: azurite.connectionString,
    } satisfies AzuriteInfo as never,
  );
}

export async function teardown(): Promise<void> {
  await azurite?.stop();
}
