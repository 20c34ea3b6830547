import { randomUUID } from 'node:crypto';

import {
  app,
  type FunctionInput,
  type HttpRequest,
  type HttpResponseInit,
  type InvocationContext,
} from '@azure/functions';

import type { Principal } from '#shared/auth';
import { type Logger, processLogger, withLogSink } from '#shared/logging';
import { MethodNotAllowedError } from '#shared/protocol/errors';
import { REQUEST_ID_PATTERN } from '#shared/protocol/fields';
import { getServices, type Services } from '#shared/services';

import { errorResponse } from './errorResponse';

export type HttpMethod = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'OPTIONS';
const ALL_METHODS: HttpMethod[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

/** What a route handler gets besides the request. */
export interface Call {
  readonly requestId: string;
  readonly log: Logger;
  readonly services: Services;
  /** The invocation, for the few handlers that need its bindings (e.g. the durable client). */
  readonly context: InvocationContext;
}

export interface AuthenticatedCall extends Call {
  readonly principal: Principal;
}

export type HttpHandler = (request: HttpRequest, context: InvocationContext) => Promise<HttpResponseInit>;

/**
 * A route's handler, carrying the methods it serves. Routes register every method (see
 * {@link registerHttp}), so the registration alone does not say which ones the route answers;
 * this does, for whoever reads the registrations (the test that holds the OpenAPI document to them).
 */
export interface RouteHandler extends HttpHandler {
  readonly methods: readonly HttpMethod[];
}

type RouteHandlers<C> = Partial<
  Record<HttpMethod, (request: HttpRequest, call: C) => Promise<HttpResponseInit>>
>;

/** Routes an invocation's log lines to the host's logger of that invocation, by level. */
export function logSinkOf(context: InvocationContext) {
  return (line: string, level: number) => {
    if (level >= 50) context.error(line);
    else if (level >= 40) context.warn(line);
    else if (level >= 30) context.info(line);
    else context.debug(line);
  };
}

/**
 * Builds the handler of one route: request id, per-invocation logger, method dispatch (405 with
 * `Allow` for the others), authentication (unless `anonymous`), and the single error mapping. The
 * route's handlers only parse, call `shared/` and shape the answer.
 */
export function httpHandler(name: string, handlers: RouteHandlers<AuthenticatedCall>): RouteHandler;
export function httpHandler(
  name: string,
  handlers: RouteHandlers<Call>,
  options: { anonymous: true },
): RouteHandler;
export function httpHandler(
  name: string,
  handlers: RouteHandlers<AuthenticatedCall> | RouteHandlers<Call>,
  options: { anonymous?: boolean } = {},
): RouteHandler {
  const allowed = Object.keys(handlers) as HttpMethod[];
  const handle = async (request: HttpRequest, context: InvocationContext): Promise<HttpResponseInit> => {
    const started = performance.now();
    const offered = request.headers.get('x-request-id');
    const requestId = offered !== null && REQUEST_ID_PATTERN.test(offered) ? offered : randomUUID();
    const services = getServices();
    const root = processLogger(services.config.logLevel);
    const bindings: Record<string, string> = {
      invocationId: context.invocationId,
      function: name,
      requestId,
    };
    // The invocation's logger is made on first use (most requests only write the line at the end).
    let child: Logger | undefined;
    const log = () => (child ??= root.child({ ...bindings }));
    const call = {
      requestId,
      services,
      context,
      get log() {
        return log();
      },
    };
    let response: HttpResponseInit;
    try {
      const route = (handlers as RouteHandlers<AuthenticatedCall>)[request.method as HttpMethod];
      if (route === undefined) throw new MethodNotAllowedError(request.method, allowed);
      if (options.anonymous === true) {
        response = await (route as (r: HttpRequest, c: Call) => Promise<HttpResponseInit>)(request, call);
      } else {
        const principal = await services.authenticator.authenticate(request.headers.get('authorization'));
        bindings['tenant'] = principal.tenant;
        // Fail closed: nothing of a tenant is read or written before the encryption key check has
        // passed, and (keys configured) before the tenant is registered as holding sealed values,
        // whatever store the route uses. Remembered per process: a resolved promise after the first.
        await services.encryption.prepare(principal.tenant);
        response = await route(request, Object.assign(call, { principal }));
      }
    } catch (error) {
      response = errorResponse(error, log());
    }
    response.headers = {
      ...(response.headers as Record<string, string> | undefined),
      'x-request-id': requestId,
    };
    root.info(
      {
        ...bindings,
        method: request.method,
        status: response.status ?? 200,
        ms: Math.round(performance.now() - started),
      },
      'request',
    );
    return response;
  };
  const handler: HttpHandler = (request, context) =>
    withLogSink(context.invocationId, logSinkOf(context), () => handle(request, context));
  return Object.assign(handler, { methods: Object.freeze([...allowed]) });
}

/**
 * Registers a route with every method, so that the handler itself answers 405 for the wrong ones.
 * `extraInputs` are input bindings the handler reads from its context (e.g. a durable client).
 */
export function registerHttp(
  name: string,
  route: string,
  handler: HttpHandler,
  extraInputs: FunctionInput[] = [],
): void {
  app.http(name, { route, methods: ALL_METHODS, authLevel: 'anonymous', handler, extraInputs });
}
