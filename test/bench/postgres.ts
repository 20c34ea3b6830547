import { execFile } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

import { onCleanUp } from '../support/cleanup';

const run = promisify(execFile);

/** Where this machine's PostgreSQL server binaries are, the first folder that has `initdb` and `pg_ctl`. */
const BIN_FOLDERS = [
  '/usr/local/bin',
  '/usr/lib/postgresql/17/bin',
  '/usr/lib/postgresql/16/bin',
  '/usr/lib/postgresql/15/bin',
];

export interface Postgres {
  /** A connection string for `pg` (trust authentication on loopback, user `postgres`). */
  readonly connectionString: string;
  readonly port: number;
  stop(): Promise<void>;
}

function binFolder(): string {
  const folder = BIN_FOLDERS.find(
    (candidate) => existsSync(path.join(candidate, 'initdb')) && existsSync(path.join(candidate, 'pg_ctl')),
  );
  if (folder === undefined) {
    throw new Error(`PostgreSQL is not installed: no initdb and pg_ctl in ${BIN_FOLDERS.join(', ')}`);
  }
  return folder;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address !== null
          ? resolve(address.port)
          : reject(new Error('no port')),
      );
    });
  });
}

/**
 * Starts a PostgreSQL server of its own: `initdb` into a new temp folder, `pg_ctl start` on a free
 * loopback port (no unix socket), trust authentication. PostgreSQL refuses to run as root, so as root
 * the binaries run as the `postgres` user (`runuser`), which then owns the folder. `stop` stops the
 * server (`pg_ctl stop -m fast`) and removes the folder; it also runs at the bench's clean-up. Any
 * failure to start throws with the server's log: a bench that needs it fails, it does not skip.
 */
export async function startPostgres(): Promise<Postgres> {
  const bin = binFolder();
  const asRoot = process.getuid?.() === 0;
  const folder = mkdtempSync(path.join(os.tmpdir(), 'cairn-bench-postgres-'));
  const data = path.join(folder, 'data');
  const log = path.join(folder, 'server.log');
  const exec = (tool: string, args: readonly string[]) =>
    asRoot
      ? run('runuser', ['-u', 'postgres', '--', path.join(bin, tool), ...args], { cwd: folder })
      : run(path.join(bin, tool), [...args], { cwd: folder });
  let started = false;
  const stop = async () => {
    try {
      if (started) await exec('pg_ctl', ['stop', '-D', data, '-m', 'fast', '-w']);
    } finally {
      started = false;
      rmSync(folder, { recursive: true, force: true });
    }
  };
  const forget = onCleanUp(stop);
  try {
    if (asRoot) {
      const { stdout } = await run('id', ['-u', 'postgres']);
      const { stdout: group } = await run('id', ['-g', 'postgres']);
      chownSync(folder, Number(stdout.trim()), Number(group.trim()));
    }
    await exec('initdb', ['-D', data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-locale']);
    const port = await freePort();
    const options = `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories= -c fsync=on`;
    started = true;
    await exec('pg_ctl', ['start', '-D', data, '-l', log, '-w', '-t', '60', '-o', options]);
    return {
      connectionString: `postgresql://postgres@127.0.0.1:${port}/postgres`,
      port,
      stop: async () => {
        forget();
        await stop();
      },
    };
  } catch (error) {
    let serverLog = '';
    try {
      const { stdout } = await run('cat', [log]);
      serverLog = stdout;
    } catch {
      // No log yet: initdb failed.
    }
    forget();
    await stop().catch(() => undefined);
    throw new Error(`PostgreSQL did not start (${bin}):\n${serverLog}`, { cause: error });
  }
}
