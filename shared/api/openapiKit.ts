/**
 * Building blocks of Cairn's OpenAPI 3.1 document (`openapi.ts`): the few types the document needs
 * and one helper per operation. Documenting a route is one {@link operation} call naming who may
 * call it, its parameters, its body and its answers; what every operation of that kind answers as
 * well (400 for a path that does not decode, 401 and 503 when authenticated, 403 for admins only,
 * 413 with a body, 500, the request id)
 * is added here, so that it is written once and cannot be forgotten on a new route.
 *
 * Everything built here is plain JSON data: the document is served as it is. The routes declared
 * as specs (shared/protocol/) are documented by the generator there, which shares these rules.
 */

import { ADMIN_NOTE, errorResponseName, impliedErrors, type OPERATION_METHODS } from '../protocol/openapi';

export type Json = null | boolean | number | string | readonly Json[] | JsonObject;
export interface JsonObject {
  readonly [key: string]: Json;
}

/** A JSON Schema (2020-12, the dialect of OpenAPI 3.1). */
export type Schema = JsonObject;

/** Who may call an operation: anyone, any tenant's credential, or an admin credential. */
export type Access = 'anonymous' | 'tenant' | 'admin';

export { OPERATION_METHODS } from '../protocol/openapi';
export type OperationMethod = (typeof OPERATION_METHODS)[number];

/**
 * Error answers an operation may list; 400, 401, 403, 413, 500 and 503 are added by {@link operation}.
 * 501 (`not_configured`) is for the operations of a part that a deployment may leave off.
 */
export type CallerError = 400 | 403 | 404 | 409 | 412 | 413 | 422 | 501;

/**
 * An error answer other than its status's usual one: `response` names an answer of
 * `#/components/responses` (e.g. a 409 whose codes are not only `conflict`).
 */
export interface NamedError {
  readonly status: CallerError;
  readonly response: string;
}

export const namedError = (status: CallerError, response: string): NamedError => ({ status, response });

export const ref = (pointer: string): JsonObject => ({ $ref: pointer });
export const schemaRef = (name: string): JsonObject => ref(`#/components/schemas/${name}`);
const headerRef = (name: string): JsonObject => ref(`#/components/headers/${name}`);

/** The answer to any request carries its request id. */
export const REQUEST_ID_HEADER = { 'x-request-id': headerRef('RequestId') };

/** An error answer by status (`#/components/responses/...`). */
export function errorResponseRef(status: number): JsonObject {
  return ref(`#/components/responses/${errorResponseName(status)}`);
}

/** A JSON answer. `headers` are added to the request id; each is required unless it says otherwise. */
export function jsonAnswer(
  description: string,
  schema: Schema,
  headers: Readonly<Record<string, JsonObject>> = {},
): JsonObject {
  return {
    description,
    headers: { ...REQUEST_ID_HEADER, ...headers },
    content: { 'application/json': { schema } },
  };
}

/** An answer of raw bytes (`application/octet-stream`). */
export function bytesAnswer(
  description: string,
  headers: Readonly<Record<string, JsonObject>> = {},
): JsonObject {
  return {
    description,
    headers: { ...REQUEST_ID_HEADER, ...headers },
    content: {
      'application/octet-stream': {
        schema: { type: 'string', contentMediaType: 'application/octet-stream' },
      },
    },
  };
}

/** An answer without a body (204, or any answer to HEAD). */
export function emptyAnswer(
  description: string,
  headers: Readonly<Record<string, JsonObject>> = {},
): JsonObject {
  return { description, headers: { ...REQUEST_ID_HEADER, ...headers } };
}

/** A response header: `required` unless `optional`. */
export function header(description: string, schema: Schema, optional = false): JsonObject {
  return { description, required: !optional, schema };
}

export function pathParameter(
  name: string,
  description: string,
  schema: Schema,
  options: { restOfPath?: boolean } = {},
): JsonObject {
  return {
    name,
    in: 'path',
    required: true,
    description,
    schema,
    // OpenAPI has no parameter spanning several segments; this marks the route's `{*name}` catch-all,
    // the rest of the path, `/` included (each segment percent-encoded on its own).
    ...(options.restOfPath === true ? { 'x-cairn-rest-of-path': true } : {}),
  };
}

export function queryParameter(name: string, description: string, schema: Schema): JsonObject {
  return { name, in: 'query', required: false, description, schema };
}

export interface RequestBody {
  readonly mediaType: 'application/json' | 'application/octet-stream';
  readonly description: string;
  readonly schema: Schema;
  /** The largest body in bytes; larger ones are refused with 413 before anything else is checked. */
  readonly limitBytes: number;
  /** Default true; false when an empty body is allowed. */
  readonly required?: boolean;
}

export interface OperationSpec {
  /** Unique in the document; the name client generators give the call. */
  readonly operationId: string;
  readonly summary: string;
  readonly description?: string;
  readonly tag: string;
  readonly access: Access;
  readonly parameters?: readonly JsonObject[];
  readonly body?: RequestBody;
  /** The answers that are not errors, by status. */
  readonly answers: Readonly<Record<number, JsonObject>>;
  /**
   * The caller errors this operation can answer, besides those {@link operation} adds: a status
   * (its usual answer), or a {@link NamedError}.
   */
  readonly errors?: readonly (CallerError | NamedError)[];
}

/**
 * An OpenAPI operation. Adds the optional `x-request-id` parameter; the answers every operation of
 * its access has (401 and 503 when authenticated: the token's signing keys may be unreachable; 403
 * for admins only), 413 when it takes a body, and 500.
 */
export function operation(spec: OperationSpec): JsonObject {
  const errors = new Map<number, JsonObject>();
  for (const error of spec.errors ?? []) {
    const status = typeof error === 'number' ? error : error.status;
    if (errors.has(status)) throw new Error(`${spec.operationId}: status ${status} is listed twice`);
    errors.set(
      status,
      typeof error === 'number' ? errorResponseRef(error) : ref(`#/components/responses/${error.response}`),
    );
  }
  const implied = impliedErrors(spec.access === 'anonymous' ? 'none' : spec.access, spec.body !== undefined);
  for (const status of implied) if (!errors.has(status)) errors.set(status, errorResponseRef(status));
  const responses: Record<string, JsonObject> = {};
  for (const [status, answer] of Object.entries(spec.answers)) responses[status] = answer;
  for (const [status, answer] of [...errors].sort(([a], [b]) => a - b)) responses[String(status)] = answer;
  const body = spec.body;
  const description =
    spec.access === 'admin' ? [spec.description, ADMIN_NOTE].filter(Boolean).join('\n\n') : spec.description;
  return {
    operationId: spec.operationId,
    summary: spec.summary,
    ...(description === undefined ? {} : { description }),
    tags: [spec.tag],
    ...(spec.access === 'anonymous' ? { security: [] } : {}),
    parameters: [...(spec.parameters ?? []), ref('#/components/parameters/RequestId')],
    ...(body === undefined
      ? {}
      : {
          requestBody: {
            description: `${body.description} At most ${body.limitBytes} bytes (else 413, nothing written).`,
            required: body.required ?? true,
            content: { [body.mediaType]: { schema: body.schema } },
          },
        }),
    responses,
  };
}
