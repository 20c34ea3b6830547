import { createHash } from 'node:crypto';

/**
 * The fuzz test's request generator (test/e2e/fuzz.e2e.test.ts): from an OpenAPI document as the
 * app serves it, seeded cases for every operation of every path: path parameters with encoding and
 * Unicode edge cases, query parameters of the wrong type, malformed, mistyped, deeply nested,
 * oversize and mis-labelled bodies, and missing, malformed or other callers' credentials.
 */

type JsonObject = Record<string, unknown>;

const isObject = (value: unknown): value is JsonObject =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** mulberry32: a tiny seeded PRNG, enough to make every run with one seed send the same requests. */
export class Random {
  private state: number;

  constructor(readonly seed: number) {
    this.state = seed >>> 0;
  }

  /** A float in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  int(below: number): number {
    return Math.floor(this.next() * below);
  }

  pick<T>(items: readonly T[]): T {
    const item = items[this.int(items.length)];
    if (item === undefined) throw new Error('pick from an empty list');
    return item;
  }

  chance(probability: number): boolean {
    return this.next() < probability;
  }
}

/** Who a case authenticates as. */
export type Caller = 'tenant' | 'admin' | 'none' | 'malformed' | 'unknown';

export interface FuzzCase {
  readonly method: string;
  /** The request target exactly as sent (path and query, already encoded or deliberately not). */
  readonly path: string;
  /** The documented path the case was made for. */
  readonly route: string;
  readonly caller: Caller;
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: Buffer;
  /** Send the body without Content-Length (chunked). */
  readonly chunked?: boolean;
  /** What the case does, for failure messages. */
  readonly what: string;
}

export interface Operation {
  readonly method: string;
  readonly path: string;
  readonly admin: boolean;
  readonly anonymous: boolean;
  readonly parameters: readonly JsonObject[];
  readonly body?: { readonly mediaType: string; readonly schema: JsonObject; readonly limit: number };
}

const METHODS = ['get', 'head', 'put', 'post', 'patch', 'delete', 'options'];

/** Resolves a local `$ref` (`#/components/...`) of the document. */
function resolve(document: JsonObject, value: unknown): unknown {
  let current = value;
  for (let depth = 0; isObject(current) && typeof current['$ref'] === 'string' && depth < 20; depth++) {
    const pointer = current['$ref'].replace(/^#\//, '').split('/');
    let target: unknown = document;
    for (const token of pointer) {
      target = isObject(target) ? target[token.replaceAll('~1', '/').replaceAll('~0', '~')] : undefined;
    }
    current = target;
  }
  return current;
}

/** Every operation of the document, with its parameters and body (limit from its description). */
export function operationsOf(document: JsonObject): Operation[] {
  const paths = document['paths'];
  if (!isObject(paths)) throw new Error('the document has no paths');
  const operations: Operation[] = [];
  for (const [path, rawItem] of Object.entries(paths)) {
    const item = resolve(document, rawItem);
    if (!isObject(item)) continue;
    const shared: unknown[] = Array.isArray(item['parameters']) ? item['parameters'] : [];
    for (const method of METHODS) {
      const operation = item[method];
      if (!isObject(operation)) continue;
      const own: unknown[] = Array.isArray(operation['parameters']) ? operation['parameters'] : [];
      const parameters = [...shared, ...own]
        .map((parameter) => resolve(document, parameter))
        .filter(isObject)
        .map((parameter) => ({ ...parameter, schema: resolve(document, parameter['schema']) ?? {} }));
      const requestBody = resolve(document, operation['requestBody']);
      let body: Operation['body'];
      if (isObject(requestBody) && isObject(requestBody['content'])) {
        const [mediaType, content] = Object.entries(requestBody['content'])[0] ?? [];
        const limit = /At most (\d+) bytes/.exec(String(requestBody['description']))?.[1];
        if (mediaType === undefined || limit === undefined) {
          throw new Error(`${method.toUpperCase()} ${path}: the request body names no limit`);
        }
        const schema = isObject(content) ? resolve(document, content['schema']) : {};
        body = { mediaType, schema: isObject(schema) ? schema : {}, limit: Number(limit) };
      }
      const description = typeof operation['description'] === 'string' ? operation['description'] : '';
      operations.push({
        method: method.toUpperCase(),
        path,
        admin: description.includes('Admin only'),
        anonymous: Array.isArray(operation['security']) && operation['security'].length === 0,
        parameters,
        ...(body === undefined ? {} : { body }),
      });
    }
  }
  return operations;
}

// ---------------------------------------------------------------------------------------------
// Values

/**
 * Path segments as sent on the wire: dot segments, backslashes, NUL, malformed and overlong UTF-8.
 * Bytes above 0x7F go percent-encoded only: raw, they are not a request target (RFC 9112), and
 * Node's HTTP parser answers them 400 before any application sees the request.
 */
export const PATH_EDGES: readonly string[] = [
  '..',
  '.',
  '%2e%2e',
  '%2E%2E',
  '%2e',
  '.%2e',
  'a/../b',
  'a/./b',
  '..%2fx',
  '..%5cx',
  'a\\b',
  '\\..\\x',
  '%5c..%5c',
  '%00',
  'a%00b',
  '%FF',
  '%ff%fe',
  '%ED%A0%80',
  '%ED%B0%80',
  '%C0%AE%C0%AE',
  '%C0%AF',
  '%E0%80%AE',
  '%EF%BF%BE',
  '%EF%BF%BF',
  'a%EF%BF%BE',
  '%EF%B7%90',
  '%F4%8F%BF%BF',
  '%F4%90%80%80',
  '%E2%80%AE',
  '%E2%80%8F',
  '%D7%A9%D7%9C%D7%95%D7%9D',
  '%F0%9F%92%A9',
  '%C3%A9',
  'e%CC%81',
  '%EF%BB%BF',
  '%E2%80%8B',
  '%25',
  '%',
  '%2',
  '%zz',
  '%%',
  '%2F',
  'a%2Fb',
  '%252e%252e',
  '%0A',
  '%0D%0A',
  '%09',
  '%7F',
  '%20',
  'a%20',
  '~',
  'CON',
  'aux.txt',
  '.git',
  'a:b',
  'a;b',
  'a*b',
  'a|b',
  '"',
  "'",
  '<x>',
  '{x}',
  '[0]',
  '^',
  '`',
  '-',
  '',
  'x'.repeat(1025),
  'y'.repeat(3000),
  '%C3%A9'.repeat(600),
];

/** Query values of the wrong type, huge numbers and the encoding edge cases. */
export const QUERY_EDGES: readonly string[] = [
  'abc',
  '',
  '-1',
  '0',
  '1.5',
  '1e309',
  '-1e309',
  '99999999999999999999',
  '18446744073709551616',
  '9007199254740993',
  '-0',
  'NaN',
  'Infinity',
  '0x10',
  '1_000',
  '%201',
  '1%00',
  '%00',
  '%FF',
  '%ED%A0%80',
  '%EF%BF%BF',
  '%E2%80%AE',
  'true',
  'null',
  '%5B%5D',
  '%7B%7D',
  '..%2F..',
  '%2e%2e',
  '%',
  '%zz',
  'a'.repeat(5000),
];

/** Headers of a precondition or request id, malformed. */
const HEADER_EDGES: readonly string[] = [
  'garbage',
  '"',
  '""',
  'W/"x"',
  '*',
  '"a", "b"',
  '*, "a"',
  `"${'e'.repeat(8000)}"`,
  '\u00ff\u00fe',
  ' ',
  '"\t"',
];

/** A marker whose quoted JSON text is replaced by raw text (numbers JSON.stringify cannot write). */
const RAW = '\u0001raw:';
const raw = (text: string): string => `${RAW}${text}`;

function deepArray(depth: number): string {
  return '['.repeat(depth) + ']'.repeat(depth);
}
function deepObject(depth: number): string {
  return '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
}

/** Values that replace one field of a valid body. Strings are JSON values; RAW ones are raw text. */
const FIELD_EDGES: readonly unknown[] = [
  null,
  true,
  false,
  0,
  -1,
  1.5,
  raw('-0'),
  raw('1e309'),
  raw('-1e309'),
  raw('18446744073709551616'),
  raw('1e-400'),
  raw('123456789012345678901234567890'),
  raw('9007199254740993'),
  '',
  ' ',
  '\u0000',
  raw('"\\ud800"'),
  raw('"a\\udc00b"'),
  '\uFFFE',
  '\uFFFF',
  '\uFDD0',
  '\u202Eevil',
  '\u05e9\u05dc\u05d5\u05dd',
  '../../etc',
  '..',
  '.',
  'a\\b',
  '%2e%2e',
  '\u{1F4A9}',
  'x'.repeat(70_000),
  [],
  [null],
  {},
  { __proto__: null, constructor: 1 },
  raw(deepArray(2_000)),
  raw(deepArray(10_000)),
  raw(deepObject(10_000)),
  raw(`[${'{"a":['.repeat(5_000)}${']}'.repeat(5_000)}]`),
  '2026-02-30T25:61:00Z',
  '1970-01-01T00:00:00Z',
];

/** Whole bodies that are not valid JSON, or JSON of a surprising kind. */
const MALFORMED_JSON: readonly (string | Buffer)[] = [
  '',
  ' ',
  '{',
  '}',
  '{"a":',
  '{"a":1,}',
  "{'a':1}",
  '{a:1}',
  'NaN',
  'undefined',
  '{"a":NaN}',
  '{"a":1}{"b":2}',
  '\ufeff{}',
  'null',
  'true',
  '0',
  '"string"',
  '[]',
  '[{}]',
  '1e309',
  '-0',
  '18446744073709551616',
  '{"__proto__":{"polluted":1}}',
  '{"constructor":{"prototype":{"polluted":1}}}',
  '{"a":"\\ud800"}',
  '{"a":"\\u0000"}',
  '{"a":"\\x41"}',
  '{"a":1,"a":2}',
  Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]),
  Buffer.from([0x7b, 0x22, 0xc0, 0xae, 0x22, 0x3a, 0x31, 0x7d]),
  Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xed, 0xa0, 0x80, 0x22, 0x7d]),
  Buffer.from([0xff, 0xfe, 0x7b, 0x00, 0x7d, 0x00]),
  deepArray(10_000),
  deepObject(10_000),
  `{"a":${deepArray(10_000)}}`,
  '['.repeat(100_000),
];

const CONTENT_TYPES: readonly string[] = [
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/json; charset=utf-16',
  'application/xml',
  '*/*',
  'garbage',
];

// ---------------------------------------------------------------------------------------------
// Valid-looking values from schemas

const STRING_CANDIDATES: readonly string[] = [
  'fuzz1',
  'blocks/g1/0',
  'tails/c1/g1',
  createHash('sha256').update('fuzz').digest('hex'),
  '0',
  '2026-12-01',
  'notes/a.txt',
  'k1',
  'email',
  'in',
  'open',
  'finished',
  '*',
  '"e1"',
  'AAAA',
];

function matches(pattern: string, value: string): boolean {
  try {
    return new RegExp(pattern, 'u').test(value);
  } catch {
    return true;
  }
}

/** A value that satisfies `schema` as far as this small generator can tell (it need not). */
export function exampleOf(document: JsonObject, rawSchema: unknown, depth = 0): unknown {
  const schema = resolve(document, rawSchema);
  if (!isObject(schema) || depth > 8) return null;
  if ('const' in schema) return schema['const'];
  if (Array.isArray(schema['enum'])) return schema['enum'][0];
  for (const combiner of ['allOf', 'oneOf', 'anyOf']) {
    const options = schema[combiner];
    if (Array.isArray(options) && options.length > 0) {
      if (combiner === 'allOf') {
        const merged: JsonObject = {};
        for (const part of options) Object.assign(merged, resolve(document, part));
        const rest = { ...schema };
        delete rest['allOf'];
        delete rest['not'];
        return exampleOf(document, { ...merged, ...rest }, depth + 1);
      }
      return exampleOf(document, options[0], depth + 1);
    }
  }
  const types: unknown[] = Array.isArray(schema['type']) ? schema['type'] : [schema['type']];
  const type = types.find((candidate) => candidate !== 'null') ?? types[0];
  switch (type) {
    case 'object': {
      const properties = isObject(schema['properties']) ? schema['properties'] : {};
      const required = Array.isArray(schema['required']) ? schema['required'].map(String) : [];
      // Every property, the optional ones too (so that each can be mistyped), each at its first enum
      // value or its minimum: a run start is then `reject` with the shortest lease and no wait.
      const value: JsonObject = {};
      for (const name of [
        ...required,
        ...Object.keys(properties).filter((name) => !required.includes(name)),
      ]) {
        value[name] = exampleOf(document, properties[name], depth + 1);
      }
      return value;
    }
    case 'array': {
      const min = typeof schema['minItems'] === 'number' ? schema['minItems'] : 0;
      return Array.from({ length: Math.max(min, 1) }, () => exampleOf(document, schema['items'], depth + 1));
    }
    case 'integer':
    case 'number':
      return typeof schema['minimum'] === 'number' ? schema['minimum'] : 1;
    case 'boolean':
      return true;
    case 'string': {
      const format = schema['format'];
      if (format === 'date-time') return '2026-12-01T00:00:00.000Z';
      if (format === 'date') return '2026-12-01';
      if (format === 'uri') return 'https://example.test/x';
      const pattern = typeof schema['pattern'] === 'string' ? schema['pattern'] : undefined;
      const min = typeof schema['minLength'] === 'number' ? schema['minLength'] : 0;
      const found = STRING_CANDIDATES.find(
        (candidate) => candidate.length >= min && (pattern === undefined || matches(pattern, candidate)),
      );
      return found ?? 'x'.repeat(Math.max(min, 1));
    }
    case 'null':
      return null;
    default:
      return 'default' in schema ? schema['default'] : {};
  }
}

/** JSON text of `value`, with the RAW markers written as their raw text. */
function jsonText(value: unknown): string {
  return JSON.stringify(value).replace(
    /"\\u0001raw:((?:[^"\\]|\\.)*)"/g,
    (_match, text: string) => JSON.parse(`"${text}"`) as string,
  );
}

/** Every path (list of property names / indexes) to a field of `value`. */
function fieldPaths(value: unknown, prefix: (string | number)[] = [], out: (string | number)[][] = []) {
  if (Array.isArray(value)) {
    value.forEach((item, index) => {
      out.push([...prefix, index]);
      fieldPaths(item, [...prefix, index], out);
    });
  } else if (isObject(value)) {
    for (const [name, item] of Object.entries(value)) {
      out.push([...prefix, name]);
      fieldPaths(item, [...prefix, name], out);
    }
  }
  return out;
}

function withField(value: unknown, at: (string | number)[], replacement: unknown): unknown {
  const copy = structuredClone(value);
  let target: unknown = copy;
  for (const step of at.slice(0, -1)) target = (target as Record<string | number, unknown>)[step];
  const last = at[at.length - 1];
  if (last !== undefined) (target as Record<string | number, unknown>)[last] = replacement;
  return copy;
}

function withoutField(value: unknown, at: (string | number)[]): unknown {
  const copy = structuredClone(value);
  let target: unknown = copy;
  for (const step of at.slice(0, -1)) target = (target as Record<string | number, unknown>)[step];
  const last = at[at.length - 1];
  if (Array.isArray(target) && typeof last === 'number') target.splice(last, 1);
  else if (isObject(target) && last !== undefined) delete target[String(last)];
  return copy;
}

function summary(text: string | Buffer): string {
  const shown = Buffer.isBuffer(text) ? text.toString('latin1') : text;
  const short = shown.length > 60 ? `${shown.slice(0, 60)}… (${shown.length} chars)` : shown;
  return JSON.stringify(short);
}

// ---------------------------------------------------------------------------------------------
// Cases

interface Draft {
  path?: Record<string, string>;
  query?: string;
  headers?: Record<string, string>;
  body?: Buffer;
  contentType?: string;
  chunked?: boolean;
  caller?: Caller;
  what: string;
}

function encodeSegments(value: string): string {
  return value
    .split('/')
    .map((segment) => encodeURIComponent(segment))
    .join('/');
}

/**
 * `count` cases for one operation. Every case changes one or two things of an otherwise plausible
 * request, so that most of them reach the check they aim at (path, query, header, body).
 */
export function casesFor(
  document: JsonObject,
  operation: Operation,
  random: Random,
  count: number,
  options: { everyEdge?: boolean } = {},
) {
  const pathParameters = operation.parameters.filter((parameter) => parameter['in'] === 'path');
  const queryParameters = operation.parameters.filter((parameter) => parameter['in'] === 'query');
  const headerParameters = operation.parameters.filter(
    (parameter) => parameter['in'] === 'header' && parameter['name'] !== 'x-request-id',
  );
  const validPath = (): Record<string, string> =>
    Object.fromEntries(
      pathParameters.map((parameter) => {
        const value = exampleOf(document, parameter['schema']);
        return [String(parameter['name']), encodeSegments(typeof value === 'string' ? value : 'fuzz1')];
      }),
    );
  const validQuery = (): string[] =>
    queryParameters
      .filter(
        (parameter) => random.chance(0.5) || parameter['name'] === 'namespace' || parameter['name'] === 'key',
      )
      .map((parameter) => {
        const value = exampleOf(document, parameter['schema']);
        const text = typeof value === 'string' ? value : JSON.stringify(value);
        return `${String(parameter['name'])}=${encodeURIComponent(text)}`;
      });
  const body = operation.body;
  const validJson = body?.mediaType === 'application/json' ? exampleOf(document, body.schema) : undefined;
  const validBody = (): Buffer | undefined => {
    if (body === undefined) return undefined;
    if (body.mediaType === 'application/json') return Buffer.from(jsonText(validJson));
    return Buffer.from(random.pick(['fuzz bytes', '\u0000\u00ff', 'x']), 'latin1');
  };

  const kinds: (() => Draft)[] = [];
  if (pathParameters.length > 0) {
    kinds.push(() => {
      const parameter = random.pick(pathParameters);
      const name = String(parameter['name']);
      let value = random.pick(PATH_EDGES);
      if (parameter['x-cairn-rest-of-path'] === true && random.chance(0.5)) {
        value =
          random.pick(['fuzz1/', '', 'a//b', 'fuzz1/']) + value + random.pick(['', '/x', '/..', '/%2e%2e']);
      }
      return { path: { ...validPath(), [name]: value }, what: `path ${name}=${summary(value)}` };
    });
  }
  if (queryParameters.length > 0) {
    kinds.push(() => {
      const parameter = random.pick(queryParameters);
      const name = String(parameter['name']);
      const value = random.pick(QUERY_EDGES);
      const others = validQuery().filter((pair) => !pair.startsWith(`${name}=`));
      const form = random.pick([
        `${name}=${value}`,
        `${name}=${value}&${name}=1`,
        `${name}`,
        `${name}[]=${value}`,
      ]);
      return { query: [...others, form].join('&'), what: `query ${summary(form)}` };
    });
  }
  kinds.push(() => {
    const form = random.pick([
      '=x',
      '&&&',
      'unknown=1',
      '%00=%00',
      '%FF',
      'a=%ED%A0%80',
      `q=${'z'.repeat(6000)}`,
    ]);
    return { query: [...validQuery(), form].join('&'), what: `query ${summary(form)}` };
  });
  if (headerParameters.length > 0 || operation.method !== 'GET') {
    kinds.push(() => {
      const names = [
        ...headerParameters.map((parameter) => String(parameter['name'])),
        'If-Match',
        'If-None-Match',
      ];
      const headers: Record<string, string> = { [random.pick(names)]: random.pick(HEADER_EDGES) };
      if (random.chance(0.3)) Object.assign(headers, { 'If-Match': '*', 'If-None-Match': '*' });
      return { headers, body: validBody(), what: `headers ${summary(JSON.stringify(headers))}` };
    });
  }
  kinds.push(() => {
    const value = random.pick(['x', '', '.'.repeat(200), 'a'.repeat(129), 'a b', '\u00ff']);
    return { headers: { 'x-request-id': value }, body: validBody(), what: `x-request-id ${summary(value)}` };
  });
  kinds.push(() => {
    const caller: Caller = random.pick(['none', 'malformed', 'unknown']);
    return { caller, body: validBody(), what: `caller ${caller}` };
  });
  if (body !== undefined) {
    kinds.push(() => {
      // Over the route's limit by one byte, or by much: 413 whatever the bytes are.
      const size = random.chance(0.7)
        ? body.limit + 1
        : Math.min(body.limit * 4, body.limit + 8 * 1024 * 1024);
      const bytes =
        body.mediaType === 'application/json'
          ? Buffer.from(`{"pad":"${'p'.repeat(size - 10)}"}`)
          : Buffer.alloc(size, 0x61);
      const chunked = random.chance(0.3);
      return {
        body: bytes,
        chunked,
        what: `oversize body (${bytes.length} bytes${chunked ? ', chunked' : ''})`,
      };
    });
    kinds.push(() => {
      const contentType = random.pick(CONTENT_TYPES);
      return { body: validBody(), contentType, what: `content type ${contentType}` };
    });
  }
  if (body?.mediaType === 'application/json') {
    kinds.push(() => {
      const text = random.pick(MALFORMED_JSON);
      return { body: Buffer.isBuffer(text) ? text : Buffer.from(text), what: `body ${summary(text)}` };
    });
    const paths = fieldPaths(validJson);
    kinds.push(() => {
      if (paths.length === 0) {
        const name = random.pick(['unknown', '__proto__', 'constructor', '']);
        const value = random.pick(FIELD_EDGES);
        const text = jsonText(isObject(validJson) ? { ...validJson, [name]: value } : value);
        return { body: Buffer.from(text), what: `body ${summary(text)}` };
      }
      const at = random.pick(paths);
      const text = jsonText(withField(validJson, at, random.pick(FIELD_EDGES)));
      return { body: Buffer.from(text), what: `field ${at.join('.')}: body ${summary(text)}` };
    });
    kinds.push(() => {
      if (paths.length === 0 || random.chance(0.3)) {
        const text = jsonText(isObject(validJson) ? { ...validJson, unknownField: 1 } : [validJson]);
        return { body: Buffer.from(text), what: `body ${summary(text)}` };
      }
      const at = random.pick(paths);
      const text = jsonText(withoutField(validJson, at));
      return { body: Buffer.from(text), what: `without ${at.join('.')}: body ${summary(text)}` };
    });
  } else if (body !== undefined) {
    kinds.push(() => {
      const bytes = random.pick([
        Buffer.alloc(0),
        Buffer.alloc(65_536, 0xff),
        Buffer.from([0xed, 0xa0, 0x80]),
      ]);
      return { body: bytes, what: `bytes (${bytes.length})` };
    });
  }

  // With `everyEdge`, every path parameter meets every path edge and every query parameter every
  // query edge once, besides the `count` drawn cases.
  const every: Draft[] = [];
  if (options.everyEdge === true) {
    for (const parameter of pathParameters) {
      const name = String(parameter['name']);
      for (const value of PATH_EDGES) {
        every.push({
          path: { ...validPath(), [name]: value },
          body: validBody(),
          what: `path ${name}=${summary(value)}`,
        });
      }
    }
    for (const parameter of queryParameters) {
      const name = String(parameter['name']);
      for (const value of QUERY_EDGES)
        every.push({ query: `${name}=${value}`, what: `query ${name}=${summary(value)}` });
    }
  }
  const cases: FuzzCase[] = [];
  for (let index = 0; index < count + every.length; index++) {
    const draft = every[index] ?? random.pick(kinds)();
    const parameters = draft.path ?? validPath();
    let path = operation.path.replace(/\{([^}]+)\}/g, (_match, name: string) => parameters[name] ?? 'fuzz1');
    const query = draft.query ?? (random.chance(0.3) ? validQuery().join('&') : '');
    if (query !== '') path += `?${query}`;
    const caller: Caller =
      draft.caller ??
      (operation.admin ? (random.chance(0.8) ? 'admin' : 'tenant') : random.chance(0.1) ? 'admin' : 'tenant');
    const headers: Record<string, string> = { ...draft.headers };
    // Most cases that aim elsewhere carry a valid body, so that they reach the check they aim at.
    const payload = draft.body ?? (body !== undefined && random.chance(0.8) ? validBody() : undefined);
    if (payload !== undefined) {
      headers['content-type'] =
        draft.contentType ?? body?.mediaType ?? random.pick(['application/json', 'application/octet-stream']);
    }
    cases.push({
      method: operation.method,
      path,
      route: operation.path,
      caller,
      headers,
      ...(payload === undefined ? {} : { body: payload }),
      ...(draft.chunked === true ? { chunked: true } : {}),
      what: draft.what,
    });
  }
  return cases;
}
