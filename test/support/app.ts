import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { closeSync, openSync, readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';

import { type HttpSender, nodeHttpSender } from '@cairn-state/client';

import { AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import { EXIT_WITH_PARENT } from '../../dev/exitWithParent';
import { sha256Hex } from '../../shared/auth';
import { checkAnswer } from './answerContract';
import { onCleanUp, tempDir } from './cleanup';
import { scaled, STORAGE_TIMEOUT_MS } from './timeouts';

export const SERVE_SCRIPT = path.resolve('dist/dev/host/serve.js');

export interface TestTenant {
  readonly tenant: string;
  readonly key: string;
  readonly admin: boolean;
}

export function newTenant(name: string, admin = false): TestTenant {
  return {
    tenant: `${name}-${randomUUID().slice(0, 8)}`,
    key: `k_${randomBytes(18).toString('base64url')}`,
    admin,
  };
}

export function apiKeysSetting(tenants: readonly TestTenant[]): string {
  return tenants.map((t) => `${t.tenant}:${sha256Hex(t.key)}${t.admin ? ':admin' : ''}`).join(',');
}

export type Backend = 'local' | 'blob';

/** Settings of a fresh store for `backend`: a new temp folder, or a new container base in Azurite. */
export function backendSettings(backend: Backend, blobEndpoint: string): Record<string, string> {
  if (backend === 'local') {
    return { CAIRN_DATA_DIR: tempDir('test') };
  }
  return {
    CAIRN_BLOB_ENDPOINT: blobEndpoint,
    CAIRN_BLOB_CONTAINER: `t${randomUUID().replaceAll('-', '').slice(0, 20)}`,
    CAIRN_STORAGE_ACCOUNT_KEY: AZURITE_ACCOUNT_KEY,
  };
}

export interface RunningApp {
  readonly url: string;
  readonly child: ChildProcess;
  /** The local runtime's host key (for `/admin/functions/...` and the durable webhooks). */
  readonly hostKey: string;
  /** Everything the app printed so far (runtime and function logs). */
  output(): string;
  stop(): Promise<void>;
}

/**
 * Starts the app in the local runtime as a child process, on a free port, with exactly `env`
 * (plus PATH/HOME, and the tests' storage deadline unless `env` sets one): no ambient CAIRN_*
 * setting of the machine leaks in. It runs in a temp folder
 * of its own (`cwd`, unless given), where the runtime keeps its host key (`.cairn/host-key`).
 *
 * `keepOutput: false` (the benchmarks) sends the app's output to `output.log` in that folder
 * instead of through a pipe to this process: read from a pipe, every request's log line would wake
 * the measuring process, a cost the app's callers never pay. `output()` reads the file.
 */
export async function startApp(
  env: Record<string, string>,
  script = SERVE_SCRIPT,
  options: { keepOutput?: boolean; args?: string[]; cwd?: string } = {},
): Promise<RunningApp> {
  const cwd = options.cwd ?? tempDir('app');
  const logFile = options.keepOutput === false ? path.join(cwd, 'output.log') : undefined;
  const logFd = logFile === undefined ? undefined : openSync(logFile, 'a');
  const child = spawn(process.execPath, [...EXIT_WITH_PARENT, script, ...(options.args ?? [])], {
    cwd,
    env: {
      PATH: process.env['PATH'] ?? '',
      HOME: process.env['HOME'] ?? '',
      PORT: '0',
      CAIRN_STORAGE_TIMEOUT_MS: String(STORAGE_TIMEOUT_MS),
      ...env,
    },
    // stdin: the pipe EXIT_WITH_PARENT watches (the app stops if this process dies first).
    stdio: ['pipe', logFd ?? 'pipe', logFd ?? 'pipe'],
  });
  // The child holds its own copy of the file's descriptor.
  if (logFd !== undefined) closeSync(logFd);
  let piped = '';
  child.stdout?.on('data', (data: Buffer) => (piped += data.toString()));
  child.stderr?.on('data', (data: Buffer) => (piped += data.toString()));
  const output = () => {
    if (logFile === undefined) return piped;
    try {
      return readFileSync(logFile, 'utf8');
    } catch {
      return '';
    }
  };
  const forget = onCleanUp(() => stopProcess(child));
  const url = await new Promise<string>((resolve, reject) => {
    const settle = () => {
      clearTimeout(timer);
      clearInterval(poll);
      child.stdout?.off('data', check);
    };
    const timer = setTimeout(() => {
      settle();
      // Never leave a child that did not start in time running.
      void stopProcess(child, 'SIGKILL');
      reject(new Error(`app did not start:\n${output()}`));
    }, scaled(30_000));
    const check = () => {
      const match = /"url":"(http:\/\/127\.0\.0\.1:\d+)"/.exec(output());
      if (match?.[1] !== undefined) {
        settle();
        resolve(match[1]);
      }
    };
    // A file has no events to wait on: it is looked at every 20 ms until the app prints its URL.
    const poll = logFile === undefined ? undefined : setInterval(check, 20);
    child.stdout?.on('data', check);
    child.once('exit', (code) => {
      settle();
      reject(new Error(`app exited (${code}):\n${output()}`));
    });
  });
  return {
    url,
    child,
    hostKey: readFileSync(path.join(cwd, '.cairn', 'host-key'), 'utf8').trim(),
    output,
    stop: async () => {
      forget();
      await stopProcess(child);
    },
  };
}

/** `POST /admin/functions/<name>` with the host key, as the host's admin API is called. */
export function runTimer(app: RunningApp, name: string): Promise<Response> {
  return fetch(`${app.url}/admin/functions/${name}`, {
    method: 'POST',
    headers: { 'x-functions-key': app.hostKey, 'content-type': 'application/json' },
    body: '{}',
  });
}

export function stopProcess(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const force = setTimeout(() => child.kill('SIGKILL'), 10_000);
    child.once('exit', () => {
      clearTimeout(force);
      resolve();
    });
    child.kill(signal);
  });
}

/**
 * A small HTTP client for one caller. Every answer is checked against the OpenAPI document (status,
 * declared headers, JSON body); one that differs rejects (see answerContract.ts). `contract: false`
 * is for apps that are not Cairn (the local runtime's test fixtures).
 */
export function client(baseUrl: string, key?: string, options: { contract?: boolean } = {}) {
  return async (pathname: string, init: RequestInit = {}) => {
    const headers = new Headers(init.headers);
    if (key !== undefined && !headers.has('authorization')) headers.set('authorization', `Bearer ${key}`);
    const response = await fetch(baseUrl + pathname, { ...init, headers });
    if (options.contract !== false) {
      const isJson = /^application\/json\b/i.test(response.headers.get('content-type') ?? '');
      // A clone, so that the test still reads the body; only JSON is read (bytes may be large or cut).
      const text = isJson ? await response.clone().text() : undefined;
      checkAnswer({
        method: init.method ?? 'GET',
        path: pathname,
        status: response.status,
        header: (name) => response.headers.get(name) ?? undefined,
        json: parsedJson(text),
        ...sentBody(init.body),
      });
    }
    return response;
  };
}

/**
 * A sender for the client library (`CairnClient({ send })`) whose every answer is checked against
 * the OpenAPI document as {@link client}'s are: status, declared headers and, for a JSON answer, its
 * body (read here; the client reads the same bytes again). Other bodies are left unread.
 */
export function checkedSender(inner: HttpSender = nodeHttpSender()): HttpSender {
  return async (request) => {
    const reply = await inner(request);
    const isJson = /^application\/json\b/i.test(reply.header('content-type') ?? '');
    const text = isJson ? (await reply.bytes()).toString('utf8') : undefined;
    checkAnswer({
      method: request.method,
      path: request.url.replace(/^https?:\/\/[^/]+/i, ''),
      status: reply.status,
      header: (name) => reply.header(name),
      json: parsedJson(text),
      ...(request.body === undefined ? {} : { requestBody: request.body }),
    });
    return reply;
  };
}

/** A request body the contract check can read: text or bytes (a stream or a form is not checked). */
function sentBody(body: RequestInit['body']): { requestBody?: string | Uint8Array } {
  if (typeof body === 'string' || body instanceof Uint8Array) return { requestBody: body };
  return {};
}

/** The body as JSON, or the text itself when it is not JSON (so that the check reports it). */
function parsedJson(text: string | undefined): unknown {
  if (text === undefined || text === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/**
 * A request with the path sent exactly as given. `fetch` normalises paths the WHATWG way
 * (`a/%2E%2E/b` becomes `b`) before sending, which would hide what the server does with them.
 * The answer is checked against the OpenAPI document as {@link client}'s are.
 */
export function rawRequest(
  baseUrl: string,
  rawPath: string,
  init: { method?: string; headers?: Record<string, string>; body?: string | Buffer } = {},
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const request = http.request(
      { hostname, port, path: rawPath, method: init.method ?? 'GET', headers: init.headers },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => {
          const answer = {
            status: response.statusCode ?? 0,
            headers: response.headers,
            body: Buffer.concat(chunks).toString(),
          };
          const header = (name: string) => {
            const value = response.headers[name.toLowerCase()];
            return Array.isArray(value) ? value.join(', ') : value;
          };
          try {
            checkAnswer({
              method: init.method ?? 'GET',
              path: rawPath,
              status: answer.status,
              header,
              json: /^application\/json\b/i.test(header('content-type') ?? '')
                ? parsedJson(answer.body)
                : undefined,
              ...(init.body === undefined ? {} : { requestBody: init.body }),
            });
            resolve(answer);
          } catch (error) {
            reject(error instanceof Error ? error : new Error(String(error)));
          }
        });
      },
    );
    request.on('error', reject);
    request.end(init.body);
  });
}
