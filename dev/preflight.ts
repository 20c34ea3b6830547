/**
 * What `npm start` checks before it starts anything (no Azurite, no build): PORT, that no other
 * `npm start` serves from this folder (a lock file in `.cairn/`), that PORT is free, and the
 * settings, with the app's own configuration code. Each refusal is one line naming what to change.
 */
import { closeSync, openSync, readFileSync, renameSync, unlinkSync, writeFileSync, writeSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';

import { loadConfig } from '../shared/config';
import { ConfigurationError } from '../shared/protocol/errors';
import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from './azurite';

/** A start-up failure to print as one line (`Cairn cannot start: <message>`), without a stack. */
export class StartRefusal extends Error {
  override readonly name = 'StartRefusal';
}

/** Prints `error` as one line and exits 1 (a stack only for what is neither a refusal nor a setting). */
export function refuseStart(error: unknown): never {
  const message =
    error instanceof StartRefusal || error instanceof ConfigurationError
      ? error.message
      : error instanceof Error
        ? (error.message.split('\n')[0] ?? error.name)
        : String(error);
  process.stderr.write(`Cairn cannot start: ${message}\n`);
  process.exit(1);
}

/** PORT: a whole number 0-65535 (0: any free port); unset means 7071. */
export function parsePort(value: string | undefined): number {
  if (value === undefined || value.trim() === '') return 7071;
  const text = value.trim();
  const port = /^\d{1,5}$/.test(text) ? Number(text) : Number.NaN;
  if (!(port >= 0 && port <= 65535)) {
    throw new StartRefusal(
      `PORT must be a port number from 1 to 65535 (0 for any free port), not "${value}": set PORT=7071 or leave it unset`,
    );
  }
  return port;
}

/** The lock file of `npm start` in the development state folder. */
export const LOCK_FILE = 'npm-start.lock';

export interface StartLock {
  /** Records the port actually listened on (PORT 0 is known only then). */
  update(port: number): void;
  /** Removes the lock if it is still this process's (also run on exit). */
  release(): void;
}

interface LockContent {
  readonly pid: number;
  readonly port: number;
}

function readLock(file: string): LockContent | undefined {
  try {
    const content = JSON.parse(readFileSync(file, 'utf8')) as Partial<LockContent>;
    return typeof content.pid === 'number' && typeof content.port === 'number'
      ? { pid: content.pid, port: content.port }
      : undefined;
  } catch {
    return undefined; // absent, or half-written by a process killed while writing it
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Takes `<stateDir>/npm-start.lock` for this process, atomically (`wx`: created only when absent),
 * holding its pid and port. A lock whose pid is no longer alive (a start killed with SIGKILL) is
 * taken over; a live one refuses, naming its pid and port. Released on exit (normal exit,
 * `process.exit`, and the signal handlers of `npm start`, which exit).
 */
export function takeStartLock(stateDir: string, port: number): StartLock {
  const file = path.join(stateDir, LOCK_FILE);
  const mine = (): LockContent => ({ pid: process.pid, port });
  for (let attempt = 0; ; attempt++) {
    try {
      const fd = openSync(file, 'wx', 0o600);
      try {
        writeSync(fd, JSON.stringify(mine()) + '\n');
      } finally {
        closeSync(fd);
      }
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const holder = readLock(file);
    if (holder !== undefined && holder.pid !== process.pid && alive(holder.pid)) {
      const where = holder.port === 0 ? 'a port it is still choosing' : `port ${holder.port}`;
      throw new StartRefusal(
        `npm start already runs in this folder (pid ${holder.pid}, ${where}): use that one, stop it (Ctrl-C in its terminal, or kill ${holder.pid}), or start from another folder`,
      );
    }
    if (attempt >= 3) throw new StartRefusal(`cannot take ${file}: another npm start is taking it too`);
    // Stale: moved aside (atomically, so that of two starts taking it over one wins the new lock).
    try {
      const aside = `${file}.stale-${process.pid}`;
      renameSync(file, aside);
      unlinkSync(aside);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }
  let released = false;
  let current = port;
  const release = () => {
    if (released) return;
    released = true;
    if (readLock(file)?.pid !== process.pid) return;
    try {
      unlinkSync(file);
    } catch {
      // already gone
    }
  };
  process.once('exit', release);
  return {
    update(actual: number) {
      if (released || actual === current) return;
      current = actual;
      writeFileSync(file, JSON.stringify({ pid: process.pid, port: actual }) + '\n', { mode: 0o600 });
    },
    release,
  };
}

/** Refuses when `port` (not 0) cannot be listened on at `host`, naming PORT. */
export async function assertPortFree(port: number, host = '127.0.0.1'): Promise<void> {
  if (port === 0) return;
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) => {
      reject(
        new StartRefusal(
          error.code === 'EADDRINUSE'
            ? `PORT ${port} is in use by another program: stop it, or set PORT to a free port (PORT=${port === 65535 ? 7072 : port + 1} npm start)`
            : `PORT ${port} cannot be listened on (${error.code ?? error.message}): set PORT to another port`,
        ),
      );
    });
    server.listen(port, host, () => server.close(() => resolve()));
  });
}

const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]', '::1', '0.0.0.0']);
const PLACEHOLDER_PORTS = { blob: 10000, queue: 10001, table: 10002 } as const;

/** True when `endpoint` looks like an emulator's: a loopback host, or Azurite's account in the path. */
function emulatorLike(url: URL): boolean {
  return (
    LOOPBACK_HOSTS.has(url.hostname.toLowerCase()) ||
    url.hostname.toLowerCase().endsWith('.localhost') ||
    url.pathname.split('/')[1] === AZURITE_ACCOUNT
  );
}

function parseUrl(value: string): URL | undefined {
  try {
    return new URL(value.trim());
  } catch {
    return undefined;
  }
}

/**
 * Checks every setting as the app will, before Azurite starts: with what `npm start` hands the app
 * filled in ({@link fillEmbeddedSettings} with placeholders for its own Azurite's endpoints, any
 * emulator endpoint taken as that Azurite: one naming another is refused once it runs, naming the
 * setting) and a placeholder development key.
 */
export function checkSettings(env: NodeJS.ProcessEnv, cwd: string): void {
  const placeholder = (service: keyof typeof PLACEHOLDER_PORTS) =>
    `http://127.0.0.1:${PLACEHOLDER_PORTS[service]}/${AZURITE_ACCOUNT}`;
  const own = {
    blobEndpoint: placeholder('blob'),
    queueEndpoint: placeholder('queue'),
    tableEndpoint: placeholder('table'),
  };
  const filled = fillEmbeddedSettings(env, cwd, own, emulatorLike);
  if (!isSet(filled, 'CAIRN_API_KEYS') && !isSet(filled, 'CAIRN_AUTH_ISSUER')) {
    filled['CAIRN_API_KEYS'] = `dev:${'0'.repeat(64)}:admin`;
  }
  loadConfig(filled, cwd);
}

function isSet(env: Record<string, string | undefined>, name: string): boolean {
  return (env[name]?.trim() ?? '') !== '';
}

/**
 * The settings `npm start` fills in around the Azurite it runs (`own`), as a copy of `env`: the
 * data folder; the Blob endpoint (and Azurite's account key) when only CAIRN_BLOB_CONTAINER is set;
 * and, when no storage credential other than this Azurite's is in play (no key but Azurite's, no
 * Blob endpoint but its own), the email-window queue and, in the Blob profile, the tables on it,
 * with Azurite's key, which they share with the Blob backend. `isOwnBlob` says whether a Blob
 * endpoint is this Azurite's (by default: the same endpoint as `own`'s).
 */
export function fillEmbeddedSettings(
  env: NodeJS.ProcessEnv,
  cwd: string,
  own: EmbeddedEndpoints,
  isOwnBlob: (url: URL) => boolean = (url) => sameEndpoint(url, own.blobEndpoint),
): Record<string, string | undefined> {
  const filled: Record<string, string | undefined> = { ...env };
  const set = (name: string) => isSet(filled, name);
  if (!set('CAIRN_DATA_DIR')) filled['CAIRN_DATA_DIR'] = path.join(cwd, '.cairn', 'data');
  if (set('CAIRN_BLOB_CONTAINER') && !set('CAIRN_BLOB_ENDPOINT')) {
    filled['CAIRN_BLOB_ENDPOINT'] = own.blobEndpoint;
    if (!set('CAIRN_STORAGE_ACCOUNT_KEY')) filled['CAIRN_STORAGE_ACCOUNT_KEY'] = AZURITE_ACCOUNT_KEY;
  }
  const key = filled['CAIRN_STORAGE_ACCOUNT_KEY']?.trim();
  const blob = filled['CAIRN_BLOB_ENDPOINT']?.trim();
  const blobUrl = blob === undefined || blob === '' ? undefined : parseUrl(blob);
  const onOwnBlob = blobUrl !== undefined && isOwnBlob(blobUrl);
  const onlyThisAzurite =
    (!key || key === AZURITE_ACCOUNT_KEY) && (blob === undefined || blob === '' || onOwnBlob);
  if (!onlyThisAzurite) return filled;
  if (!set('CAIRN_QUEUE_ENDPOINT')) {
    filled['CAIRN_QUEUE_ENDPOINT'] = own.queueEndpoint;
    filled['CAIRN_STORAGE_ACCOUNT_KEY'] = AZURITE_ACCOUNT_KEY;
  }
  // The Blob profile keeps its session index, memory facts and audit trail in this Azurite's
  // tables; the local profile keeps its data on local files.
  if (onOwnBlob && set('CAIRN_BLOB_CONTAINER') && !set('CAIRN_TABLE_ENDPOINT')) {
    filled['CAIRN_TABLE_ENDPOINT'] = own.tableEndpoint;
    filled['CAIRN_STORAGE_ACCOUNT_KEY'] = AZURITE_ACCOUNT_KEY;
  }
  return filled;
}

export interface EmbeddedEndpoints {
  readonly blobEndpoint: string;
  readonly queueEndpoint: string;
  readonly tableEndpoint: string;
}

/** `origin + path` without trailing slashes, loopback names made one, for comparing endpoints. */
function normalized(url: URL): string {
  const host = LOOPBACK_HOSTS.has(url.hostname.toLowerCase()) ? '127.0.0.1' : url.hostname.toLowerCase();
  const port = url.port === '' ? (url.protocol === 'https:' ? '443' : '80') : url.port;
  return `${url.protocol}//${host}:${port}${url.pathname.replace(/\/+$/, '')}`;
}

function sameEndpoint(url: URL, endpoint: string): boolean {
  const own = parseUrl(endpoint);
  return own !== undefined && normalized(url) === normalized(own);
}

/**
 * The first setting that names an emulator (a loopback or Azurite endpoint) other than the Azurite
 * `npm start` started, with its value; undefined when there is none. An endpoint of a real account
 * is not an emulator's and passes. `AzureWebJobsStorage` passes when it is
 * `UseDevelopmentStorage=true` or names no emulator: `npm start` replaces it with its own Azurite's.
 */
export function foreignEmulatorSetting(
  env: NodeJS.ProcessEnv,
  own: EmbeddedEndpoints,
): { setting: string; value: string } | undefined {
  const services = [
    ['CAIRN_BLOB_ENDPOINT', own.blobEndpoint],
    ['CAIRN_QUEUE_ENDPOINT', own.queueEndpoint],
    ['CAIRN_TABLE_ENDPOINT', own.tableEndpoint],
  ] as const;
  for (const [setting, endpoint] of services) {
    const value = env[setting]?.trim();
    if (value === undefined || value === '') continue;
    const url = parseUrl(value);
    if (url !== undefined && emulatorLike(url) && !sameEndpoint(url, endpoint)) return { setting, value };
  }
  const connection = env['AzureWebJobsStorage']?.trim();
  if (connection !== undefined && connection !== '') {
    const parts = new Map(
      connection
        .split(';')
        .map((part) => part.trim())
        .filter((part) => part.includes('='))
        .map((part) => {
          const at = part.indexOf('=');
          return [part.slice(0, at).toLowerCase(), part.slice(at + 1)] as const;
        }),
    );
    const named = [
      [parts.get('blobendpoint'), own.blobEndpoint],
      [parts.get('queueendpoint'), own.queueEndpoint],
      [parts.get('tableendpoint'), own.tableEndpoint],
    ] as const;
    for (const [value, endpoint] of named) {
      const url = value === undefined ? undefined : parseUrl(value);
      // The endpoint only: the connection string may hold a key.
      if (url !== undefined && emulatorLike(url) && !sameEndpoint(url, endpoint)) {
        return { setting: 'AzureWebJobsStorage', value: value ?? '' };
      }
    }
  }
  return undefined;
}
