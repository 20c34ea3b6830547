import { randomUUID } from 'node:crypto';
import { writeSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

import type { HttpRequest, InvocationContext } from '@azure/functions';

import { createLogger, errorSummary, type Logger } from '../../shared/logging';
import { DURABLE_PREFIX, serveDurableApi } from './durableApi';
import { LocalDurableHost } from './durableHost';
import { hasHostKey, isServedHost } from './hostAccess';
import { invokeHttpFunction, sendJson } from './httpInvocation';
import { InvocationContexts } from './invocations';
import { loadApp, type Registration } from './registrations';
import { drainAfterAnswer, readBodyUpTo } from './requestBody';
import { compareRanks, compileRoute, type RouteTemplate } from './routeTemplate';
import { TimerScheduler } from './timers';

/**
 * A small stand-in for the Functions host, for development and tests only: it serves the app's own
 * registrations (captured by {@link loadRegistrations}, never declared again here), HTTP triggers
 * under `/api/<route>`, timer triggers on their NCRONTAB schedules, also invocable with
 * `POST /admin/functions/<name>` (202, run in the background) as on the host, and durable
 * orchestrations with the durable client's HTTP API. Production runs on the Functions host.
 *
 * As the host, it keeps its own endpoints (the durable webhooks, the admin API) to callers with the
 * master key, and bounds what it reads of their bodies. It also serves only requests whose `Host`
 * names a loopback address, and answers 400 for a path whose percent-encoding does not decode
 * (invalid UTF-8 such as `%FF` or overlong `%C0%AE`), before any function sees it.
 */

export interface LocalRuntimeOptions {
  /** The app's entry module (package.json `main`), compiled. */
  readonly entry: string;
  /**
   * The host's master key: the durable webhooks and `POST /admin/functions/<name>` answer 401
   * without it (`x-functions-key` header or `code` query parameter), as on the host.
   */
  readonly hostKey: string;
  readonly port?: number;
  /** The address to listen on (default 127.0.0.1); requests are served only under loopback names or this one. */
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
/** `POST /admin/functions/<name>` takes a small JSON body (`{"input": ""}`), which it ignores. */
const ADMIN_BODY_LIMIT = 64 * 1024;
const SERVED_TRIGGERS = ['httpTrigger', 'timerTrigger', 'orchestrationTrigger', 'activityTrigger'];

type HttpFunction = (request: HttpRequest, context: InvocationContext) => Promise<unknown>;

export async function startLocalRuntime(options: LocalRuntimeOptions): Promise<LocalRuntime> {
  const write = options.write ?? stdoutLines();
  const log = createLogger('info', (line) => write(line), { component: 'local-runtime' });
  const { registrations, hooks } = loadApp(options.entry);
  // App-start hooks run before anything is served, as the host runs them when the worker starts;
  // one that throws is the app refusing to start (e.g. keys that do not match the stored data).
  for (const hook of hooks.filter((candidate) => candidate.name === 'appStart')) {
    await hook.callback({ hookData: {} });
  }
  for (const registration of registrations) {
    if (!SERVED_TRIGGERS.includes(registration.trigger.type)) {
      log.warn(
        { function: registration.name, trigger: registration.trigger.type },
        'trigger type not served locally',
      );
    }
  }
  const durable = new LocalDurableHost(registrations, log, write);
  const contexts = new InvocationContexts(durable, write, options.hostKey);
  const listenHost = options.host ?? '127.0.0.1';
  const timers = new TimerScheduler(registrations, contexts, log);
  const routes = new HttpRoutes(registrations);

  const dispatch = async (req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    const method = (req.method ?? 'GET').toUpperCase();
    const rawPath = (req.url ?? '/').split('?')[0] ?? '/';
    if (!isServedHost(req, listenHost)) {
      drainAfterAnswer(req, res);
      return sendError(res, 400, 'invalid_argument', 'the Host header must name a loopback address');
    }
    if (!decodes(rawPath)) {
      drainAfterAnswer(req, res);
      return sendError(res, 400, 'invalid_argument', 'the path is not valid percent-encoded UTF-8');
    }
    const durablePath = rawPath.startsWith(DURABLE_PREFIX);
    const admin = /^\/admin\/functions\/([^/]+)$/.exec(rawPath);
    if (durablePath || admin !== null || rawPath.startsWith('/admin/')) {
      if (!hasHostKey(req, options.hostKey)) {
        drainAfterAnswer(req, res);
        return sendError(res, 401, 'unauthorized', 'the host key is required (x-functions-key or code)');
      }
    }
    if (durablePath) {
      return serveDurableApi(durable, rawPath.slice(DURABLE_PREFIX.length), method, req, res);
    }
    if (admin !== null && method === 'POST') {
      const name = decodeURIComponent(admin[1] ?? '');
      if ((await readBodyUpTo(req, ADMIN_BODY_LIMIT)) === undefined) {
        drainAfterAnswer(req, res);
        return sendJson(res, 413, 'payload_too_large', `the body is at most ${ADMIN_BODY_LIMIT} bytes`);
      }
      if (!timers.has(name)) return sendJson(res, 404, 'not_found', `no timer function ${name}`);
      void timers.run(name);
      res.writeHead(202).end();
      return;
    }
    if (rawPath !== ROUTE_PREFIX && !rawPath.startsWith(ROUTE_PREFIX + '/')) {
      drainAfterAnswer(req, res);
      return sendJson(res, 404, 'not_found', 'no such route; Cairn serves /api/...');
    }
    const found = routes.find(rawPath.slice(ROUTE_PREFIX.length + 1), method);
    if (found.kind === 'matched') {
      const { registration, params } = found;
      const context = contexts.contextFor(registration);
      return invokeHttpFunction(registration.handler as HttpFunction, context, params, req, res, method);
    }
    drainAfterAnswer(req, res);
    if (found.kind === 'wrong-method') {
      return sendJson(res, 405, 'method_not_allowed', `method ${method} is not allowed here`);
    }
    return sendJson(res, 404, 'not_found', 'no such route');
  };

  const server = await listen(dispatch, log, options.port ?? 7071, listenHost);
  const { port } = server.address() as AddressInfo;
  const url = `http://${listenHost}:${port}`;
  contexts.baseUrl = url;
  // As the host tells its worker: the durable client then calls the webhook URLs it is handed
  // (without it, the library points them at localhost:7071).
  process.env['WEBSITE_HOSTNAME'] = `${listenHost}:${port}`;
  log.info(
    { url, functions: registrations.map((registration) => registration.name) },
    'local runtime listening',
  );

  return {
    url,
    port,
    registrations,
    runTimer: (name) => timers.run(name),
    async close() {
      await timers.stop();
      server.closeIdleConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** True when every percent-escape of `rawPath` decodes, and to valid UTF-8. */
function decodes(rawPath: string): boolean {
  try {
    decodeURIComponent(rawPath);
    return true;
  } catch {
    return false;
  }
}

/** The error JSON with a request id, as the app's own answers carry one. */
function sendError(res: http.ServerResponse, status: number, code: string, message: string): void {
  res.setHeader('x-request-id', randomUUID());
  sendJson(res, status, code, message);
}

interface HttpRoute {
  readonly registration: Registration;
  readonly route: RouteTemplate;
  readonly methods: ReadonlySet<string>;
}

type RouteMatch =
  | { readonly kind: 'matched'; readonly registration: Registration; readonly params: Record<string, string> }
  | { readonly kind: 'wrong-method' }
  | { readonly kind: 'none' };

/** The HTTP triggers' routes, most specific first, as the host ranks them. */
class HttpRoutes {
  private readonly routes: HttpRoute[];

  constructor(registrations: readonly Registration[]) {
    this.routes = registrations
      .filter((registration) => registration.trigger.type === 'httpTrigger')
      .map((registration) => ({
        registration,
        route: compileRoute(registration.trigger.route ?? registration.name),
        methods: new Set(
          (registration.trigger.methods ?? ['GET', 'POST']).map((method) => method.toUpperCase()),
        ),
      }))
      .sort((a, b) => compareRanks(a.route.rank, b.route.rank));
  }

  /** The first route whose template matches `path` and that takes `method`. */
  find(path: string, method: string): RouteMatch {
    let pathMatched = false;
    for (const candidate of this.routes) {
      const params = candidate.route.match(path);
      if (params === null) continue;
      pathMatched = true;
      if (candidate.methods.has(method))
        return { kind: 'matched', registration: candidate.registration, params };
    }
    return pathMatched ? { kind: 'wrong-method' } : { kind: 'none' };
  }
}

async function listen(
  dispatch: (req: http.IncomingMessage, res: http.ServerResponse) => Promise<void>,
  log: Logger,
  port: number,
  host: string,
): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    dispatch(req, res).catch((error: unknown) => {
      log.error({ err: errorSummary(error) }, 'local runtime failed to answer');
      if (!res.headersSent) sendJson(res, 500, 'internal', 'the local runtime failed');
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return server;
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
