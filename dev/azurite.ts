import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';

import { EXIT_WITH_PARENT } from './exitWithParent';

/** Azurite's well-known development account (public, documented by Microsoft; not a secret). */
export const AZURITE_ACCOUNT = 'devstoreaccount1';
export const AZURITE_ACCOUNT_KEY =
  'Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==';

export interface AzuriteOptions {
  /** Folder for its data; in memory when absent. */
  readonly location?: string;
  /** Fixed ports (to restart on the same endpoints); free ports when absent. */
  readonly ports?: { readonly blob: number; readonly queue: number; readonly table: number };
  /** How long it may take to start before it is given up on (default 30 s; tests scale it to the machine). */
  readonly startTimeoutMs?: number;
  /** A module Node loads before Azurite (`node -r`): the tests' change to its settings. */
  readonly preload?: string;
}

export interface Azurite {
  readonly ports: { readonly blob: number; readonly queue: number; readonly table: number };
  readonly blobEndpoint: string;
  readonly queueEndpoint: string;
  readonly tableEndpoint: string;
  /** A connection string for the Functions host and the SDKs' fromConnectionString. */
  readonly connectionString: string;
  /** The child process id (tests freeze it with SIGSTOP to make the storage hang). */
  readonly pid: number;
  stop(): Promise<void>;
}

const LISTENING =
  /Azurite (Blob|Queue|Table) service is successfully listening at http:\/\/127\.0\.0\.1:(\d+)/g;

/**
 * Starts Azurite from node_modules as a child process on loopback. `--skipApiVersionCheck` because
 * the SDKs send a newer API version than Azurite knows; `--disableTelemetry` because this network
 * must not be called out of.
 */
export async function startAzurite(options: AzuriteOptions = {}): Promise<Azurite> {
  const bin = require.resolve('azurite/dist/src/azurite.js');
  const args = [
    ...EXIT_WITH_PARENT,
    ...(options.preload === undefined ? [] : ['-r', options.preload]),
    bin,
    '--disableTelemetry',
    '--skipApiVersionCheck',
    '--loose',
    '--blobHost',
    '127.0.0.1',
    '--queueHost',
    '127.0.0.1',
    '--tableHost',
    '127.0.0.1',
    '--blobPort',
    String(options.ports?.blob ?? 0),
    '--queuePort',
    String(options.ports?.queue ?? 0),
    '--tablePort',
    String(options.ports?.table ?? 0),
  ];
  if (options.location === undefined) {
    args.push('--inMemoryPersistence');
  } else {
    mkdirSync(options.location, { recursive: true });
    args.push('--location', options.location);
  }
  // stdin: the pipe EXIT_WITH_PARENT watches (Azurite stops when what started it is gone).
  const child = spawn(process.execPath, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  const ports = await waitForPorts(child, options.startTimeoutMs ?? 30_000);
  const host = 'http://127.0.0.1';
  const blobEndpoint = `${host}:${ports.blob}/${AZURITE_ACCOUNT}`;
  const queueEndpoint = `${host}:${ports.queue}/${AZURITE_ACCOUNT}`;
  const tableEndpoint = `${host}:${ports.table}/${AZURITE_ACCOUNT}`;
  return {
    ports,
    blobEndpoint,
    queueEndpoint,
    tableEndpoint,
    connectionString:
      `DefaultEndpointsProtocol=http;AccountName=${AZURITE_ACCOUNT};AccountKey=${AZURITE_ACCOUNT_KEY};` +
      `BlobEndpoint=${blobEndpoint};QueueEndpoint=${queueEndpoint};TableEndpoint=${tableEndpoint};`,
    pid: child.pid ?? 0,
    stop: () => stopChild(child),
  };
}

function waitForPorts(child: ChildProcess, startTimeoutMs: number): Promise<Azurite['ports']> {
  return new Promise((resolve, reject) => {
    const found: Record<string, number> = {};
    let output = '';
    const timer = setTimeout(
      () => fail(new Error(`Azurite did not start within ${startTimeoutMs} ms:\n${output}`)),
      startTimeoutMs,
    );
    const fail = (error: Error) => {
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(error);
    };
    const onData = (data: Buffer) => {
      output += data.toString();
      for (const match of output.matchAll(LISTENING)) found[match[1]!.toLowerCase()] = Number(match[2]);
      if (found['blob'] !== undefined && found['queue'] !== undefined && found['table'] !== undefined) {
        clearTimeout(timer);
        child.stdout?.off('data', onData);
        child.stdout?.resume();
        child.stderr?.resume();
        resolve({ blob: found['blob'], queue: found['queue'], table: found['table'] });
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', (data: Buffer) => (output += data.toString()));
    child.once('exit', (code) => fail(new Error(`Azurite exited (${code}) before it listened:\n${output}`)));
  });
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const force = setTimeout(() => child.kill('SIGKILL'), 5000);
    child.once('exit', () => {
      clearTimeout(force);
      resolve();
    });
    child.kill('SIGTERM');
  });
}
