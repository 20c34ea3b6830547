import http from 'node:http';
import https from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';

import { readAllBytes } from '../shared/streams';

/**
 * The client's HTTP transport: one base URL and token, bounded retries with exponential backoff and
 * jitter for what is worth retrying (network errors, 429, 502-504 and 503 storage_unavailable),
 * never for a caller error. Counts the requests it sends.
 *
 * Requests go through node's `http` with keep-alive sockets rather than `fetch`: a publish is
 * thousands of 64 KiB PUTs, and `fetch` costs the client about three times the CPU per request
 * (measured), CPU the service and the storage need on a small machine.
 */

/** One answer, its body not yet read: read it (`json`, `body`) or `discard` it. */
export interface HttpReply {
  readonly status: number;
  header(name: string): string | undefined;
  readonly body: AsyncIterable<Uint8Array>;
  json(): Promise<unknown>;
  discard(): Promise<void>;
}

export interface HttpRequestSpec {
  readonly method: string;
  readonly url: string;
  readonly headers: Record<string, string>;
  readonly body?: Buffer;
}

/** Sends one request; rejects on a network failure. Swappable so tests can count or break requests. */
export type HttpSender = (request: HttpRequestSpec) => Promise<HttpReply>;

export interface TransportOptions {
  /** `http://host:port` of Cairn, with or without the `/api` suffix. */
  readonly baseUrl: string;
  /** An API key or an Entra ID access token. */
  readonly token: string;
  /** Attempts per request, the first included (default 5). */
  readonly attempts?: number;
  /** Default: {@link nodeHttpSender}. */
  readonly send?: HttpSender;
}

/** An error answer of Cairn (`{"error": {"code", "message", ...}}`), with its status. */
export class CairnHttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(`${status} ${code}: ${message}`);
    this.name = 'CairnHttpError';
  }
}

const RETRYABLE_STATUS = new Set([429, 502, 503, 504]);
/** A request that sees no byte for this long is abandoned (and retried). */
const IDLE_TIMEOUT_MS = 60_000;

/** An {@link HttpSender} on node's http/https with keep-alive sockets (one agent per sender). */
export function nodeHttpSender(maxSockets = 64): HttpSender {
  const agents = {
    'http:': new http.Agent({ keepAlive: true, maxSockets }),
    'https:': new https.Agent({ keepAlive: true, maxSockets }),
  };
  return (spec) =>
    new Promise<HttpReply>((resolve, reject) => {
      const url = new URL(spec.url);
      const transport = url.protocol === 'https:' ? https : http;
      const request = transport.request(
        url,
        {
          method: spec.method,
          agent: url.protocol === 'https:' ? agents['https:'] : agents['http:'],
          headers: { ...spec.headers, 'content-length': String(spec.body?.length ?? 0) },
          timeout: IDLE_TIMEOUT_MS,
        },
        (response) => {
          const readAll = () => readAllBytes(response);
          resolve({
            status: response.statusCode ?? 0,
            header: (name) => {
              const value = response.headers[name.toLowerCase()];
              return Array.isArray(value) ? value.join(', ') : value;
            },
            body: response,
            json: async () => JSON.parse((await readAll()).toString('utf8')) as unknown,
            discard: async () => {
              await readAll();
            },
          });
        },
      );
      request.on('timeout', () => request.destroy(new Error(`no answer within ${IDLE_TIMEOUT_MS} ms`)));
      request.on('error', reject);
      request.end(spec.body);
    });
}

export class Transport {
  readonly counts = { requests: 0, retries: 0 };
  private readonly base: string;
  private readonly sender: HttpSender;

  constructor(private readonly options: TransportOptions) {
    this.base = options.baseUrl.replace(/\/+$/, '').replace(/\/api$/, '');
    this.sender = options.send ?? nodeHttpSender();
  }

  /**
   * Sends a request, retrying transient failures; returns the answer of the first attempt that is
   * not transient. Error statuses are returned, not thrown: callers decide what 404 or 409 mean.
   */
  async send(method: string, path: string, body?: Buffer | string): Promise<HttpReply> {
    const attempts = this.options.attempts ?? 5;
    const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
    const headers: Record<string, string> = { authorization: `Bearer ${this.options.token}` };
    if (body !== undefined) {
      headers['content-type'] = typeof body === 'string' ? 'application/json' : 'application/octet-stream';
    }
    let lastError: unknown;
    for (let attempt = 0; attempt < attempts; attempt++) {
      if (attempt > 0) {
        this.counts.retries++;
        await sleep(Math.min(2000, 100 * 2 ** (attempt - 1)) * (0.5 + Math.random()));
      }
      this.counts.requests++;
      try {
        const reply = await this.sender({
          method,
          url: `${this.base}/api${path}`,
          headers,
          ...(bytes === undefined ? {} : { body: bytes }),
        });
        if (!RETRYABLE_STATUS.has(reply.status) || attempt === attempts - 1) return reply;
        await reply.discard();
      } catch (error) {
        lastError = error;
      }
    }
    throw new Error(`${method} ${path} failed after ${attempts} attempts`, { cause: lastError });
  }

  /** Throws the error answer of `reply` as a {@link CairnHttpError}. */
  static async fail(reply: HttpReply): Promise<never> {
    let body: { error?: { code?: string; message?: string } & Record<string, unknown> } = {};
    try {
      body = (await reply.json()) as typeof body;
    } catch {
      // Not Cairn's JSON (a proxy, a cut connection): the status alone says it.
    }
    const { code = 'unknown', message = `HTTP ${reply.status}`, ...details } = body.error ?? {};
    throw new CairnHttpError(reply.status, code, message, details);
  }
}

/** A path segment as the API expects it: percent-encoded. */
export function segment(value: string): string {
  return encodeURIComponent(value);
}

/** A `/`-separated key (a file path) with each segment percent-encoded. */
export function keyPath(key: string): string {
  return key.split('/').map(segment).join('/');
}
