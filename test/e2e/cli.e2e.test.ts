import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';

import { runCairn as runCairnHere } from '@cairn-state/cli';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { Azurite } from '../../dev/azurite';
import {
  apiKeysSetting,
  backendSettings,
  client,
  newTenant,
  type RunningApp,
  startApp,
} from '../support/app';
import { azurite } from '../support/azurite';
import { tempDir } from '../support/cleanup';
import { startAzurite } from '../support/cleanup';
import { runCairn } from '../support/cli';
import { sessionIndexSettings } from '../support/tables';

/** The `cairn` command against a running app: migrate's exit codes, persona push and pull. */

function folder(files: Record<string, string>): string {
  const root = tempDir('cli');
  for (const [relative, content] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(root, relative)), { recursive: true });
    writeFileSync(path.join(root, relative), content);
  }
  return root;
}

/** A stream that keeps what is written to it, a terminal or not. */
function captured(isTTY: boolean): Writable & { isTTY: boolean; text: () => string } {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      text += chunk.toString();
      done();
    },
  });
  return Object.assign(stream, { isTTY, text: () => text });
}

describe('cairn command', () => {
  const ops = newTenant('ops', true);
  const agent = newTenant('agent');
  let storage: Azurite;
  let app: RunningApp;
  let opsEnv: Record<string, string>;

  beforeAll(async () => {
    storage = await startAzurite();
    app = await startApp({
      CAIRN_API_KEYS: apiKeysSetting([ops, agent]),
      // Migrations copy from the test's temporary folders only.
      CAIRN_MIGRATION_SOURCE_ROOTS: os.tmpdir(),
      CAIRN_STORAGE_TIMEOUT_MS: '2000',
      ...backendSettings('blob', storage.blobEndpoint),
    });
    opsEnv = { CAIRN_URL: app.url, CAIRN_KEY: ops.key };
  });
  afterAll(async () => {
    await app?.stop();
    await storage?.stop();
  });

  it('one exit-code rule: help is 0, an unknown command or a missing argument or setting is 2', async () => {
    const help = await runCairn(['help'], {});
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/exit codes:\n {2}0 {2}success\n {2}1 {2}failure/);
    for (const command of ['checkpoint', 'keygen', 'migrate', 'persona', 'snapshot'])
      expect(help.stdout).toContain(`cairn ${command} `);

    expect((await runCairn([], opsEnv)).code).toBe(2);
    expect((await runCairn(['nonsense'], opsEnv)).code).toBe(2);
    const badOption = await runCairn(['persona', 'push', '--dir', '/tmp', '--no-such-option'], opsEnv);
    expect(badOption.code).toBe(2);
    expect(badOption.stderr).toContain('cairn persona push|pull');
    expect((await runCairn(['persona', 'sideways', '--dir', '/tmp'], opsEnv)).code).toBe(2);
    const noKey = await runCairn(['persona', 'pull', '--dir', '/tmp'], { CAIRN_URL: app.url });
    expect(noKey.code).toBe(2);
    expect(noKey.stderr).toContain('CAIRN_KEY');
    const noUrl = await runCairn(['migrate', '--tenant', agent.tenant, '--from', '/tmp'], {
      CAIRN_KEY: ops.key,
    });
    expect(noUrl.code).toBe(2);
    expect(noUrl.stderr).toContain('CAIRN_URL');
  });

  it('migrate: exit 0 with the report when every file is accounted for, 1 when the report has errors', async () => {
    const source = folder({ 'a.txt': 'A', 'sub/b.txt': 'B' });
    const ok = await runCairn(['migrate', '--tenant', agent.tenant, '--from', `${source}:mem`], opsEnv);
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.stdout)).toMatchObject({
      copied: 2,
      skipped: 0,
      keysCopied: ['mem/a.txt', 'mem/sub/b.txt'],
    });
    expect(ok.stderr).toMatch(/progress 2\/2/);
    expect(await (await client(app.url, agent.key)('/api/kv/mem/sub/b.txt')).text()).toBe('B');

    execFileSync('mkfifo', [path.join(source, 'pipe')]);
    const withError = await runCairn(
      ['migrate', '--tenant', agent.tenant, '--from', `${source}:mem`],
      opsEnv,
    );
    expect(withError.code).toBe(1);
    expect(JSON.parse(withError.stdout)).toMatchObject({
      copied: 0,
      skipped: 2,
      errors: [['mem/pipe', 'not a regular file']],
    });
  });

  it('migrate: exit 2 on bad usage; exit 1 on a refused start or a migration that failed', async () => {
    expect((await runCairn(['migrate', '--tenant', agent.tenant], opsEnv)).code).toBe(2);
    const refused = await runCairn(['migrate', '--tenant', agent.tenant, '--from', '/tmp'], {
      CAIRN_URL: app.url,
      CAIRN_KEY: agent.key,
    });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('403');

    // A folder that is not on the service's host: the service refuses the start naming it (the
    // command cannot check a folder of another machine: exit 1), and prints no report.
    const missing = path.join(folder({ 'x.txt': 'x' }), 'no-such-folder');
    const gone = await runCairn(['migrate', '--tenant', agent.tenant, '--from', `${missing}:gone`], opsEnv);
    expect(gone.code).toBe(1);
    expect(gone.stdout).toBe('');
    const [first, ...more] = gone.stderr.trim().split('\n');
    expect(more).toEqual([]);
    expect(first).toContain(missing);
    expect(first).toContain('does not exist');

    await storage.stop();
    try {
      const source = folder({ 'x.txt': 'x' });
      const failed = await runCairn(['migrate', '--tenant', agent.tenant, '--from', source], opsEnv);
      expect(failed.code).toBe(1);
      expect(failed.stderr).toMatch(/failed/);
    } finally {
      storage = await startAzurite({ ports: storage.ports });
    }
  });

  it('persona push skips what exists and reports symlinks; pull overwrites local files', async () => {
    const env = { CAIRN_URL: app.url, CAIRN_KEY: agent.key };
    const local = folder({ 'MEMORY.md': '# memory', 'notes/one.md': 'one' });
    symlinkSync('/etc/hostname', path.join(local, 'link.md'));
    const pushed = await runCairn(['persona', 'push', '--dir', local], env);
    expect(pushed.code).toBe(1);
    const report = JSON.parse(pushed.stdout) as {
      copied: number;
      errors: [string, string][];
      keys: string[];
    };
    expect(report.keys).toEqual(['claude_memory/MEMORY.md', 'claude_memory/notes/one.md']);
    expect(report.errors).toEqual([['claude_memory/link.md', 'symlinks are not allowed']]);
    const again = JSON.parse((await runCairn(['persona', 'push', '--dir', local], env)).stdout) as {
      copied: number;
      skipped: number;
    };
    expect(again).toMatchObject({ copied: 0, skipped: 2 });

    const elsewhere = folder({ 'MEMORY.md': 'stale local copy' });
    const pulled = await runCairn(['persona', 'pull', '--dir', elsewhere], env);
    expect(pulled.code).toBe(0);
    expect(JSON.parse(pulled.stdout)).toMatchObject({ pulled: 2 });
    expect(readFileSync(path.join(elsewhere, 'MEMORY.md'), 'utf8')).toBe('# memory');
    expect(readFileSync(path.join(elsewhere, 'notes/one.md'), 'utf8')).toBe('one');
  });
  it('persona pull never writes through a symbolic link inside the folder, and names it', async () => {
    const env = { CAIRN_URL: app.url, CAIRN_KEY: agent.key };
    const prefix = ['--prefix', 'linked_memory'];
    const source = folder({ 'MEMORY.md': '# pulled', 'notes/one.md': 'one', 'plain.md': 'plain' });
    expect((await runCairn(['persona', 'push', '--dir', source, ...prefix], env)).code).toBe(0);

    const outside = folder({ 'victim.md': 'must stay', 'dir/keep.md': 'kept' });
    const target = folder({});
    symlinkSync(path.join(outside, 'victim.md'), path.join(target, 'MEMORY.md'));
    symlinkSync(path.join(outside, 'dir'), path.join(target, 'notes'));
    const pulled = await runCairn(['persona', 'pull', '--dir', target, ...prefix], env);
    expect(pulled.code).toBe(1);
    const report = JSON.parse(pulled.stdout) as {
      pulled: number;
      errors: [string, string][];
      keys: string[];
    };
    expect(report.keys).toEqual(['linked_memory/plain.md']);
    expect(report.errors).toEqual([
      [
        'linked_memory/MEMORY.md',
        expect.stringMatching(/^MEMORY\.md is a symbolic link inside the persona folder/),
      ],
      [
        'linked_memory/notes/one.md',
        expect.stringMatching(/^notes is a symbolic link inside the persona folder/),
      ],
    ]);
    expect(readFileSync(path.join(outside, 'victim.md'), 'utf8')).toBe('must stay');
    expect(readdirSync(path.join(outside, 'dir'))).toEqual(['keep.md']);
    expect(readFileSync(path.join(target, 'plain.md'), 'utf8')).toBe('plain');
  });

  it('migrate --dry-run names its counts as what it would copy, and copies nothing', async () => {
    const target = newTenant('dry');
    const source = folder({ 'a.txt': 'A', 'sub/b.txt': 'BB' });
    const dry = await runCairn(
      ['migrate', '--tenant', target.tenant, '--from', `${source}:mem`, '--dry-run'],
      opsEnv,
    );
    expect(dry.code, dry.stderr).toBe(0);
    const report = JSON.parse(dry.stdout) as Record<string, unknown>;
    expect(report).toEqual({
      wouldCopy: 2,
      skipped: 0,
      bytesWouldCopy: 3,
      keysWouldCopy: ['mem/a.txt', 'mem/sub/b.txt'],
      errors: [],
    });
    const real = await runCairn(['migrate', '--tenant', target.tenant, '--from', `${source}:mem`], opsEnv);
    expect(JSON.parse(real.stdout)).toMatchObject({ copied: 2, bytesCopied: 3 });
  });
});

/**
 * verify of a named tenant and checkpoint progress, on the run's shared Azurite (the suite above
 * restarts its own, which a tenant directory remembered by the app would not survive).
 */
describe('cairn command on a steady service', () => {
  const ops = newTenant('ops', true);
  const agent = newTenant('agent');
  let app: RunningApp;
  let opsEnv: Record<string, string>;

  beforeAll(async () => {
    app = await startApp({
      CAIRN_API_KEYS: apiKeysSetting([ops, agent]),
      ...backendSettings('blob', azurite().blobEndpoint),
      ...sessionIndexSettings(azurite().tableEndpoint),
    });
    opsEnv = { CAIRN_URL: app.url, CAIRN_KEY: ops.key };
  });
  afterAll(async () => {
    await app?.stop();
  });

  it('verify --tenant of a tenant with no data says so and exits 1; a tenant with data is verified', async () => {
    const nobody = newTenant('nobody');
    const unknown = await runCairn(['verify', '--tenant', nobody.tenant], opsEnv);
    expect(unknown.code).toBe(1);
    expect(unknown.stdout).toContain(`no such tenant has data: ${nobody.tenant}`);
    expect(unknown.stdout).not.toMatch(/: ok/);
    const asJson = await runCairn(['verify', '--tenant', nobody.tenant, '--json'], opsEnv);
    expect(asJson.code).toBe(1);
    expect(JSON.parse(asJson.stdout)).toMatchObject({ ok: false, unknownTenant: nobody.tenant });

    const put = await client(app.url, agent.key)('/api/kv/verify-me', { method: 'PUT', body: 'x' });
    expect(put.status).toBeLessThan(300);
    const known = await runCairn(['verify', '--tenant', agent.tenant], opsEnv);
    expect(known.code, known.stdout).toBe(0);
    expect(known.stdout).toContain(`${agent.tenant}: ok`);
  });

  it('checkpoint publish and restore show progress on a terminal, none when piped', async () => {
    const env = { CAIRN_URL: app.url, CAIRN_KEY: agent.key };
    const session = folder({
      'events.jsonl': '{"event":1}\n',
      'native/big.bin': 'x'.repeat(300 * 1024),
      'native/small.txt': 'small',
    });
    const sessionId = `progress-${agent.tenant}`;

    const stderr = captured(true);
    const stdout = captured(false);
    const published = await runCairnHere(['checkpoint', 'publish', session, '--session', sessionId], env, {
      stdout,
      stderr,
    });
    expect(published, stderr.text()).toBe(0);
    expect(stderr.text()).toMatch(/publishing: 3 files, [1-9][0-9]* objects uploaded/);
    expect(JSON.parse(stdout.text())).toMatchObject({ files: 3 });

    const restoreErr = captured(true);
    const into = path.join(tempDir('cli-restore'), 'here');
    const restored = await runCairnHere(['checkpoint', 'restore', '--session', sessionId, into], env, {
      stdout: captured(false),
      stderr: restoreErr,
    });
    expect(restored, restoreErr.text()).toBe(0);
    expect(restoreErr.text()).toMatch(/restoring: file 1\/3/);
    expect(readFileSync(path.join(into, 'native/small.txt'), 'utf8')).toBe('small');

    const piped = await runCairn(
      ['checkpoint', 'restore', '--session', sessionId, path.join(tempDir('cli-restore'), 'here')],
      env,
    );
    expect(piped.code, piped.stderr).toBe(0);
    expect(piped.stderr).toBe('');
    const pipedPublish = await runCairn(['checkpoint', 'publish', session, '--session', sessionId], env);
    expect(pipedPublish.code, pipedPublish.stderr).toBe(0);
    expect(pipedPublish.stderr).toBe('');
  });
});
