import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

import { afterEach, describe, expect, it } from 'vitest';

import { tempDir } from '../support/cleanup';
import { refusedNpmStart, startNpmStart, stopNpmStarts } from '../support/npmStart';

/**
 * One folder, one `npm start`: a second start in the same folder refuses before it starts
 * anything, naming the first's pid and port; a start killed with SIGKILL leaves a stale lock that
 * the next start takes over.
 */
afterEach(stopNpmStarts);

/** Two starts of the whole service on a loaded two-core machine. */
const SLOW = 240_000;

const LOCK = path.join('.cairn', 'npm-start.lock');

/** The pids of the Azurite processes whose data folder is `cwd`'s `.cairn/azurite`. */
function azuritesOf(cwd: string): number[] {
  const location = path.join(cwd, '.cairn', 'azurite');
  return execFileSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' })
    .split('\n')
    .filter((line) => line.includes('azurite') && line.includes(location))
    .map((line) => Number(line.trim().split(/\s+/)[0]));
}

describe('npm start, twice in one folder', { timeout: SLOW }, () => {
  it('refuses the second at once, naming the first, which still serves', async () => {
    const cwd = tempDir('start-twice');
    const first = await startNpmStart(cwd);
    const firstPort = Number(new URL(first.url).port);
    expect(JSON.parse(readFileSync(path.join(cwd, LOCK), 'utf8'))).toEqual({
      pid: first.child.pid,
      port: firstPort,
    });

    const second = await refusedNpmStart(cwd, { PORT: '0' });
    expect(second.code).toBe(1);
    const lines = second.output.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`pid ${first.child.pid}`);
    expect(lines[0]).toContain(`port ${firstPort}`);
    expect(second.output).not.toContain('Azurite');
    expect(azuritesOf(cwd)).toHaveLength(1);

    const health = await fetch(`${first.url}/api/health`);
    expect(health.status).toBe(200);
    // The lock is the first's still, and goes with it.
    expect(JSON.parse(readFileSync(path.join(cwd, LOCK), 'utf8'))).toMatchObject({ pid: first.child.pid });
    await stopNpmStarts();
    expect(first.child.exitCode).toBe(0);
    expect(() => readFileSync(path.join(cwd, LOCK))).toThrow(/ENOENT/);
  });

  it('takes over the lock of a start killed with SIGKILL', async () => {
    const cwd = tempDir('start-killed');
    const first = await startNpmStart(cwd);
    const orphans = azuritesOf(cwd);
    first.child.kill('SIGKILL');
    await new Promise((resolve) => first.child.once('exit', resolve));
    // A SIGKILL leaves the lock and the Azurite behind; stop that Azurite (the test's own).
    expect(JSON.parse(readFileSync(path.join(cwd, LOCK), 'utf8'))).toMatchObject({ pid: first.child.pid });
    for (const pid of orphans) process.kill(pid, 'SIGKILL');

    const second = await startNpmStart(cwd);
    expect((await fetch(`${second.url}/api/health`)).status).toBe(200);
    expect(JSON.parse(readFileSync(path.join(cwd, LOCK), 'utf8'))).toEqual({
      pid: second.child.pid,
      port: Number(new URL(second.url).port),
    });
  });

  it('takes over a lock left half-written', async () => {
    const cwd = tempDir('start-halflock');
    mkdirSync(path.join(cwd, '.cairn'));
    writeFileSync(path.join(cwd, LOCK), '{"pid":');
    const started = await startNpmStart(cwd);
    expect((await fetch(`${started.url}/api/health`)).status).toBe(200);
  });
});
