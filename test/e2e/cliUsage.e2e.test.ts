import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';

import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';

import { tempDir } from '../support/cleanup';
import { runCairn } from '../support/cli';

/**
 * The `cairn` command's usage path, with no Cairn service: CAIRN_URL names a local server that only
 * records what reaches it, so that every test can assert that nothing was sent. Help is exit 0 for
 * every command; every bad argument value and every unusable local file is exit 2, naming the
 * option, before any request.
 */

describe('cairn usage', () => {
  let server: Server;
  const requests: string[] = [];
  let env: Record<string, string>;
  let work: string;

  beforeAll(async () => {
    server = createServer((request, response) => {
      requests.push(`${request.method ?? ''} ${request.url ?? ''}`);
      response.writeHead(500, { 'content-type': 'application/json' });
      response.end('{"error":{"code":"internal","message":"the recording server answers nothing"}}');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    env = {
      CAIRN_URL: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      CAIRN_KEY: 'k_usage_test',
    };
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  beforeEach(() => {
    requests.length = 0;
    work = tempDir('cli-usage');
  });

  /** A folder under the test's own temp folder, made with `files`. */
  function folder(name: string, files: Record<string, string> = {}): string {
    const root = path.join(work, name);
    mkdirSync(root, { recursive: true });
    for (const [relative, content] of Object.entries(files)) {
      mkdirSync(path.dirname(path.join(root, relative)), { recursive: true });
      writeFileSync(path.join(root, relative), content);
    }
    return root;
  }

  /** A snapshot key pair made by `cairn keygen` (which calls nothing). */
  async function keyPair(): Promise<{ key: string; pub: string }> {
    const made = await runCairn(['keygen', path.join(work, 'signer')], {});
    expect(made.code).toBe(0);
    return { key: path.join(work, 'signer.key'), pub: path.join(work, 'signer.pub') };
  }

  const HELP: readonly (readonly string[])[] = [
    ['audit', '--help'],
    ['audit', 'verify', '-h'],
    ['audit', 'keygen', '--help'],
    ['checkpoint', 'publish', '-h'],
    ['checkpoint', 'restore', '--help'],
    ['keygen', '--help'],
    ['keygen', '-h'],
    ['migrate', '-h'],
    ['persona', 'push', '--help'],
    ['persona', 'pull', '-h'],
    ['rewrap', '--help'],
    ['snapshot', 'save', '-h'],
    ['snapshot', 'load', '--help'],
    ['snapshot', 'verify', '-h'],
    ['snapshot', 'list', '--help'],
    ['snapshot', 'delete', '-h'],
    ['verify', '--help'],
    ['verify', '-h'],
  ];

  it.each(HELP.map((args) => [args.join(' '), args] as const))(
    'cairn %s prints the command usage on stdout and exits 0',
    async (_name, args) => {
      const run = await runCairn([...args], env, work);
      expect(run.code).toBe(0);
      expect(run.stdout).toContain(`cairn ${args[0]} `.trimEnd());
      expect(run.stdout).toMatch(/^usage:\n/);
      expect(run.stderr).toBe('');
      expect(requests).toEqual([]);
      // keygen's help writes no key named after the flag.
      expect(existsSync(path.join(work, '--help.key'))).toBe(false);
      expect(existsSync(path.join(work, '-h.key'))).toBe(false);
    },
  );

  it('a value after -- is not a request for help', async () => {
    const run = await runCairn(['keygen', '--', '-h'], {}, work);
    expect(run.code).toBe(2);
  });

  it('every bad argument value exits 2 naming the option, and sends nothing', async () => {
    const session = folder('session', { 'events.jsonl': '{}\n' });
    const cases: { args: string[]; names: string }[] = [
      { args: ['checkpoint', 'publish', session, '--session', 'bad id'], names: '--session' },
      { args: ['checkpoint', 'restore', '--session', 'bad id', path.join(work, 'r')], names: '--session' },
      {
        args: ['checkpoint', 'publish', session, '--session', 's1', '--checkpoint', 'bad/id'],
        names: '--checkpoint',
      },
      {
        args: ['checkpoint', 'publish', session, '--session', 's1', '--concurrency', '0'],
        names: '--concurrency',
      },
      {
        args: ['snapshot', 'save', session, '--workspace', 'bad name!', '--key', 'signer.key'],
        names: '--workspace',
      },
      { args: ['snapshot', 'list', '--workspace', 'bad name!'], names: '--workspace' },
      { args: ['snapshot', 'delete', 'abc123', '--workspace', 'w1'], names: '<snapshot id>' },
      {
        args: ['snapshot', 'load', 'abc123', path.join(work, 'l'), '--public-key', 'signer.pub'],
        names: '<snapshot id>',
      },
      { args: ['snapshot', 'verify', 'abc123', '--public-key', 'signer.pub'], names: '<snapshot id>' },
      { args: ['migrate', '--tenant', 'bad tenant', '--from', session], names: '--tenant' },
      { args: ['migrate', '--tenant', 't1', '--from', `${session}:bad\u0001prefix`], names: '--from' },
      { args: ['verify', '--tenant', 'bad tenant'], names: '--tenant' },
      { args: ['persona', 'pull', '--dir', session, '--prefix', 'bad\u0001prefix'], names: '--prefix' },
    ];
    for (const { args, names } of cases) {
      const run = await runCairn(args, env, work);
      expect({ args, code: run.code }).toEqual({ args, code: 2 });
      expect(run.stderr).toContain(names);
      expect(run.stderr).toContain('(cairn help: settings and exit codes)');
    }
    expect(requests).toEqual([]);
  });

  it('an unusable local file or folder is exit 2 naming it, for every command, and sends nothing', async () => {
    const { key, pub } = await keyPair();
    const session = folder('session', { 'events.jsonl': '{}\n' });
    const full = folder('full', { 'x.txt': 'x' });
    const missing = path.join(work, 'missing');
    const id = 'a'.repeat(64);
    const cases: { args: string[]; names: string }[] = [
      // A key file to read that does not exist.
      { args: ['snapshot', 'save', session, '--workspace', 'w1', '--key', missing], names: missing },
      { args: ['snapshot', 'load', id, path.join(work, 'l'), '--public-key', missing], names: missing },
      { args: ['snapshot', 'verify', id, '--public-key', missing], names: missing },
      { args: ['audit', 'verify', '--public-key', missing], names: missing },
      // A file that is not a key.
      { args: ['snapshot', 'verify', id, '--public-key', path.join(full, 'x.txt')], names: 'x.txt' },
      { args: ['snapshot', 'save', session, '--workspace', 'w1', '--key', pub], names: pub },
      // A folder to read that does not exist.
      { args: ['snapshot', 'save', missing, '--workspace', 'w1', '--key', key], names: missing },
      { args: ['checkpoint', 'publish', missing, '--session', 's1'], names: missing },
      { args: ['persona', 'push', '--dir', missing], names: missing },
      // A folder to fill that is not empty.
      { args: ['snapshot', 'load', id, full, '--public-key', pub], names: full },
      { args: ['checkpoint', 'restore', '--session', 's1', full], names: full },
      // A file to create that exists.
      { args: ['keygen', path.join(work, 'signer')], names: key },
      { args: ['audit', 'keygen', '--public-key', pub], names: pub },
    ];
    const before = readFileSync(key, 'utf8');
    for (const { args, names } of cases) {
      const run = await runCairn(args, env, work);
      expect({ args, code: run.code }).toEqual({ args, code: 2 });
      expect(run.stderr).toContain(names);
    }
    expect(readFileSync(key, 'utf8')).toBe(before);
    expect(requests).toEqual([]);
  });
});
