import { execFileSync } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';

import { afterEach, describe, expect, it } from 'vitest';

import { stopProcess } from '../support/app';
import { tempDir } from '../support/cleanup';
import { startNpmStart, stopNpmStarts } from '../support/npmStart';

/**
 * `npm start` (dist/dev/start.js) on embedded defaults, in a fresh folder: Azurite from
 * node_modules, a development key printed once, the printed curl example works, Ctrl-C stops all.
 */
afterEach(stopNpmStarts);

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

function azuriteBlobPort(output: string): number {
  return Number(/Azurite: blob http:\/\/127\.0\.0\.1:(\d+)\//.exec(output)?.[1]);
}

// Two full starts (Azurite and the app) in one test: room for a loaded two-core machine.
describe('npm start', { timeout: 180_000 }, () => {
  it('serves on embedded defaults, prints a working example once, and stops everything on Ctrl-C', async () => {
    const cwd = tempDir('start');
    const first = await startNpmStart(cwd);
    const health = await fetch(`${first.url}/api/health`);
    expect(await health.json()).toMatchObject({ status: 'ok', backend: 'local' });

    const keyFile = path.join(cwd, '.cairn', 'dev-api-key');
    const key = readFileSync(keyFile, 'utf8').trim();
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
    expect(first.output().split(key).length - 1).toBe(3); // the notice and the two curl lines
    const curls = first
      .output()
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line.startsWith('curl '));
    expect(curls).toHaveLength(2);
    execFileSync('sh', ['-c', curls[0]!], { cwd, stdio: 'pipe' });
    expect(execFileSync('sh', ['-c', curls[1]!], { cwd }).toString()).toBe('hello');
    expect(readFileSync(path.join(cwd, '.cairn', 'data', 'kv', 'dev', 'notes', 'first'), 'utf8')).toBe(
      'hello',
    );

    // The host key: made, kept (mode 600) and printed once; the admin API needs it.
    const hostKeyFile = path.join(cwd, '.cairn', 'host-key');
    const hostKey = readFileSync(hostKeyFile, 'utf8').trim();
    expect(statSync(hostKeyFile).mode & 0o777).toBe(0o600);
    expect(first.output().split(hostKey).length - 1).toBe(1);
    const admin = (headers: Record<string, string>) =>
      fetch(`${first.url}/admin/functions/retentionPrune`, { method: 'POST', headers, body: '{}' });
    expect((await admin({})).status).toBe(401);
    expect((await admin({ 'x-functions-key': hostKey })).status).toBe(202);

    const blobPort = azuriteBlobPort(first.output());
    expect(await portOpen(blobPort)).toBe(true);
    await stopProcess(first.child, 'SIGINT');
    expect(first.child.exitCode).toBe(0);
    expect(await portOpen(blobPort)).toBe(false);

    // The second start keeps the key and does not print it again; its example still works.
    const second = await startNpmStart(cwd);
    expect(second.output()).not.toContain(key);
    expect(second.output()).not.toContain(hostKey);
    const read = second
      .output()
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line.startsWith('curl '))[1]!;
    expect(execFileSync('sh', ['-c', read], { cwd }).toString()).toBe('hello');
    await stopProcess(second.child, 'SIGINT');
  });

  it('puts values into its Azurite blob service when only CAIRN_BLOB_CONTAINER is set', async () => {
    const cwd = tempDir('start-blob');
    const started = await startNpmStart(cwd, { CAIRN_BLOB_CONTAINER: 'cairn' });
    expect(await (await fetch(`${started.url}/api/health`)).json()).toMatchObject({ backend: 'blob' });
    const curls = started
      .output()
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line.startsWith('curl '));
    execFileSync('sh', ['-c', curls[0]!], { cwd, stdio: 'pipe' });
    expect(execFileSync('sh', ['-c', curls[1]!], { cwd }).toString()).toBe('hello');
    await stopProcess(started.child, 'SIGINT');
  });

  it('refuses to start on a half-configured blob backend, naming the missing setting', async () => {
    const cwd = tempDir('start-bad');
    const failure = (await startNpmStart(cwd, {
      CAIRN_BLOB_ENDPOINT: 'https://acct.blob.core.windows.net',
    }).catch((error: unknown) => error)) as { output: string; code: number };
    expect(failure.code).toBe(1);
    expect(failure.output).toContain('CAIRN_BLOB_CONTAINER');
    // Refused before anything started.
    expect(failure.output).not.toContain('Azurite:');
  });
});
