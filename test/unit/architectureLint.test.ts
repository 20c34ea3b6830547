import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

import { beforeAll, describe, expect, it } from 'vitest';

import { tempDir } from '../support/cleanup';

/**
 * The architecture lint (`npm run lint`, .dependency-cruiser.cjs) on a copy of shared/ and client/
 * with the project's own config: the tree as it is passes, and a deliberate cycle or layering
 * violation written into the copy fails it, naming the rule.
 */

const run = promisify(execFile);
const root = path.resolve(__dirname, '../..');
const cruiser = path.join(root, 'node_modules/dependency-cruiser/bin/dependency-cruise.mjs');

let copy: string;

beforeAll(() => {
  copy = tempDir('architecture');
  for (const part of ['shared', 'client'])
    cpSync(path.join(root, part), path.join(copy, part), { recursive: true });
  for (const file of ['.dependency-cruiser.cjs', 'tsconfig.json', 'package.json']) {
    cpSync(path.join(root, file), path.join(copy, file));
  }
  symlinkSync(path.join(root, 'node_modules'), path.join(copy, 'node_modules'), 'dir');
});

/** depcruise with the project's config on the copy: its exit status and what it printed. */
async function lint(): Promise<{ ok: boolean; output: string }> {
  try {
    const { stdout, stderr } = await run(
      process.execPath,
      [cruiser, '--config', '.dependency-cruiser.cjs', 'shared', 'client'],
      { cwd: copy, maxBuffer: 16 * 1024 * 1024 },
    );
    return { ok: true, output: stdout + stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    if (typeof failed.code !== 'number') throw error;
    return { ok: false, output: `${failed.stdout ?? ''}${failed.stderr ?? ''}` };
  }
}

/** Runs the lint with `files` (path in the copy -> source) added, then removes them again. */
async function lintWith(files: Record<string, string>): Promise<{ ok: boolean; output: string }> {
  const written = Object.keys(files).map((file) => path.join(copy, file));
  try {
    for (const [file, source] of Object.entries(files)) {
      mkdirSync(path.dirname(path.join(copy, file)), { recursive: true });
      writeFileSync(path.join(copy, file), source);
    }
    return await lint();
  } finally {
    for (const file of written) rmSync(file, { force: true });
  }
}

describe('the architecture lint', { timeout: 180_000 }, () => {
  it('passes on the tree as it is', async () => {
    const { ok, output } = await lint();
    expect(output).toContain('no dependency violations found');
    expect(ok).toBe(true);
  });

  it('fails on an import cycle, type-only imports included', async () => {
    const { ok, output } = await lintWith({
      'shared/tenants/cycleOne.ts': "import type { Two } from './cycleTwo';\nexport type One = Two[];\n",
      'shared/tenants/cycleTwo.ts': "import type { One } from './cycleOne';\nexport type Two = One | null;\n",
    });
    expect(ok).toBe(false);
    expect(output).toMatch(/error no-cycles: shared\/tenants\/cycle(One|Two)\.ts/);
  });

  it('fails when a domain imports a job', async () => {
    const { ok, output } = await lintWith({
      'shared/threads/usesAJob.ts':
        "import { GRACE_MS } from '../jobs/retentionPrune';\nexport const grace = GRACE_MS;\n",
    });
    expect(ok).toBe(false);
    expect(output).toContain(
      'error domains-import-no-job: shared/threads/usesAJob.ts → shared/jobs/retentionPrune.ts',
    );
  });

  it('fails when anything but the composition root picks a storage implementation or an Azure SDK', async () => {
    const { ok, output } = await lintWith({
      'shared/memory/picksAStore.ts':
        "import { LocalKeyValueStoreFactory } from '../storage/local/localKeyValueStore';\n" +
        "import type { BlobServiceClient } from '@azure/storage-blob';\n" +
        'export type Picked = [LocalKeyValueStoreFactory, BlobServiceClient];\n',
    });
    expect(ok).toBe(false);
    expect(output).toContain(
      'error storage-implementations-in-the-composition-root: shared/memory/picksAStore.ts → shared/storage/local/localKeyValueStore.ts',
    );
    expect(output).toMatch(
      /error azure-sdks-in-storage-azure: shared\/memory\/picksAStore\.ts → .*@azure\/storage-blob/,
    );
  });

  it('fails when the protocol imports anything but itself, Node and its three libraries', async () => {
    const { ok, output } = await lintWith({
      'shared/protocol/usesTheDomain.ts':
        "import { getServices } from '../services';\nimport { Key } from './fields';\n" +
        "import { createHash } from 'node:crypto';\n" +
        'export const all = [getServices, Key, createHash];\n',
    });
    expect(ok).toBe(false);
    expect(output).toContain(
      'error protocol-stands-alone: shared/protocol/usesTheDomain.ts → shared/services.ts',
    );
    expect(output).not.toContain('shared/protocol/usesTheDomain.ts → node:crypto');
    expect(output).not.toContain('shared/protocol/usesTheDomain.ts → shared/protocol/fields.ts');
  });

  it('fails when the client imports server code other than the protocol', async () => {
    const { ok, output } = await lintWith({
      'client/reachesTheServer.ts':
        "import { getServices } from '../shared/services';\nexport const services = getServices;\n",
      // A pure module of the domain is still the server's.
      'client/cli/notListed.ts':
        "import { validateKey } from '../../shared/protocol/keys';\n" +
        "import { checkThreadId } from '../../shared/threads/identifiers';\n" +
        'export const check = [validateKey, checkThreadId];\n',
    });
    expect(ok).toBe(false);
    expect(output).toContain(
      'error client-imports-no-server-code: client/reachesTheServer.ts → shared/services.ts',
    );
    expect(output).toContain(
      'error client-imports-no-server-code: client/cli/notListed.ts → shared/threads/identifiers.ts',
    );
    expect(output).not.toContain('notListed.ts → shared/protocol/keys.ts');
    expect(output).toContain('error client-reaches-no-server-code: client/reachesTheServer.ts');
  });
});
