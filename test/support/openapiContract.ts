import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';

import { compareRanks, compileRoute, type RouteTemplate } from '../../dev/host/routeTemplate';
import { openApiPath, OPERATION_METHODS } from '../../shared/protocol/openapi';
import type { RouteSpec } from '../../shared/protocol/spec';

/**
 * Holds the app to its OpenAPI document, both in what it registers and in what it answers:
 *
 * - {@link routeDisagreements}: the HTTP routes the app registers (template and the methods the
 *   handler serves) against the document's paths and operations, both ways;
 * - {@link AnswerChecker}: one answer (status, headers, body) against the operation of its path
 *   and method, with Ajv (JSON Schema 2020-12, the dialect of OpenAPI 3.1) and ajv-formats.
 *
 * The document is taken as plain JSON, so the same checks run on a modified copy of it.
 */

type JsonObject = Record<string, unknown>;

export interface RegisteredRoute {
  /** The function's name. */
  readonly name: string;
  /** The route template as registered (`kv/{*key}`), without the route prefix. */
  readonly route: string;
  /** The methods the route serves (its handler answers 405 for the others). */
  readonly methods: readonly string[];
  /** The route spec its handler was made from (functions/http/route.ts), if any. */
  readonly spec?: RouteSpec;
}

/**
 * What differs between the registered routes and the route specs (shared/protocol/): a route
 * registered without a spec, a spec of another name, template or methods than its registration, a
 * spec not in the list the document is generated from, a spec no route registers. Empty when they
 * agree.
 */
export function specDisagreements(routes: readonly RegisteredRoute[], specs: readonly RouteSpec[]): string[] {
  const problems: string[] = [];
  // By name and template: the app's registrations hold the compiled specs, not these objects.
  const idOf = (spec: RouteSpec) => `${spec.name} ${spec.route}`;
  const listed = new Set(specs.map(idOf));
  const registered = new Set<string>();
  for (const route of routes) {
    const spec = route.spec;
    if (spec === undefined) {
      problems.push(`route ${route.route} (function ${route.name}) is registered without a route spec`);
      continue;
    }
    registered.add(idOf(spec));
    if (!listed.has(idOf(spec))) problems.push(`route ${route.route}: its spec is not in ROUTE_SPECS`);
    if (spec.name !== route.name || spec.route !== route.route) {
      problems.push(
        `function ${route.name} (${route.route}) is registered with the spec of ${spec.name} (${spec.route})`,
      );
    }
    const methods = Object.keys(spec.operations).sort().join();
    if ([...route.methods].sort().join() !== methods) {
      problems.push(`route ${route.route} serves ${route.methods.join(', ')}; its spec declares ${methods}`);
    }
  }
  for (const spec of specs.filter((spec) => !registered.has(idOf(spec)))) {
    problems.push(`the spec of ${spec.name} (${spec.route}) is not registered`);
  }
  return problems;
}

const isObject = (value: unknown): value is JsonObject =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function objectAt(value: unknown, what: string): JsonObject {
  if (!isObject(value)) throw new Error(`${what} is not an object`);
  return value;
}

function parametersOf(pathItem: JsonObject): JsonObject[] {
  const parameters = pathItem['parameters'];
  return Array.isArray(parameters) ? parameters.filter(isObject) : [];
}

function documentedMethods(pathItem: JsonObject): string[] {
  return OPERATION_METHODS.filter((method) => isObject(pathItem[method])).map((method) =>
    method.toUpperCase(),
  );
}

/**
 * What differs between the registered routes and the document: a route whose path is missing, a
 * method served but not documented or documented but not served, a catch-all parameter not marked
 * (`x-cairn-rest-of-path`), and a documented path no route serves. Empty when they agree.
 */
export function routeDisagreements(
  routes: readonly RegisteredRoute[],
  document: unknown,
  routePrefix = 'api',
): string[] {
  const paths = objectAt(objectAt(document, 'the document')['paths'], 'paths');
  const problems: string[] = [];
  const served = new Set<string>();
  for (const route of routes) {
    const { path, restOfPath } = openApiPath(route.route, routePrefix);
    served.add(path);
    const pathItem = paths[path];
    if (!isObject(pathItem)) {
      problems.push(`route ${route.route} (function ${route.name}) is not documented: no path ${path}`);
      continue;
    }
    const documented = documentedMethods(pathItem);
    const methods = route.methods.map((method) => method.toUpperCase());
    for (const method of methods.filter((method) => !documented.includes(method))) {
      problems.push(`${method} ${path} is served (function ${route.name}) but not documented`);
    }
    for (const method of documented.filter((method) => !methods.includes(method))) {
      problems.push(`${method} ${path} is documented but not served (function ${route.name})`);
    }
    const marked = parametersOf(pathItem)
      .filter((parameter) => parameter['x-cairn-rest-of-path'] === true)
      .map((parameter) => String(parameter['name']));
    const expected = restOfPath === null ? [] : [restOfPath];
    if (marked.join() !== expected.join()) {
      problems.push(
        `${path}: the route's catch-all parameter is ${restOfPath ?? 'none'}, the document marks ${marked.join(', ') || 'none'}`,
      );
    }
  }
  for (const path of Object.keys(paths).filter((path) => !served.has(path))) {
    problems.push(`path ${path} is documented but no registered route serves it`);
  }
  return problems;
}

/** What a checked answer is: the request, and the answer as it arrived. */
export interface Answer {
  readonly method: string;
  /** The request path as sent, query included (`/api/keys?limit=2`). */
  readonly path: string;
  readonly status: number;
  header(name: string): string | undefined;
  /** The body parsed as JSON when the answer says `application/json`; undefined when it has none. */
  readonly json?: unknown;
  /**
   * The request's body as sent, when the sender knows it (text or bytes). A request the service
   * accepted (2xx) is checked against the operation's JSON request body: a body the document
   * refuses but the service takes means the two disagree.
   */
  readonly requestBody?: string | Uint8Array;
}

const DOCUMENT_ID = 'cairn-openapi.json';
const DOCUMENT_MEMBERS = [
  'openapi',
  'info',
  'jsonSchemaDialect',
  'servers',
  'paths',
  'webhooks',
  'components',
  'security',
  'tags',
  'externalDocs',
];

function pointer(...tokens: string[]): string {
  return tokens
    .map((token) => encodeURIComponent(token.replaceAll('~', '~0').replaceAll('/', '~1')))
    .join('/');
}

interface DocumentedPath {
  readonly path: string;
  readonly route: RouteTemplate;
  readonly item: JsonObject;
}

/** Checks answers against the document; every problem is a sentence naming the answer. */
export class AnswerChecker {
  private readonly bodies: Ajv2020;
  private readonly headers: Ajv2020;
  private readonly compiled = new Map<string, ValidateFunction>();
  private readonly paths: DocumentedPath[];

  constructor(
    private readonly document: JsonObject,
    private readonly routePrefix = 'api',
  ) {
    // Strict: a keyword Ajv does not know, or a type mistake in the document, is an error here.
    this.bodies = new Ajv2020({ allErrors: true, strict: true, allowUnionTypes: true });
    // Header values are strings on the wire: `Retry-After: 1` is the integer 1.
    this.headers = new Ajv2020({ allErrors: true, strict: true, allowUnionTypes: true, coerceTypes: true });
    for (const ajv of [this.bodies, this.headers]) {
      addFormats(ajv);
      // The document is registered whole so that schemas are compiled where they stand and their
      // `#/components/...` references resolve; its own top-level members are not schema keywords.
      ajv.addVocabulary(DOCUMENT_MEMBERS);
      ajv.addSchema(document, DOCUMENT_ID);
    }
    this.paths = Object.entries(objectAt(document['paths'], 'paths'))
      .map(([path, item]) => ({
        path,
        item: objectAt(item, path),
        route: compileRoute(this.templateOf(path, item)),
      }))
      .sort((a, b) => compareRanks(a.route.rank, b.route.rank));
  }

  /** The problems of one answer; empty when it is as documented. */
  check(answer: Answer): string[] {
    const [rawPath = ''] = answer.path.split('?');
    const prefix = `/${this.routePrefix}/`;
    // Paths outside the route prefix are the host's own, not the API's.
    if (!rawPath.startsWith(prefix)) return [];
    const method = answer.method.toUpperCase();
    const where = `${method} ${answer.path} → ${answer.status}`;
    const found = this.paths.find(
      (candidate) => candidate.route.match(rawPath.slice(prefix.length)) !== null,
    );
    if (found === undefined) return [`${where}: no documented path matches`];
    const operationKey = method.toLowerCase();
    const operation = found.item[operationKey];
    if (!isObject(operation)) return this.checkMethodNotAllowed(answer, found, where);
    const responses = objectAt(operation['responses'], `${found.path} ${operationKey} responses`);
    const response = responses[String(answer.status)];
    if (response === undefined) {
      return [
        `${where}: status ${answer.status} is not documented for ${method} ${found.path} (documented: ${Object.keys(responses).join(', ')})`,
      ];
    }
    const responsePointer = this.resolvedPointer([
      'paths',
      found.path,
      operationKey,
      'responses',
      String(answer.status),
    ]);
    return [
      ...this.checkRequestBody(answer, ['paths', found.path, operationKey], where),
      ...this.checkResponse(answer, responsePointer, where),
    ];
  }

  /** The JSON body of a request the service accepted, against the operation's request body. */
  private checkRequestBody(answer: Answer, operationAt: string[], where: string): string[] {
    if (answer.status < 200 || answer.status > 299 || answer.requestBody === undefined) return [];
    const operation = this.at(operationAt);
    if (!isObject(operation['requestBody'])) return [];
    const bodyAt = this.resolvedPointer([...operationAt, 'requestBody']);
    const content = this.at(bodyAt)['content'];
    if (!isObject(content) || !isObject(content['application/json'])) return [];
    const text =
      typeof answer.requestBody === 'string'
        ? answer.requestBody
        : Buffer.from(answer.requestBody).toString('utf8');
    // An empty body where the document allows none (`required: false`) is no JSON to check.
    if (text === '' && this.at(bodyAt)['required'] !== true) return [];
    let value: unknown;
    try {
      value = JSON.parse(text) as unknown;
    } catch {
      return [`${where}: the service accepted a request body that is not JSON: ${text.slice(0, 200)}`];
    }
    const validate = this.validator(this.bodies, [...bodyAt, 'content', 'application/json', 'schema']);
    if (validate(value)) return [];
    return [
      `${where}: the service accepted the request body ${text.slice(0, 500)}, which the document refuses: ${this.bodies.errorsText(validate.errors, { dataVar: 'requestBody' })}`,
    ];
  }

  /** A method the path does not list: 405 with the error JSON and `Allow` naming the documented ones. */
  private checkMethodNotAllowed(answer: Answer, found: DocumentedPath, where: string): string[] {
    const documented = documentedMethods(found.item);
    if (answer.status !== 405) {
      return [`${where}: ${found.path} documents ${documented.join(', ')} only, so the answer must be 405`];
    }
    const problems = this.checkResponse(answer, ['components', 'responses', 'MethodNotAllowed'], where);
    const allow = (answer.header('allow') ?? '').split(',').map((method) => method.trim().toUpperCase());
    if ([...allow].sort().join() !== [...documented].sort().join()) {
      problems.push(
        `${where}: Allow is "${answer.header('allow') ?? ''}", the document lists ${documented.join(', ')}`,
      );
    }
    return problems;
  }

  private checkResponse(answer: Answer, at: string[], where: string): string[] {
    const response = this.at(at);
    const problems: string[] = [];
    for (const name of Object.keys(isObject(response['headers']) ? response['headers'] : {})) {
      // OpenAPI: a response header named Content-Type is ignored; `content` says the media type.
      if (name.toLowerCase() === 'content-type') continue;
      const headerPointer = this.resolvedPointer([...at, 'headers', name]);
      const definition = this.at(headerPointer);
      const value = answer.header(name.toLowerCase());
      if (value === undefined) {
        if (definition['required'] === true) problems.push(`${where}: header ${name} is missing`);
        continue;
      }
      const validate = this.validator(this.headers, [...headerPointer, 'schema'], true);
      if (!validate({ value })) {
        const why = (validate.errors ?? []).map((error) => error.message ?? error.keyword).join('; ');
        problems.push(`${where}: header ${name}: "${value}" ${why}`);
      }
    }
    // A HEAD answer has no body, whatever its headers say.
    if (answer.method.toUpperCase() === 'HEAD') return problems;
    const content = isObject(response['content']) ? response['content'] : {};
    const mediaType = answer.header('content-type')?.split(';')[0]?.trim().toLowerCase();
    if (Object.keys(content).length === 0) {
      if (mediaType !== undefined)
        problems.push(`${where}: has a ${mediaType} body; the document declares none`);
      return problems;
    }
    if (mediaType === undefined || !(mediaType in content)) {
      problems.push(
        `${where}: Content-Type is ${mediaType ?? 'absent'}; documented: ${Object.keys(content).join(', ')}`,
      );
      return problems;
    }
    if (mediaType !== 'application/json') return problems;
    const validate = this.validator(this.bodies, [...at, 'content', mediaType, 'schema']);
    if (!validate(answer.json)) {
      problems.push(
        `${where}: the body ${JSON.stringify(answer.json)?.slice(0, 500)} does not match the document: ${this.bodies.errorsText(validate.errors, { dataVar: 'body' })}`,
      );
    }
    return problems;
  }

  private validator(ajv: Ajv2020, at: string[], wrapped = false): ValidateFunction {
    const key = `${wrapped ? 'header' : 'body'}:${at.join('/')}`;
    let validate = this.compiled.get(key);
    if (validate === undefined) {
      const schema = { $ref: `${DOCUMENT_ID}#/${pointer(...at)}` };
      validate = ajv.compile(
        wrapped ? { type: 'object', required: ['value'], properties: { value: schema } } : schema,
      );
      this.compiled.set(key, validate);
    }
    return validate;
  }

  /** The value at a path of tokens, following a `$ref` there. */
  private at(tokens: string[]): JsonObject {
    return objectAt(this.valueAt(this.resolvedPointer(tokens)), tokens.join('/'));
  }

  /** The tokens of the value at `tokens`, after following `$ref`s (local ones: `#/...`). */
  private resolvedPointer(tokens: string[]): string[] {
    const value = this.valueAt(tokens);
    if (isObject(value) && typeof value['$ref'] === 'string' && value['$ref'].startsWith('#/')) {
      return this.resolvedPointer(
        value['$ref']
          .slice(2)
          .split('/')
          .map((token) => decodeURIComponent(token).replaceAll('~1', '/').replaceAll('~0', '~')),
      );
    }
    return tokens;
  }

  private valueAt(tokens: string[]): unknown {
    let value: unknown = this.document;
    for (const token of tokens) {
      if (!isObject(value)) throw new Error(`the document has nothing at /${tokens.join('/')}`);
      value = value[token];
    }
    return value;
  }

  /** A documented path as a Functions route template, so that it matches as the host routes. */
  private templateOf(path: string, item: unknown): string {
    const restOfPath = parametersOf(objectAt(item, path))
      .filter((parameter) => parameter['x-cairn-rest-of-path'] === true)
      .map((parameter) => String(parameter['name']));
    const prefix = `/${this.routePrefix}/`;
    if (!path.startsWith(prefix)) throw new Error(`documented path ${path} is not under ${prefix}`);
    return path
      .slice(prefix.length)
      .split('/')
      .map((segment) => {
        const name = /^\{(.+)\}$/.exec(segment)?.[1];
        return name !== undefined && restOfPath.includes(name) ? `{*${name}}` : segment;
      })
      .join('/');
  }
}
