import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

import { afterEach, describe, expect, it } from 'vitest';

import { ArchiveClient } from '../../shared/client/archiveClient';
import { stopProcess } from '../support/app';

/**
 * `npm start` hands the app its embedded Azurite's table service for the session index: session
 * archives work on embedded defaults (local bytes) and with only CAIRN_BLOB_CONTAINER set (bytes in
 * that Azurite's blob service), with nothing configured by hand.
 */
const START = path.resolve('dist/shared/runtime/start.js');
const children: ChildProcess[] = [];
afterEach(async () => {
  await Promise.all(children.splice(0).map((child) => stopProcess(child, 'SIGINT')));
});

function start(cwd: string, env: Record<string, string>): Promise<string> {
  const child = spawn(process.execPath, [START], {
    cwd,
    env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '', PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let output = '';
  child.stderr?.on('data', (data: Buffer) => (output += data.toString()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`npm start did not answer in 30 s:\n${output}`)), 30_000);
    child.stdout?.on('data', (data: Buffer) => {
      output += data.toString();
      const match = /Cairn is listening on (http:\/\/127\.0\.0\.1:\d+)\/api/.exec(output);
      if (match?.[1] !== undefined) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`npm start exited (${code}):\n${output}`));
    });
  });
}

describe.each([
  ['embedded defaults', {}],
  ['only CAIRN_BLOB_CONTAINER set', { CAIRN_BLOB_CONTAINER: 'cairn' }],
] as const)('session archives under npm start with %s', (_name, env) => {
  it('publishes, lists and restores a checkpoint', async () => {
    const cwd = mkdtempSync(path.join(os.tmpdir(), 'cairn-start-sessions-'));
    const url = await start(cwd, env);
    const key = readFileSync(path.join(cwd, '.cairn', 'dev-api-key'), 'utf8').trim();
    const session = path.join(cwd, 'session');
    await mkdir(path.join(session, 'native'), { recursive: true });
    await writeFile(path.join(session, 'events.jsonl'), '{"turn":1}\n');
    await writeFile(path.join(session, 'native', 'state.json'), '{}');
    const archive = new ArchiveClient({ baseUrl: url, token: key });
    const published = await archive.publishCheckpoint(session, 's1');
    const list = await fetch(`${url}/api/sessions`, { headers: { authorization: `Bearer ${key}` } });
    expect(list.status).toBe(200);
    expect(await list.json()).toMatchObject({
      sessions: [{ id: 's1', checkpointId: published.checkpointId }],
    });
    const restored = path.join(cwd, 'restored');
    await archive.restoreCheckpoint('s1', restored);
    expect(readFileSync(path.join(restored, 'events.jsonl'), 'utf8')).toBe('{"turn":1}\n');
  });
});
