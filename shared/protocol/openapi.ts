import { z } from 'zod';

import { ERROR_ANSWERS, REQUEST_ID_HEADER as REQUEST_ID, REQUEST_ID_PARAMETER } from './errorAnswers.js';
import type { AnswerSpec, Auth, HeaderSpec, Method, OperationSpec, RouteSpec } from './spec.js';

/**
 * The OpenAPI 3.1 paths of the route specs, generated with zod's own JSON Schema conversion
 * (`z.toJSONSchema`, draft 2020-12, the dialect of OpenAPI 3.1). A schema with an `id` in its
 * metadata becomes one component (`#/components/schemas/<id>`), shared by every operation that
 * uses it. Answers are converted as zod outputs them, requests as zod takes them: when the two
 * differ for a component (a default, an object zod would strip unknown fields of), the request's
 * is `<id>Input`. What every operation of a kind answers (400 for a path that does not decode, 401
 * and 503 when authenticated, 403 for admins only, 413 with a body, 500) and the request id are
 * added here, once, and so are the components every operation shares: the error answers
 * (./errorAnswers.ts), the request id header and parameter, and the security schemes.
 */

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

/** The path item keys of operations, in the order the document lists them. */
export const OPERATION_METHODS = ['get', 'head', 'put', 'post', 'patch', 'delete', 'options'] as const;

const ERROR_RESPONSES: Readonly<Record<number, string>> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  409: 'Conflict',
  412: 'PreconditionFailed',
  413: 'PayloadTooLarge',
  422: 'MissingObjects',
  500: 'InternalError',
  501: 'NotConfigured',
  503: 'StorageUnavailable',
};

/** The name of the usual error answer of a status (`#/components/responses/<name>`). */
export function errorResponseName(status: number): string {
  const name = ERROR_RESPONSES[status];
  if (name === undefined) throw new Error(`no error answer is documented for status ${status}`);
  return name;
}

function errorResponseRef(name: string): JsonObject {
  if (!(name in ERROR_ANSWERS)) throw new Error(`no error answer is named ${name}`);
  return ref(`#/components/responses/${name}`);
}

/** The error statuses every operation of this access (and with a body or not) answers. */
export function impliedErrors(auth: Auth, hasBody: boolean): number[] {
  return [
    // Any path whose percent-encoding does not decode (e.g. `%FF`) is 400, on every route.
    400,
    ...(auth === 'none' ? [] : [401, 503]),
    ...(auth === 'admin' ? [403] : []),
    ...(hasBody ? [413] : []),
    500,
  ];
}

export const ADMIN_NOTE = 'Admin only: a credential without the admin role gets 403.';

const ref = (pointer: string): JsonObject => ({ $ref: pointer });
const REQUEST_ID_HEADER: JsonObject = { 'x-request-id': ref('#/components/headers/RequestId') };
const BYTES: JsonObject = { type: 'string', contentMediaType: 'application/octet-stream' };

/**
 * A route template as the OpenAPI path it is documented under: `{*name}` and `{**name}`
 * (catch-all) as `{name}`; the catch-all's name, if any. A segment with braces that is not one
 * parameter has no OpenAPI form: it throws.
 */
export function openApiPath(route: string, routePrefix: string): { path: string; restOfPath: string | null } {
  let restOfPath: string | null = null;
  const segments = route
    .split('/')
    .filter((segment) => segment !== '')
    .map((segment) => {
      const parameter = /^\{(\*{1,2})?([A-Za-z_][A-Za-z0-9_]*)\}$/.exec(segment);
      if (parameter === null) {
        if (/[{}]/.test(segment))
          throw new Error(`route ${route}: no OpenAPI path for the segment ${segment}`);
        return segment;
      }
      if (parameter[1] !== undefined) restOfPath = parameter[2] ?? null;
      return `{${parameter[2] ?? ''}}`;
    });
  return { path: `/${[routePrefix, ...segments].filter(Boolean).join('/')}`, restOfPath };
}

type Io = 'input' | 'output';

/** Converts zod schemas, collecting the components they reference. */
class SchemaWriter {
  readonly components: Record<string, JsonObject> = {};
  private readonly outputs = new Map<string, string>();

  convert(schema: z.ZodType, io: Io): JsonObject {
    const converted = z.toJSONSchema(schema, {
      io,
      target: 'draft-2020-12',
      unrepresentable: 'any',
    }) as unknown as JsonObject;
    const { $defs, ...rest } = converted;
    delete rest['$schema'];
    const names = new Map<string, string>();
    for (const [id, definition] of Object.entries(($defs ?? {}) as Record<string, JsonObject>)) {
      const text = JSON.stringify(definition);
      const seen = this.outputs.get(id);
      let name = id;
      if (io === 'output') {
        if (seen !== undefined && seen !== text) throw new Error(`schema ${id} converts in two ways`);
        this.outputs.set(id, text);
      } else if (seen !== undefined && seen !== text) {
        name = `${id}Input`;
      }
      names.set(id, name);
      this.components[name] = definition;
    }
    const renamed = renameRefs(rest, names) as JsonObject;
    for (const [id, name] of names) {
      this.components[name] = renameRefs(this.components[name] ?? {}, names) as JsonObject;
      if (id !== name && this.components[id] === undefined) delete this.components[id];
    }
    return renamed;
  }
}

function renameRefs(value: Json, names: ReadonlyMap<string, string>): Json {
  if (Array.isArray(value)) return value.map((item) => renameRefs(item, names));
  if (typeof value !== 'object' || value === null) return value;
  const result: JsonObject = {};
  for (const [key, inner] of Object.entries(value)) {
    if (key === '$ref' && typeof inner === 'string' && inner.startsWith('#/$defs/')) {
      const id = inner.slice('#/$defs/'.length);
      result[key] = `#/components/schemas/${names.get(id) ?? id}`;
    } else result[key] = renameRefs(inner, names);
  }
  return result;
}

/** The properties of an object schema one by one: schema, description, and whether required. */
function propertiesOf(writer: SchemaWriter, object: z.ZodObject, io: Io) {
  const converted = writer.convert(object, io);
  const properties = (converted['properties'] ?? {}) as Record<string, JsonObject>;
  const required = new Set((converted['required'] ?? []) as string[]);
  return Object.entries(properties).map(([name, schema]) => {
    const { description, ...rest } = schema;
    return {
      name,
      schema: rest,
      description: typeof description === 'string' ? description : undefined,
      required: required.has(name),
    };
  });
}

function headerOf(writer: SchemaWriter, spec: HeaderSpec): JsonObject {
  return {
    description: spec.description,
    required: spec.optional !== true,
    schema: writer.convert(spec.schema, 'output'),
  };
}

function answerOf(writer: SchemaWriter, answer: AnswerSpec): JsonObject {
  const headers: JsonObject = { ...REQUEST_ID_HEADER };
  for (const [name, spec] of Object.entries(answer.headers ?? {})) headers[name] = headerOf(writer, spec);
  const result: JsonObject = { description: answer.description, headers };
  if (answer.body === 'bytes') result['content'] = { 'application/octet-stream': { schema: BYTES } };
  else if (answer.body !== undefined)
    result['content'] = { 'application/json': { schema: writer.convert(answer.body, 'output') } };
  return result;
}

function operationOf(writer: SchemaWriter, spec: OperationSpec, phase: Io): JsonObject {
  if (phase === 'output') {
    // Answers first, so that the request side knows each component's answer form.
    for (const answer of Object.values(spec.answers)) answerOf(writer, answer);
    return {};
  }
  const errors = new Map<number, JsonObject>();
  for (const error of spec.errors ?? []) {
    const status = typeof error === 'number' ? error : error.status;
    if (errors.has(status)) throw new Error(`${spec.operationId}: status ${status} is listed twice`);
    errors.set(
      status,
      errorResponseRef(typeof error === 'number' ? errorResponseName(error) : error.response),
    );
  }
  for (const status of impliedErrors(spec.auth, spec.body !== undefined)) {
    if (!errors.has(status)) errors.set(status, errorResponseRef(errorResponseName(status)));
  }
  const responses: JsonObject = {};
  for (const [status, answer] of Object.entries(spec.answers)) responses[status] = answerOf(writer, answer);
  for (const [status, answer] of [...errors].sort(([a], [b]) => a - b)) responses[String(status)] = answer;

  const parameters: Json[] = [];
  if (spec.query !== undefined) {
    for (const property of propertiesOf(writer, spec.query, 'input')) {
      parameters.push({
        name: property.name,
        in: 'query',
        required: property.required,
        ...(property.description === undefined ? {} : { description: property.description }),
        schema: property.schema,
      });
    }
  }
  for (const [name, header] of Object.entries(spec.headers ?? {})) {
    parameters.push({
      name,
      in: 'header',
      required: false,
      description: header.description,
      schema: writer.convert(header.schema, 'input'),
    });
  }
  parameters.push(ref('#/components/parameters/RequestId'));

  const description =
    spec.auth === 'admin' ? [spec.description, ADMIN_NOTE].filter(Boolean).join('\n\n') : spec.description;
  const body = spec.body;
  let requestBody: JsonObject | undefined;
  if (body !== undefined) {
    const limit = `At most ${body.limit} bytes (else 413, nothing written).`;
    requestBody =
      body.kind === 'bytes'
        ? {
            description: `${body.description} ${limit}`,
            required: body.required ?? true,
            content:
              body.documentedAs === undefined
                ? { 'application/octet-stream': { schema: BYTES } }
                : {
                    [body.documentedAs.mediaType]: {
                      schema: writer.convert(body.documentedAs.schema, 'input'),
                    },
                  },
          }
        : {
            description: `${body.description} ${limit}`,
            required: body.emptyIsObject !== true,
            content: { 'application/json': { schema: writer.convert(body.schema, 'input') } },
          };
  }
  return {
    operationId: spec.operationId,
    summary: spec.summary,
    ...(description === undefined ? {} : { description }),
    tags: [spec.tag],
    ...(spec.auth === 'none' ? { security: [] } : {}),
    parameters,
    ...(requestBody === undefined ? {} : { requestBody }),
    responses,
  };
}

function pathItemOf(writer: SchemaWriter, spec: RouteSpec, routePrefix: string, phase: Io): JsonObject {
  const { restOfPath } = openApiPath(spec.route, routePrefix);
  const item: JsonObject = {};
  if (phase === 'input' && spec.params !== undefined) {
    item['parameters'] = propertiesOf(writer, spec.params, 'input').map((property) => ({
      name: property.name,
      in: 'path',
      required: true,
      ...(property.description === undefined ? {} : { description: property.description }),
      schema: property.schema,
      // OpenAPI has no parameter spanning several segments; this marks the route's `{*name}`
      // catch-all, the rest of the path, `/` included (each segment percent-encoded on its own).
      ...(property.name === restOfPath ? { 'x-cairn-rest-of-path': true } : {}),
    }));
  }
  for (const method of OPERATION_METHODS) {
    const operation = spec.operations[method.toUpperCase() as Method];
    if (operation !== undefined) item[method] = operationOf(writer, operation, phase);
  }
  return item;
}

/** How a caller authenticates (`#/components/securitySchemes`). */
const SECURITY_SCHEMES: JsonObject = {
  apiKey: {
    type: 'http',
    scheme: 'bearer',
    description:
      "An API key of a tenant: `Authorization: Bearer <key>`. The service keeps only the key's SHA-256; a key may carry the admin role.",
  },
  entraId: {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'JWT',
    description:
      'A Microsoft Entra ID access token for the service, checked in-process (signature, exp, nbf, issuer, audience). The tenant is a claim of the token (default `oid`); the app role `Cairn.Admin` grants admin.',
  },
};

/** The document's paths of `routes` and its components: their schemas and the shared parts. */
export function generateOpenApi(
  routes: readonly RouteSpec[],
  routePrefix = 'api',
): { paths: Record<string, JsonObject>; components: Record<string, JsonObject> } {
  const writer = new SchemaWriter();
  for (const spec of routes) pathItemOf(writer, spec, routePrefix, 'output');
  const responses: JsonObject = {};
  for (const [name, answer] of Object.entries(ERROR_ANSWERS)) responses[name] = answerOf(writer, answer);
  const paths: Record<string, JsonObject> = {};
  for (const spec of routes) {
    const { path } = openApiPath(spec.route, routePrefix);
    if (paths[path] !== undefined) throw new Error(`two route specs for ${path}`);
    paths[path] = pathItemOf(writer, spec, routePrefix, 'input');
  }
  const parameter = REQUEST_ID_PARAMETER;
  return {
    paths,
    components: {
      securitySchemes: SECURITY_SCHEMES,
      schemas: writer.components,
      responses,
      headers: { RequestId: headerOf(writer, REQUEST_ID) },
      parameters: {
        RequestId: {
          name: 'x-request-id',
          in: 'header',
          required: false,
          description: parameter.description,
          schema: writer.convert(parameter.schema, 'input'),
        },
      },
    },
  };
}
