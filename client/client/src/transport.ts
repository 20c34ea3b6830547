import http from 'node:http';
import https from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';

import { ErrorBody } from '@cairn-state/protocol/errorAnswers';
import { readAllBytes } from '@cairn-state/protocol/streams';

import { CairnHttpError, CairnNetworkError, CairnTimeoutError, TRANSIENT_STATUSES } from './errors.js';

/**
 * The client's one HTTP transport: a base URL and a token, per-attempt timeouts, typed errors and
 * bounded retries (exponential backoff with jitter, at least what `Retry-After` asks, at most
 * `attempts` attempts).
 *
 * What is retried, and why:
 * - A request that certainly never reached the service (the connection was refused or never made,
 *   the name did not resolve) is retried whatever it is: nothing was done.
 * - An idempotent request is also retried after an ambiguous failure (a timeout, a connection cut
 *   after sending) and after a transient answer (429, 502, 503, 504): doing it twice leaves the
 *   same state as doing it once. Idempotent are GET, HEAD, PUT and DELETE, and the POSTs the API
 *   defines as repeatable, which their callers mark (`idempotent: true`): publishing a checkpoint
 *   again answers as the first time did; resolving a promise twice changes nothing.
 * - Any other POST (a key/value append, a promise, an interaction, a claim, a migration start) is
 *   never sent twice after an ambiguous failure: it fails with {@link CairnTimeoutError} or
 *   {@link CairnNetworkError} (`maybeReceived: true`), and the caller, who knows what it meant,
 *   decides. Only a 429 (refused before any work) is retried for it.
 *
 * A retried conditional write can answer 412 although its first attempt succeeded (the first
 * attempt changed the ETag the retry is conditional on): a caller that must tell the two apart
 * reads the item again.
 *
 * Error statuses are returned, not thrown, by {@link Transport.send} and {@link Transport.call}:
 * each route's client decides what 404 or 409 means there and throws the rest with
 * {@link failure}.
 *
 * Requests go through node's `http` with keep-alive sockets rather than `fetch`: a publish is
 * thousands of 64 KiB PUTs, and `fetch` costs the client about three times the CPU per request
 * (measured), CPU the service and the storage need on a small machine.
 */

/** One answer. Its body is read once: by `bytes`, `json`, `discard` or by iterating `body`. */
export interface HttpReply {
  readonly status: number;
  header(name: string): string | undefined;
  readonly body: AsyncIterable<Uint8Array>;
  bytes(): Promise<Buffer>;
  json(): Promise<unknown>;
  discard(): Promise<void>;
}

export interface HttpRequestSpec {
  readonly method: string;
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: Buffer;
  /** Longest wait for the answer's headers, and for each further chunk of its body. */
  readonly timeoutMs: number;
}

/**
 * Sends one request. Rejects with {@link CairnTimeoutError} when no answer came in time, with a
 * {@link CairnNetworkError} whose `maybeReceived` is false when the request was certainly never
 * sent, or with any other error for a network failure (then the request may have been received).
 * Swappable so tests can count, break or delay requests.
 */
export type HttpSender = (request: HttpRequestSpec) => Promise<HttpReply>;

export interface TransportOptions {
  /** Cairn's base URL, with or without the `/api` suffix (`http://127.0.0.1:7071/api`). */
  readonly url: string;
  /** An API key or an Entra ID access token. */
  readonly token: string;
  /** Attempts per request, the first included (default 5; 1 turns retries off). */
  readonly attempts?: number;
  /** Per attempt: the longest wait for an answer, and for each chunk of its body (default 30 s). */
  readonly timeoutMs?: number;
  /** Default: {@link nodeHttpSender}. */
  readonly send?: HttpSender;
}

export interface RequestOptions {
  /** Bytes to send (a string is sent as UTF-8), as `application/octet-stream`. */
  readonly body?: Uint8Array | string;
  /** A value to send as JSON (instead of `body`). */
  readonly json?: unknown;
  readonly headers?: Readonly<Record<string, string>>;
  /** Query parameters; undefined ones are left out. */
  readonly query?: Readonly<Record<string, string | number | boolean | undefined>>;
  /** Whether sending it twice is harmless. Default: true for GET, HEAD, PUT, DELETE; false else. */
  readonly idempotent?: boolean;
  /** Overrides the transport's timeout for this request. */
  readonly timeoutMs?: number;
}

export const DEFAULT_ATTEMPTS = 5;
export const DEFAULT_TIMEOUT_MS = 30_000;
const IDEMPOTENT_METHODS = new Set(['GET', 'HEAD', 'PUT', 'DELETE']);
/** Failures before a connection exists: the request was certainly not sent. */
const NOT_CONNECTED_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EADDRNOTAVAIL',
]);
/** The longest `Retry-After` honoured; longer waits are the caller's decision. */
const MAX_RETRY_AFTER_MS = 10_000;
/**
 * Idle keep-alive sockets are closed after this long, before the server closes them (Node servers
 * close after 5 s): a request sent on a socket the server is closing fails ambiguously, and a
 * POST could not be retried.
 */
const FREE_SOCKET_TIMEOUT_MS = 4_000;

/** An {@link HttpSender} on node's http/https with keep-alive sockets (one agent per sender). */
export function nodeHttpSender(maxSockets = 64): HttpSender {
  const agents = {
    http: new http.Agent({ keepAlive: true, maxSockets, timeout: FREE_SOCKET_TIMEOUT_MS }),
    https: new https.Agent({ keepAlive: true, maxSockets, timeout: FREE_SOCKET_TIMEOUT_MS }),
  };
  return (spec) =>
    new Promise<HttpReply>((resolve, reject) => {
      const { origin, path } = splitUrl(spec.url);
      const secure = origin.protocol === 'https:';
      let timedOut = false;
      const request = (secure ? https : http).request(
        origin,
        {
          path,
          method: spec.method,
          agent: secure ? agents.https : agents.http,
          headers: { ...spec.headers, 'content-length': String(spec.body?.length ?? 0) },
          timeout: spec.timeoutMs,
        },
        (response) => {
          clearTimeout(answerTimer);
          let read: Promise<Buffer> | undefined;
          const bytes = () =>
            (read ??= readAllBytes(response).catch((error: unknown) => {
              throw timedOut ? timeoutError(spec) : error;
            }));
          resolve({
            status: response.statusCode ?? 0,
            header: (name) => {
              const value = response.headers[name.toLowerCase()];
              return Array.isArray(value) ? value.join(', ') : value;
            },
            body: response,
            bytes,
            json: async () => JSON.parse((await bytes()).toString('utf8')) as unknown,
            discard: async () => {
              await bytes();
            },
          });
        },
      );
      const expire = () => {
        timedOut = true;
        const socket = request.socket;
        // Never connected (or still waiting for a free socket): nothing was sent.
        const sent = socket !== null && !socket.connecting;
        request.destroy(
          sent
            ? timeoutError(spec)
            : new CairnNetworkError(
                `${spec.method} ${spec.url}: no connection within ${spec.timeoutMs} ms`,
                false,
                1,
              ),
        );
      };
      const answerTimer = setTimeout(expire, spec.timeoutMs);
      request.on('timeout', expire);
      request.on('error', (error) => {
        clearTimeout(answerTimer);
        reject(error);
      });
      request.end(spec.body);
    });
}

/**
 * The origin and the path exactly as written. `new URL` would resolve `.` and `..` segments (also
 * percent-encoded ones), and the request would name another key than the caller's.
 */
function splitUrl(url: string): { origin: URL; path: string } {
  const match = /^(https?:\/\/[^/?#]+)(.*)$/i.exec(url);
  if (match?.[1] === undefined) throw new TypeError(`not an http(s) URL: ${url}`);
  return { origin: new URL(match[1]), path: match[2] || '/' };
}

function timeoutError(spec: HttpRequestSpec): CairnTimeoutError {
  return new CairnTimeoutError(
    `${spec.method} ${spec.url}: no answer within ${spec.timeoutMs} ms`,
    spec.timeoutMs,
    1,
  );
}

/** Whether a failure of the sender means the request may have reached the service. */
function maybeReceived(error: unknown): boolean {
  if (error instanceof CairnNetworkError) return error.maybeReceived;
  const code = (error as { code?: unknown } | null)?.code;
  return !(typeof code === 'string' && NOT_CONNECTED_CODES.has(code));
}

/** The {@link CairnHttpError} an error answer stands for (reads its body). */
export async function failure(reply: HttpReply): Promise<CairnHttpError> {
  let body: unknown;
  try {
    body = await reply.json();
  } catch {
    // Not JSON (a proxy, a cut connection, a HEAD): the status alone says it.
  }
  const parsed = ErrorBody.safeParse(body);
  // Anything but Cairn's error JSON (a proxy's) reads by its status alone.
  const { code, message, ...details } = parsed.success ? parsed.data.error : { code: 'unknown', message: '' };
  return new CairnHttpError(
    reply.status,
    code,
    message === '' ? `HTTP ${reply.status}` : message,
    details,
    reply.header('etag'),
    reply.header('x-request-id'),
  );
}

/** The JSON body of `reply` when its status is one of `ok`; throws its {@link CairnHttpError} else. */
export async function readJson<T>(reply: HttpReply, ...ok: number[]): Promise<T> {
  if (!ok.includes(reply.status)) throw await failure(reply);
  return (await reply.json()) as T;
}

export class Transport {
  /** Requests sent (retries included) and retries, since this transport was made. */
  readonly counts = { requests: 0, retries: 0 };
  private readonly base: string;
  private readonly sender: HttpSender;
  private readonly attempts: number;
  private readonly timeoutMs: number;

  constructor(private readonly options: TransportOptions) {
    const url = new URL(options.url);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new TypeError(`the service URL must be http or https: ${options.url}`);
    }
    this.base = `${url.origin}${url.pathname.replace(/\/+$/, '').replace(/\/api$/, '')}/api`;
    this.sender = options.send ?? nodeHttpSender();
    this.attempts = Math.max(1, options.attempts ?? DEFAULT_ATTEMPTS);
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  }

  /**
   * Sends a request under the retry rule above; resolves with the first answer that is not
   * retried, its body unread (streamed by the caller). Error statuses are returned, not thrown.
   */
  send(method: string, path: string, options: RequestOptions = {}): Promise<HttpReply> {
    return this.attempt(method, path, options, false);
  }

  /** As {@link send}, with the body read inside the attempt (a body cut short is retried too). */
  call(method: string, path: string, options: RequestOptions = {}): Promise<HttpReply> {
    return this.attempt(method, path, options, true);
  }

  private async attempt(
    method: string,
    path: string,
    options: RequestOptions,
    buffer: boolean,
  ): Promise<HttpReply> {
    const idempotent = options.idempotent ?? IDEMPOTENT_METHODS.has(method);
    const spec = this.specOf(method, path, options);
    for (let attempt = 1; ; attempt++) {
      let retryAfterMs = 0;
      this.counts.requests++;
      try {
        const sent = await this.sender(spec);
        const reply = buffer ? await buffered(sent) : sent;
        const retry = TRANSIENT_STATUSES.has(reply.status) && (idempotent || reply.status === 429);
        if (!retry || attempt >= this.attempts) return reply;
        retryAfterMs = retryAfterOf(reply);
        await reply.discard();
      } catch (error) {
        // A request node refuses to send (a header with a line break, a bad URL) fails the same way
        // every time: the caller's mistake, thrown as it is.
        if (error instanceof TypeError) throw error;
        if ((!idempotent && maybeReceived(error)) || attempt >= this.attempts) {
          throw networkError(spec, error, attempt);
        }
      }
      this.counts.retries++;
      await sleep(Math.max(retryAfterMs, backoffMs(attempt)));
    }
  }

  private specOf(method: string, path: string, options: RequestOptions): HttpRequestSpec {
    const headers: Record<string, string> = {
      authorization: `Bearer ${this.options.token}`,
      ...options.headers,
    };
    let body: Buffer | undefined;
    if (options.json !== undefined) {
      body = Buffer.from(JSON.stringify(options.json), 'utf8');
      headers['content-type'] = 'application/json';
    } else if (options.body !== undefined) {
      body =
        typeof options.body === 'string'
          ? Buffer.from(options.body, 'utf8')
          : Buffer.from(options.body.buffer, options.body.byteOffset, options.body.byteLength);
      headers['content-type'] = 'application/octet-stream';
    }
    const query = Object.entries(options.query ?? {}).filter(
      (entry): entry is [string, string | number | boolean] => entry[1] !== undefined,
    );
    const search =
      query.length === 0
        ? ''
        : `?${new URLSearchParams(query.map(([name, value]): [string, string] => [name, String(value)])).toString()}`;
    return {
      method,
      url: `${this.base}${path}${search}`,
      headers,
      ...(body === undefined ? {} : { body }),
      timeoutMs: options.timeoutMs ?? this.timeoutMs,
    };
  }
}

/** The reply with its body already read (reading it again returns the same bytes). */
async function buffered(reply: HttpReply): Promise<HttpReply> {
  const bytes = await reply.bytes();
  return {
    status: reply.status,
    header: (name) => reply.header(name),
    body: (async function* () {
      yield bytes;
    })(),
    bytes: () => Promise.resolve(bytes),
    json: async () => JSON.parse(bytes.toString('utf8')) as unknown,
    discard: () => Promise.resolve(),
  };
}

/** 100, 200, 400, ... ms (at most 2 s), each scaled by a random 0.5-1.5 so that clients spread out. */
function backoffMs(attempt: number): number {
  return Math.min(2000, 100 * 2 ** (attempt - 1)) * (0.5 + Math.random());
}

function retryAfterOf(reply: HttpReply): number {
  const seconds = Number(reply.header('retry-after'));
  return Number.isFinite(seconds) && seconds > 0 ? Math.min(seconds * 1000, MAX_RETRY_AFTER_MS) : 0;
}

function networkError(spec: HttpRequestSpec, error: unknown, attempts: number): CairnNetworkError {
  const tries = attempts === 1 ? '1 attempt' : `${attempts} attempts`;
  const what = `${spec.method} ${new URL(spec.url).pathname}`;
  if (error instanceof CairnTimeoutError) {
    return new CairnTimeoutError(
      `${what}: no answer within ${error.timeoutMs} ms (${tries})`,
      error.timeoutMs,
      attempts,
      {
        cause: error,
      },
    );
  }
  const reason = error instanceof Error ? error.message : String(error);
  return new CairnNetworkError(`${what} failed (${tries}): ${reason}`, maybeReceived(error), attempts, {
    cause: error,
  });
}

/**
 * A path segment as the API expects it: percent-encoded, dots of a `.` or `..` segment included
 * (URL parsing would otherwise resolve them, and the request would name another path).
 */
export function segment(value: string): string {
  const encoded = encodeURIComponent(value);
  return encoded === '.' || encoded === '..' ? encoded.replaceAll('.', '%2E') : encoded;
}

/** A `/`-separated key (a file path) with each segment percent-encoded. */
export function keyPath(key: string): string {
  return key.split('/').map(segment).join('/');
}
