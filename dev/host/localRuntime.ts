import { randomUUID } from 'node:crypto';
import { writeSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';

import {
  type FunctionInput,
  type FunctionTrigger,
  HttpRequest,
  type HttpRequestInit,
  HttpResponse,
  type HttpResponseInit,
  InvocationContext,
} from '@azure/functions';
import { Cron } from 'croner';

import { createLogger, errorSummary } from '../../shared/logging';
import { readAllBytes } from '../../shared/streams';
import { BufferedRequest } from './bufferedRequest';
import { LocalDurableHost } from './durableHost';
import { loadRegistrations, type Registration } from './registrations';
import { compareRanks, compileRoute, type RouteTemplate } from './routeTemplate';

/**
 * A small stand-in for the Functions host, for development and tests only: it serves the app's own
 * registrations (captured by {@link loadRegistrations}, never declared again here), HTTP triggers
 * under `/api/<route>` and timer triggers on their NCRONTAB schedules, also invocable with
 * `POST /admin/functions/<name>` (202, run in the background) as on the host. Production runs on the
 * Functions host; durable orchestrations are served from the migration issue on.
 */

export interface LocalRuntimeOptions {
  /** The app's entry module (package.json `main`), compiled. */
  readonly entry: string;
  readonly port?: number;
  readonly host?: string;
  /** Output of runtime and function logs (JSON lines); stdout when absent. */
  readonly write?: (line: string) => void;
}

export interface LocalRuntime {
  readonly url: string;
  readonly port: number;
  readonly registrations: readonly Registration[];
  /** Runs a timer function now, as its schedule would; resolves when it has finished. */
  runTimer(name: string): Promise<void>;
  close(): Promise<void>;
}

const ROUTE_PREFIX = '/api';
const DURABLE_PREFIX = '/runtime/webhooks/durabletask/';
const BUFFERED_BODY_LIMIT = 4 * 1024 * 1024;

interface HttpRoute {
  readonly registration: Registration;
  readonly route: RouteTemplate;
  readonly methods: ReadonlySet<string>;
}

type HttpFunction = (request: HttpRequest, context: InvocationContext) => Promise<unknown>;
type TimerFunction = (timer: unknown, context: InvocationContext) => Promise<unknown>;

export async function startLocalRuntime(options: LocalRuntimeOptions): Promise<LocalRuntime> {
  const write = options.write ?? stdoutLines();
  const log = createLogger('info', (line) => write(line), { component: 'local-runtime' });
  const registrations = loadRegistrations(options.entry);

  const httpRoutes: HttpRoute[] = registrations
    .filter((registration) => registration.trigger.type === 'httpTrigger')
    .map((registration) => ({
      registration,
      route: compileRoute(registration.trigger.route ?? registration.name),
      methods: new Set(
        (registration.trigger.methods ?? ['GET', 'POST']).map((method) => method.toUpperCase()),
      ),
    }))
    .sort((a, b) => compareRanks(a.route.rank, b.route.rank));
  const timers = new Map(
    registrations
      .filter((registration) => registration.trigger.type === 'timerTrigger')
      .map((registration) => [registration.name, registration]),
  );
  const durable = new LocalDurableHost(registrations, log, write);
  for (const registration of registrations) {
    if (
      !['httpTrigger', 'timerTrigger', 'orchestrationTrigger', 'activityTrigger'].includes(
        registration.trigger.type,
      )
    ) {
      log.warn(
        { function: registration.name, trigger: registration.trigger.type },
        'trigger type not served locally',
      );
    }
  }

  let baseUrl = '';
  const contextFor = (registration: Registration) => {
    // A durable client input (df.app.client.*) gets this runtime's durable API, as the host's
    // extension would hand over its own.
    const clientInputs = Object.values(registration.bindings).filter(
      (binding) =>
        binding.direction === 'in' && ['durableClient', 'orchestrationClient'].includes(binding.type),
    );
    const context = new InvocationContext({
      invocationId: randomUUID(),
      functionName: registration.name,
      logHandler: (_level, ...args) => write(args.map(String).join(' ')),
      options: {
        trigger: registration.trigger as unknown as FunctionTrigger,
        extraInputs: clientInputs as unknown as FunctionInput[],
        extraOutputs: [],
      },
    });
    for (const input of clientInputs)
      context.extraInputs.set(String(input['name']), durable.clientData(baseUrl));
    return context;
  };

  const running = new Map<string, Promise<void>>();
  const runTimer = (name: string, scheduled?: Cron): Promise<void> => {
    const registration = timers.get(name);
    if (registration === undefined) return Promise.reject(new Error(`no timer function ${name}`));
    const previous = running.get(name);
    // Like the host, a timer never runs twice at once in one process.
    if (previous !== undefined) return previous;
    const timer = {
      isPastDue: false,
      schedule: { adjustForDST: true },
      scheduleStatus: {
        last: new Date().toISOString(),
        next: scheduled?.nextRun()?.toISOString(),
        lastUpdated: new Date().toISOString(),
      },
    };
    const run = (async () => {
      try {
        await (registration.handler as TimerFunction)(timer, contextFor(registration));
      } catch (error) {
        log.error({ function: name, err: errorSummary(error) }, 'timer function failed');
      } finally {
        running.delete(name);
      }
    })();
    running.set(name, run);
    return run;
  };

  const crons = [...timers.values()].map((registration) => {
    const schedule = resolveSetting(String(registration.trigger.schedule ?? ''));
    const cron: Cron = new Cron(schedule, { catch: true }, () => void runTimer(registration.name, cron));
    if (registration.trigger.runOnStartup === true) void runTimer(registration.name, cron);
    return cron;
  });

  const server = http.createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      log.error({ err: errorSummary(error) }, 'local runtime failed to answer');
      if (!res.headersSent) sendJson(res, 500, 'internal', 'the local runtime failed');
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 65_000;

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const method = (req.method ?? 'GET').toUpperCase();
    const rawPath = (req.url ?? '/').split('?')[0] ?? '/';
    if (rawPath.startsWith(DURABLE_PREFIX))
      return serveDurable(rawPath.slice(DURABLE_PREFIX.length), method, req, res);
    const admin = /^\/admin\/functions\/([^/]+)$/.exec(rawPath);
    if (admin !== null && method === 'POST') {
      req.resume();
      const name = decodeURIComponent(admin[1] ?? '');
      if (!timers.has(name)) return sendJson(res, 404, 'not_found', `no timer function ${name}`);
      void runTimer(name);
      res.writeHead(202).end();
      return;
    }
    if (rawPath !== ROUTE_PREFIX && !rawPath.startsWith(ROUTE_PREFIX + '/')) {
      req.resume();
      return sendJson(res, 404, 'not_found', 'no such route; Cairn serves /api/...');
    }
    const path = rawPath.slice(ROUTE_PREFIX.length + 1);
    let pathMatched = false;
    for (const candidate of httpRoutes) {
      const params = candidate.route.match(path);
      if (params === null) continue;
      pathMatched = true;
      if (!candidate.methods.has(method)) continue;
      return invokeHttp(candidate.registration, params, req, res, method);
    }
    req.resume();
    if (pathMatched) return sendJson(res, 405, 'method_not_allowed', `method ${method} is not allowed here`);
    return sendJson(res, 404, 'not_found', 'no such route');
  }

  /** The durable client's HTTP API (start an orchestration, read its status), as the extension serves it. */
  async function serveDurable(
    path: string,
    method: string,
    req: http.IncomingMessage,
    res: http.ServerResponse,
  ): Promise<void> {
    const start = /^orchestrators\/([^/]+)(?:\/([^/]+))?$/.exec(path);
    if (start !== null && method === 'POST') {
      const body = (await readAllBytes(req)).toString('utf8');
      const input: unknown = body === '' ? undefined : JSON.parse(body);
      const id = durable.start(
        decodeURIComponent(start[1] ?? ''),
        input,
        start[2] && decodeURIComponent(start[2]),
      );
      res.writeHead(202, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id }));
      return;
    }
    const instance = /^instances\/([^/]+)$/.exec(path);
    if (instance !== null && method === 'GET') {
      req.resume();
      const status = durable.status(decodeURIComponent(instance[1] ?? ''));
      if (status === undefined) return sendJson(res, 404, 'not_found', 'no such instance');
      const finished = status.runtimeStatus === 'Completed' || status.runtimeStatus === 'Failed';
      res.writeHead(finished ? 200 : 202, { 'content-type': 'application/json' });
      res.end(JSON.stringify(status));
      return;
    }
    req.resume();
    return sendJson(res, 404, 'not_found', `the local runtime does not serve durable ${method} ${path}`);
  }

  async function invokeHttp(
    registration: Registration,
    params: Record<string, string>,
    req: http.IncomingMessage,
    res: http.ServerResponse,
    method: string,
  ): Promise<void> {
    const hasBody = method !== 'GET' && method !== 'HEAD';
    const headers = new Headers();
    for (let index = 0; index + 1 < req.rawHeaders.length; index += 2) {
      headers.append(req.rawHeaders[index] ?? '', req.rawHeaders[index + 1] ?? '');
    }
    // Small bodies with a declared length are read up front (node streams are much cheaper than
    // web streams) and handed over as they are; anything else streams, as on the host with HTTP
    // streams enabled, through the library's own `nativeRequest` path, which keeps large bodies out
    // of memory.
    const url = `http://${req.headers.host ?? '127.0.0.1'}${req.url ?? '/'}`;
    const declared = Number(req.headers['content-length'] ?? NaN);
    let nativeRequest: Request | BufferedRequest;
    if (hasBody && declared <= BUFFERED_BODY_LIMIT) {
      nativeRequest = new BufferedRequest(url, method, headers, await readAllBytes(req));
    } else {
      const streamed = new Request(url, {
        method,
        headers,
        ...(hasBody ? { body: Readable.toWeb(req) as ReadableStream, duplex: 'half' } : {}),
      });
      // A function may answer before reading a streamed body (413 by Content-Length, 401): read
      // the rest once the answer is out, so the client can finish sending and read it.
      if (hasBody) {
        res.once('finish', () => {
          if (!req.complete && streamed.body !== null && !streamed.bodyUsed) void discard(streamed.body, req);
        });
      }
      nativeRequest = streamed;
    }
    const request = new HttpRequest({ nativeRequest, params } as HttpRequestInit);
    const result = await (registration.handler as HttpFunction)(request, contextFor(registration));
    if (!hasBody) req.resume();
    if (writeSimpleResponse(result, res, method)) return;
    const response = result instanceof HttpResponse ? result : new HttpResponse(result ?? {});
    res.writeHead(response.status ?? 200, Object.fromEntries(response.headers.entries()));
    if (method === 'HEAD' || response.body === null) {
      res.end();
      return;
    }
    await pipeline(Readable.fromWeb(response.body), res);
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 7071, options.host ?? '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://${options.host ?? '127.0.0.1'}:${port}`;
  baseUrl = url;
  log.info(
    { url, functions: registrations.map((registration) => registration.name) },
    'local runtime listening',
  );

  return {
    url,
    port,
    registrations,
    runTimer: (name) => runTimer(name),
    async close() {
      for (const cron of crons) cron.stop();
      await Promise.allSettled(running.values());
      server.closeIdleConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * Writes a plain response (no body, a string, bytes or `jsonBody`) directly, as the host would;
 * anything else (streams, cookies, HttpResponse objects) goes through the library's HttpResponse.
 * Returns false when it did not write.
 */
function writeSimpleResponse(result: unknown, res: http.ServerResponse, method: string): boolean {
  if (
    result instanceof HttpResponse ||
    (result !== undefined && typeof result !== 'object') ||
    result === null
  ) {
    return false;
  }
  const init = (result ?? {}) as HttpResponseInit;
  if (init.cookies !== undefined) return false;
  let body: string | Uint8Array | undefined;
  const headers = headerRecord(init.headers);
  if (init.jsonBody !== undefined) {
    body = JSON.stringify(init.jsonBody);
    headers['content-type'] ??= 'application/json';
  } else if (init.body === undefined || init.body === null) {
    body = undefined;
  } else if (typeof init.body === 'string' || init.body instanceof Uint8Array) {
    body = init.body;
  } else {
    return false;
  }
  if (body !== undefined && method !== 'HEAD') {
    headers['content-length'] ??= String(typeof body === 'string' ? Buffer.byteLength(body) : body.length);
  }
  res.writeHead(init.status ?? 200, headers);
  res.end(method === 'HEAD' ? undefined : body);
  return true;
}

/** Response headers as one record with lower-case names (a plain object is read directly). */
function headerRecord(init: HttpResponseInit['headers']): Record<string, string> {
  const headers: Record<string, string> = {};
  if (init === undefined) return headers;
  const entries =
    init instanceof Headers || Array.isArray(init) ? new Headers(init).entries() : Object.entries(init);
  for (const [name, value] of entries) headers[name.toLowerCase()] = String(value);
  return headers;
}

/**
 * Lines to stdout, written together once per turn of the event loop rather than one write per
 * line (a busy runtime logs a line per request); what is still pending is written when the
 * process exits.
 */
function stdoutLines(): (line: string) => void {
  let pending: string[] = [];
  const flush = () => {
    const text = pending.join('');
    pending = [];
    process.stdout.write(text);
  };
  process.once('exit', () => {
    if (pending.length > 0) writeSync(process.stdout.fd, pending.join(''));
  });
  return (line) => {
    if (pending.length === 0) setImmediate(flush);
    pending.push(line + '\n');
  };
}

/** Reads and drops what is left of a request body, up to 64 MiB; past that, drops the connection. */
async function discard(body: ReadableStream<Uint8Array>, req: http.IncomingMessage): Promise<void> {
  let size = 0;
  try {
    for await (const chunk of body) {
      size += chunk.length;
      if (size > 64 * 1024 * 1024) break;
    }
  } catch {
    // The client went away; nothing to answer.
  }
  if (!req.complete) req.destroy();
}

/** `%NAME%` in a binding is an app setting, as on the host. */
function resolveSetting(value: string): string {
  return value.replace(/%([^%]+)%/g, (_match, name: string) => {
    const setting = process.env[name];
    if (setting === undefined || setting === '') throw new Error(`app setting ${name} is not set`);
    return setting;
  });
}

function sendJson(res: http.ServerResponse, status: number, code: string, message: string): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ error: { code, message } }));
}
