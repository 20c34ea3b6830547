import type { z } from 'zod';

/**
 * A route of Cairn's HTTP API as data: its template, the schemas of its path parameters, and per
 * method who may call it, its query, headers, body (with its size limit), answers by status and
 * the errors it lists. The functions validate requests with these schemas (functions/http/route.ts),
 * the OpenAPI document is generated from them ({@link ./openapi.ts}), and the client takes its
 * types from them. This folder depends on zod only.
 */

/** Who may call an operation: anyone, any tenant's credential, or an admin credential. */
export type Auth = 'none' | 'tenant' | 'admin';

export type Method = 'GET' | 'HEAD' | 'PUT' | 'POST' | 'PATCH' | 'DELETE' | 'OPTIONS';

/** A header of a request or an answer, documented; `optional` unless required. */
export interface HeaderSpec {
  readonly description: string;
  readonly schema: z.ZodType;
  /** An answer header is required unless optional; a request header is always optional. */
  readonly optional?: boolean;
}

/** An answer that is not an error: a JSON body, bytes, or none (204, HEAD). */
export interface AnswerSpec {
  readonly description: string;
  readonly body?: z.ZodType | 'bytes';
  readonly headers?: Readonly<Record<string, HeaderSpec>>;
}

/**
 * An error answer the operation lists, besides those every operation of its kind has (400 for a
 * path that does not decode, 401 and 503 when authenticated, 403 for admins only, 413 with a body,
 * 500): a status (its usual answer of `#/components/responses`), or a status with the name of
 * another answer there (a 409 whose codes are not only `conflict`).
 */
export type ErrorSpec = number | { readonly status: number; readonly response: string };

/** A JSON body: parsed, its nesting bounded, and validated with `schema`. */
export interface JsonBodySpec<S extends z.ZodType = z.ZodType> {
  readonly kind: 'json';
  readonly description: string;
  readonly schema: S;
  /** The largest body in bytes; larger ones are refused with 413 before anything else is checked. */
  readonly limit: number;
  /** An empty body reads as `{}` (the body is then optional). */
  readonly emptyIsObject?: boolean;
  /** The field a 400 names when the body as a whole is not what `schema` takes; default `body`. */
  readonly wholeField?: string;
  /**
   * Levels the body wraps around bodies of other routes (a batch: its array and each operation),
   * allowed past `MAX_JSON_DEPTH` so that each of those may nest as deep as on its own route.
   */
  readonly wrapDepth?: number;
}

/** A body of bytes, handed to the handler as read. */
export interface BytesBodySpec {
  readonly kind: 'bytes';
  readonly description: string;
  /** The largest body in bytes (the default, when `limitSetting` makes it a setting). */
  readonly limit: number;
  /** The configuration value that replaces `limit` in a deployment (its setting is documented). */
  readonly limitSetting?: 'maxValueBytes';
  /** The limit as a function of that setting's value (default: the value itself). */
  readonly limitFromSetting?: (setting: number) => number;
  /**
   * The media type and schema the document gives these bytes, when the handler parses them itself
   * (MCP's JSON-RPC messages); default `application/octet-stream`.
   */
  readonly documentedAs?: { readonly mediaType: string; readonly schema: z.ZodType };
  /** Default true; false when an empty body is allowed. */
  readonly required?: boolean;
}

export type BodySpec = JsonBodySpec | BytesBodySpec;

export interface OperationSpec {
  /** Unique in the document; the name client generators give the call. */
  readonly operationId: string;
  readonly summary: string;
  readonly description?: string;
  readonly tag: string;
  readonly auth: Auth;
  /** For `admin`: what the 403 message says are for admins ("<admin> are for admins"). */
  readonly adminWhat?: string;
  /** The query parameters; a property's description documents it. */
  readonly query?: z.ZodObject;
  /** Request headers the operation reads (documented; the handler reads them). */
  readonly headers?: Readonly<Record<string, HeaderSpec>>;
  readonly body?: BodySpec;
  readonly answers: Readonly<Record<number, AnswerSpec>>;
  readonly errors?: readonly ErrorSpec[];
}

export interface RouteSpec {
  /** The function's name, as registered. */
  readonly name: string;
  /** The route template as registered, without the route prefix (`kv/{*key}`). */
  readonly route: string;
  /** The path parameters, by the names of the template; a property's description documents it. */
  readonly params?: z.ZodObject;
  /**
   * The field a 400 names when a path parameter is refused, by parameter, where it is not the
   * parameter's own name (the session routes' `sid` is the field `sessionId`).
   */
  readonly paramFields?: Readonly<Record<string, string>>;
  readonly operations: Readonly<Partial<Record<Method, OperationSpec>>>;
}

/** A route spec, typed as written (so that handlers and clients infer its schemas). */
export function route<const R extends RouteSpec>(spec: R): R {
  return spec;
}

/** The parsed input of one operation of a route. */
export interface OperationInput<R extends RouteSpec, M extends keyof R['operations']> {
  readonly params: R['params'] extends z.ZodObject ? z.output<R['params']> : Record<string, never>;
  readonly query: R['operations'][M] extends { query: infer Q extends z.ZodObject }
    ? z.output<Q>
    : Record<string, never>;
  readonly body: R['operations'][M] extends { body: infer B }
    ? B extends JsonBodySpec<infer S>
      ? z.output<S>
      : B extends BytesBodySpec
        ? Buffer
        : undefined
    : undefined;
}

/** The JSON body of the answer `status` of an operation, as the client reads it. */
export type AnswerBody<
  R extends RouteSpec,
  M extends keyof R['operations'],
  S extends number,
> = R['operations'][M] extends { answers: infer A }
  ? A extends Record<S, { body: infer T extends z.ZodType }>
    ? z.output<T>
    : never
  : never;
