import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';

import { BlobServiceClient, StorageSharedKeyCredential } from '@azure/storage-blob';
import { afterEach, describe, expect, it } from 'vitest';

import { type Azurite, AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import { startAzurite, tempDir } from '../support/cleanup';
import { LAUNCH, refusedNpmStart, startNpmStart, stopNpmStarts } from '../support/npmStart';

/**
 * `npm start` checks its settings before it starts anything, answers each bad one in one line
 * naming it, and serves from its own Azurite only: the sample settings name no emulator, and a
 * setting naming another one is refused.
 */
afterEach(stopNpmStarts);

/** Two starts of the whole service on a loaded two-core machine. */
const SLOW = 240_000;

async function containers(blobEndpoint: string): Promise<string[]> {
  const service = new BlobServiceClient(
    blobEndpoint,
    new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY),
  );
  const names: string[] = [];
  for await (const container of service.listContainers()) names.push(container.name);
  return names;
}

function embeddedBlobEndpoint(output: string): string {
  const match = /Azurite: blob (http:\/\/127\.0\.0\.1:\d+\/devstoreaccount1)/.exec(output);
  if (match?.[1] === undefined) throw new Error(`no Azurite line in:\n${output}`);
  return match[1];
}

/** The sample as a project's local.settings.json. */
function withSample(cwd: string, values: Record<string, string> = {}): void {
  const file = path.join(cwd, 'local.settings.json');
  copyFileSync('local.settings.sample.json', file);
  const settings = JSON.parse(readFileSync(file, 'utf8')) as { Values: Record<string, string> };
  Object.assign(settings.Values, values);
  writeFileSync(file, JSON.stringify(settings, null, 2));
}

describe('npm start and another emulator', { timeout: SLOW }, () => {
  it('serves the sample settings from its own Azurite while another holds 10000-10002', async () => {
    // Another project's Azurite on the standard ports; when they are taken already, something
    // other than this start holds them all the same.
    let other: Azurite | undefined;
    try {
      other = await startAzurite({ ports: { blob: 10000, queue: 10001, table: 10002 } });
    } catch {
      other = undefined;
    }
    const cwd = tempDir('start-sample');
    withSample(cwd);
    const started = await startNpmStart(cwd);
    const embedded = embeddedBlobEndpoint(started.output());
    // Ports held by someone else at the test's start may be free again by the time this start
    // looks (another test's start stopped): only a held port is known to be taken.
    if (other !== undefined) expect(embedded).not.toContain(':10000/');
    expect(await (await fetch(`${started.url}/api/health`)).json()).toMatchObject({ backend: 'blob' });

    const key = readFileSync(path.join(cwd, '.cairn', 'dev-api-key'), 'utf8').trim();
    const put = await fetch(`${started.url}/api/kv/notes/first`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${key}` },
      body: 'hello',
    });
    expect(put.status).toBeLessThan(300);
    // The value went into this start's Azurite, not the other one.
    expect((await containers(embedded)).filter((name) => name.startsWith('cairn-')).length).toBeGreaterThan(
      0,
    );
    if (other !== undefined) {
      expect((await containers(other.blobEndpoint)).filter((name) => name.startsWith('cairn-'))).toEqual([]);
    }
  });

  it.each(['CAIRN_BLOB_ENDPOINT', 'CAIRN_TABLE_ENDPOINT', 'CAIRN_QUEUE_ENDPOINT'] as const)(
    'refuses %s naming another Azurite, in one line naming it',
    async (setting) => {
      const other = await startAzurite();
      const endpoint = {
        CAIRN_BLOB_ENDPOINT: other.blobEndpoint,
        CAIRN_TABLE_ENDPOINT: other.tableEndpoint,
        CAIRN_QUEUE_ENDPOINT: other.queueEndpoint,
      }[setting];
      const cwd = tempDir('start-foreign');
      withSample(cwd, { [setting]: endpoint });
      const refused = await refusedNpmStart(cwd);
      expect(refused.code).toBe(1);
      const lines = refused.output.trim().split('\n');
      expect(lines.at(-1)).toMatch(new RegExp(`^Cairn cannot start: ${setting} names ${endpoint}`));
      expect(lines.filter((line) => line.startsWith('Cairn cannot start'))).toHaveLength(1);
      expect(await containers(other.blobEndpoint)).toEqual([]);
    },
  );
});

function heldPort(): Promise<net.Server> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}

describe(
  'npm start refuses bad start-up input in one line, before anything starts',
  { timeout: SLOW },
  () => {
    it.each([
      ['PORT=abc', { PORT: 'abc' }, /^Cairn cannot start: PORT must be a port number .*"abc"/],
      ['PORT=70000', { PORT: '70000' }, /^Cairn cannot start: PORT must be a port number .*"70000"/],
      ['a bad setting', { CAIRN_LOG_LEVEL: 'loud' }, /^Cairn cannot start: CAIRN_LOG_LEVEL: /],
      [
        'a half-configured blob backend',
        { CAIRN_BLOB_ENDPOINT: 'https://acct.blob.core.windows.net' },
        /^Cairn cannot start: CAIRN_BLOB_CONTAINER/,
      ],
    ])('%s', async (_name, env, expected) => {
      const cwd = tempDir('start-refused');
      const refused = await refusedNpmStart(cwd, env);
      expect(refused.code).toBe(1);
      expect(refused.output.trim().split('\n')).toHaveLength(1);
      expect(refused.output.trim()).toMatch(expected);
    });

    it('a PORT in use', async () => {
      const server = await heldPort();
      try {
        const port = (server.address() as net.AddressInfo).port;
        const refused = await refusedNpmStart(tempDir('start-inuse'), { PORT: String(port) });
        expect(refused.code).toBe(1);
        expect(refused.output.trim().split('\n')).toEqual([
          expect.stringMatching(new RegExp(`^Cairn cannot start: PORT ${port} is in use`)),
        ]);
      } finally {
        server.close();
      }
    });

    it('a local.settings.json that is not JSON', async () => {
      const cwd = tempDir('start-badjson');
      writeFileSync(path.join(cwd, 'local.settings.json'), '{ "Values": ');
      const refused = await refusedNpmStart(cwd);
      expect(refused.code).toBe(1);
      expect(refused.output.trim()).toMatch(/^Cairn cannot start: local\.settings\.json is not valid JSON/);
      expect(refused.output.trim().split('\n')).toHaveLength(1);
    });

    it('the start script itself checks before it builds', async () => {
      const refused = await refusedNpmStart(tempDir('launch-refused'), { PORT: 'abc' }, LAUNCH);
      expect(refused.code).toBe(1);
      expect(refused.output.trim().split('\n')).toEqual([
        expect.stringMatching(/^Cairn cannot start: PORT must be a port number/),
      ]);
    });
  },
);
