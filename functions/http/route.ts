import type { FunctionInput, HttpRequest, HttpResponseInit } from '@azure/functions';

import { MAX_JSON_DEPTH } from '#shared/json';
import { InvalidArgumentError } from '#shared/protocol/errors';
import type { Method, OperationInput, RouteSpec } from '#shared/protocol/spec';

import { parseJsonBody } from '../jsonBody';
import { requireAdmin } from './admin';
import { type AuthenticatedCall, type Call, httpHandler, registerHttp, type RouteHandler } from './pipeline';
import { parseQuery, readBody } from './request';

/**
 * The one way a route validates its request: by its spec (shared/protocol/). For the operation of
 * the request's method, in this order: the admin check (403, before anything is read), the route's
 * own `before` check (501 for a part that is off), the body's
 * size (413 whatever else is wrong with it), the path parameters, the query, then the body's JSON
 * syntax, nesting and shape (400 naming the field). The handler gets the parsed input and only
 * calls `shared/` and shapes the answer.
 */

type CallOf<Operation> = Operation extends { auth: 'none' } ? Call : AuthenticatedCall;

export type SpecHandlers<R extends RouteSpec> = {
  [M in keyof R['operations'] & Method]: (
    input: OperationInput<R, M>,
    request: HttpRequest,
    call: CallOf<R['operations'][M]>,
  ) => Promise<HttpResponseInit>;
};

/** A route's handler made from its spec; it carries the spec for whoever reads the registrations. */
export type SpecRouteHandler<R extends RouteSpec> = RouteHandler & { readonly spec: R };

/** The first problem of a parse, as the 400 naming its field. */
function invalid(
  issues: readonly { path: PropertyKey[]; message: string }[],
  fallback: string,
  fields: Readonly<Record<string, string>> = {},
): never {
  const issue = issues[0];
  const name = String(issue?.path[0] ?? fallback);
  throw new InvalidArgumentError(fields[name] ?? name, issue?.message ?? 'is invalid');
}

export interface SpecHandlerOptions {
  /**
   * Runs before anything of the request is read, after the admin check: a route of a part that
   * may be off answers 501 `not_configured` whatever its input (docs/api.md).
   */
  readonly before?: (call: AuthenticatedCall) => void;
}

export function specHandler<R extends RouteSpec>(
  spec: R,
  handlers: SpecHandlers<R>,
  options: SpecHandlerOptions = {},
): SpecRouteHandler<R> {
  const operations = Object.entries(spec.operations);
  const anonymous = operations.filter(([, operation]) => operation?.auth === 'none').length;
  if (anonymous !== 0 && anonymous !== operations.length) {
    throw new Error(`route ${spec.route}: its operations are all anonymous or none is`);
  }
  const served = Object.keys(handlers).sort().join();
  if (served !== Object.keys(spec.operations).sort().join()) {
    throw new Error(`route ${spec.route}: the handlers (${served}) are not the spec's operations`);
  }
  const paramNames = Object.keys(spec.params?.shape ?? {});
  const wrapped = Object.fromEntries(
    Object.entries(handlers as Record<string, SpecHandlers<R>[keyof SpecHandlers<R>]>).map(
      ([method, handler]) => {
        const operation = spec.operations[method as Method];
        if (operation === undefined) throw new Error(`route ${spec.route}: no operation ${method}`);
        const run = async (request: HttpRequest, call: Call) => {
          if (operation.auth === 'admin') {
            requireAdmin(call as AuthenticatedCall, operation.adminWhat ?? 'these routes');
          }
          options.before?.(call as AuthenticatedCall);
          const body = operation.body;
          const bytes =
            body === undefined
              ? undefined
              : await readBody(
                  request,
                  body.kind === 'bytes' && body.limitSetting === 'maxValueBytes'
                    ? (body.limitFromSetting ?? ((value: number) => value))(
                        call.services.config.maxValueBytes,
                      )
                    : body.limit,
                );
          let params: unknown = {};
          if (spec.params !== undefined) {
            const given = Object.fromEntries(paramNames.map((name) => [name, request.params[name] ?? '']));
            const parsed = spec.params.safeParse(given);
            if (!parsed.success) invalid(parsed.error.issues, 'path', spec.paramFields);
            params = parsed.data;
          }
          const query = operation.query === undefined ? {} : parseQuery(request, operation.query);
          let parsedBody: unknown;
          if (body !== undefined && bytes !== undefined) {
            parsedBody =
              body.kind === 'bytes'
                ? bytes
                : parseJsonBody(bytes, body.schema, {
                    emptyIsObject: body.emptyIsObject === true,
                    ...(body.wholeField === undefined ? {} : { wholeField: body.wholeField }),
                    ...(body.wrapDepth === undefined ? {} : { maxDepth: MAX_JSON_DEPTH + body.wrapDepth }),
                  });
          }
          const input = { params, query, body: parsedBody } as OperationInput<R, keyof R['operations']>;
          return (handler as (i: typeof input, r: HttpRequest, c: Call) => Promise<HttpResponseInit>)(
            input,
            request,
            call,
          );
        };
        return [method, run];
      },
    ),
  );
  const handler =
    anonymous === 0 ? httpHandler(spec.name, wrapped) : httpHandler(spec.name, wrapped, { anonymous: true });
  return Object.assign(handler, { spec });
}

/** Registers a spec's route with its handler (every method, so that the handler answers 405). */
export function registerRoute<R extends RouteSpec>(
  handler: SpecRouteHandler<R>,
  extraInputs: FunctionInput[] = [],
): void {
  registerHttp(handler.spec.name, handler.spec.route, handler, extraInputs);
}
