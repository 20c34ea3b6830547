import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import { describe, expect, it } from 'vitest';

import { apiKeysSetting, newTenant, stopProcess } from '../support/app';
import { onCleanUp, tempDir } from '../support/cleanup';
import { scaled } from '../support/timeouts';

/** True while `pid` runs (an exited child not yet reaped, a zombie, counts as gone). */
function running(pid: number): boolean {
  try {
    const state = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0];
    return state !== undefined && state !== 'Z';
  } catch {
    return false;
  }
}

/**
 * A parent process that starts Azurite and an app as the tests and benches do (the compiled
 * dev/azurite.js and test/support/app.js), prints their process ids, and waits.
 */
const PARENT = `
const { startAzurite } = require(${JSON.stringify(path.resolve('dist/dev/azurite.js'))});
const { startApp } = require(${JSON.stringify(path.resolve('dist/test/support/app.js'))});
(async () => {
  const azurite = await startAzurite();
  const folder = process.argv[1];
  const app = await startApp(
    { CAIRN_API_KEYS: process.argv[2], CAIRN_DATA_DIR: folder + '/data' },
    undefined,
    { cwd: folder, keepOutput: false },
  );
  process.stdout.write(JSON.stringify({ azurite: azurite.pid, app: app.child.pid }) + '\\n');
  setInterval(() => {}, 1000);
})();
`;

describe('processes the tests start stop when what started them is gone', () => {
  it(
    'Azurite and an app exit when their parent is killed with SIGKILL (no clean-up runs)',
    async () => {
      const parent = spawn(
        process.execPath,
        ['-e', PARENT, tempDir('orphans'), apiKeysSetting([newTenant('orphans')])],
        {
          stdio: ['ignore', 'pipe', 'pipe'],
          env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '' },
        },
      );
      let output = '';
      parent.stderr.on('data', (data: Buffer) => (output += data.toString()));
      const pids = await new Promise<{ azurite: number; app: number }>((resolve, reject) => {
        let line = '';
        parent.stdout.on('data', (data: Buffer) => {
          line += data.toString();
          if (line.includes('\n')) resolve(JSON.parse(line) as { azurite: number; app: number });
        });
        parent.once('exit', (code) => reject(new Error(`the parent exited (${code}):\n${output}`)));
      });
      // Whatever the outcome (a timeout too), nothing is left running after this file.
      const forget = onCleanUp(async () => {
        for (const pid of [pids.azurite, pids.app]) if (running(pid)) process.kill(pid, 'SIGKILL');
      });
      try {
        expect(running(pids.azurite) && running(pids.app)).toBe(true);
        await stopProcess(parent, 'SIGKILL');
        const deadline = Date.now() + scaled(20_000);
        while ((running(pids.azurite) || running(pids.app)) && Date.now() < deadline) await sleep(100);
        expect({ azurite: running(pids.azurite), app: running(pids.app) }).toEqual({
          azurite: false,
          app: false,
        });
      } finally {
        for (const pid of [pids.azurite, pids.app]) {
          if (running(pid)) process.kill(pid, 'SIGKILL');
        }
        forget();
        await stopProcess(parent, 'SIGKILL');
      }
    },
    scaled(120_000),
  );
});
