import { MAX_JSON_DEPTH } from '../json';
import { mcpBodyLimit } from '../mcp/limits';
import {
  DEFAULT_NAMESPACE_LIMIT,
  DEFAULT_SEARCH_LIMIT,
  MAX_FACT_VALUE_BYTES,
  MAX_NAMESPACE_LIMIT,
  MAX_NAMESPACE_SEGMENTS,
  MAX_SEARCH_LIMIT,
  MAX_SEARCH_OFFSET,
  MAX_TTL_SECONDS,
} from '../memory/facts';
import {
  FORGET_ALL_BUDGET,
  MAX_LISTED_NAMESPACES,
  MAX_SEARCH_SCAN_BYTES,
  MAX_SEARCH_SCAN_ROWS,
} from '../memory/memory';
import { MAX_BATCH_BODY_BYTES, MAX_BATCH_OPERATIONS } from '../memory/memoryBatch';
import { MAX_FIELD_PATH_BYTES, MAX_VECTORS_PER_FACT } from '../memory/vectors';
import { MAX_FACT_BODY_BYTES, MAX_SEARCH_BODY_BYTES } from '../memory/wire';
import { ROUTE_SPECS } from '../protocol';
import { DEFAULT_MAX_VALUE_BYTES } from '../protocol/fields';
import { generatePaths } from '../protocol/openapi';
import { TAGS } from '../protocol/tags';
import { components } from './components';
import {
  emptyAnswer,
  header,
  jsonAnswer,
  type JsonObject,
  operation,
  queryParameter,
  ref,
  schemaRef,
} from './openapiKit';

/**
 * Cairn's HTTP API as an OpenAPI 3.1 document: every route the app registers, with its methods,
 * parameters, bodies, answers and errors. Served at `GET /api/openapi.json`. A test holds it to the
 * app's registrations both ways (a route missing here, or a path here that no route serves, fails
 * it), and the end-to-end tests check every answer they get against it: a new route is added here
 * with one `operation(...)` per method, or the tests fail.
 */

const json = (schema: JsonObject) => ({ mediaType: 'application/json', schema }) as const;
const writeConditions = [ref('#/components/parameters/IfMatch'), ref('#/components/parameters/IfNoneMatch')];

// ---------------------------------------------------------------------------------------------
// Memory facts (docs/memory.md)

const MEMORY_NOTE =
  "Facts are per tenant: another tenant's fact is absent for the caller. Without a table service (CAIRN_TABLE_ENDPOINT) on the Blob backend these routes answer 501 `not_configured` naming it.";
const requiredQuery = (name: string, description: string, schema: JsonObject) => ({
  ...queryParameter(name, description, schema),
  required: true,
});
const factParameters = [
  requiredQuery('namespace', 'The namespace, e.g. `users/42`.', schemaRef('MemoryNamespace')),
  requiredQuery('key', "The fact's key within the namespace.", schemaRef('MemoryKey')),
];
const factEtag = header("The fact's ETag.", schemaRef('Etag'));

const memoryFactsPath = {
  parameters: factParameters,
  put: operation({
    operationId: 'rememberFact',
    summary: 'Remember a fact (create or replace)',
    description: `Replaces the value, keeps \`createdAt\`, moves \`updatedAt\` forward (strictly, also within a millisecond). \`ttl\` (seconds) makes the fact expire; without it the fact never expires (a previous ttl is cleared). \`If-Match\` makes it a compare-and-swap on the fact's ETag (412 with the current ETag when another write came first; an expired fact is absent); \`If-None-Match: *\` creates only. The value is at most ${MAX_FACT_VALUE_BYTES} bytes as JSON (else 413). ${MEMORY_NOTE}`,
    tag: TAGS.memory,
    access: 'tenant',
    parameters: writeConditions,
    body: {
      ...json({
        type: 'object',
        required: ['value'],
        additionalProperties: false,
        properties: {
          value: { description: `Any JSON value, at most ${MAX_FACT_VALUE_BYTES} bytes serialised.` },
          ttl: {
            type: 'integer',
            minimum: 1,
            maximum: MAX_TTL_SECONDS,
            description: 'Seconds until the fact expires; absent: never.',
          },
          vectors: {
            type: 'object',
            maxProperties: MAX_VECTORS_PER_FACT,
            propertyNames: { minLength: 1, maxLength: MAX_FIELD_PATH_BYTES },
            additionalProperties: schemaRef('MemoryVector'),
            description:
              "Field path (`$`, `text`, `a.b[*]`, ...) → its embedding, computed by the caller. Every vector of a tenant has the dimension count of the tenant's first vector (else 400 naming `vectors.<path>`). Stored and sealed with the value; a write without `vectors` leaves the fact without vectors.",
          },
        },
      }),
      description: 'The value, its time to live and its vectors.',
      limitBytes: MAX_FACT_BODY_BYTES,
    },
    answers: {
      200: jsonAnswer('Replaced.', schemaRef('MemoryItem'), { ETag: factEtag }),
      201: jsonAnswer('Created (no live fact was there).', schemaRef('MemoryItem'), { ETag: factEtag }),
    },
    errors: [400, 412, 501],
  }),
  get: operation({
    operationId: 'recallFact',
    summary: 'Recall a fact',
    description: `404 when absent or expired; reading never extends a time to live. ${MEMORY_NOTE}`,
    tag: TAGS.memory,
    access: 'tenant',
    answers: { 200: jsonAnswer('The fact.', schemaRef('MemoryItem'), { ETag: factEtag }) },
    errors: [400, 404, 501],
  }),
  delete: operation({
    operationId: 'forgetFact',
    summary: 'Forget a fact',
    description: `204 also when absent. \`If-Match\`: only that version (412 when it is not the current one, also when the fact is absent). ${MEMORY_NOTE}`,
    tag: TAGS.memory,
    access: 'tenant',
    parameters: writeConditions,
    answers: { 204: emptyAnswer('Forgotten, or absent.') },
    errors: [400, 412, 501],
  }),
};

const memorySearchPath = {
  post: operation({
    operationId: 'searchFacts',
    summary: 'Search facts in a namespace and below',
    description: `Covers the namespace and every namespace below it by whole segments (\`users\` covers \`users/42\`, not \`usersX/1\`; \`""\` covers the tenant). With \`text\`: facts whose key or value's strings contain one of its words (whole words, case-insensitive), best first, each with \`score\` in [0, 1] (BM25, normalised); without text or vector: every fact, newest \`updatedAt\` first. With \`vector\`: the facts with vectors, closest first (a fact is as close as its closest field's vector; \`distance\` cosine (default), dot or l2; score (1 + cos) / 2, 1 / (1 + e^-dot), 1 / (1 + distance)), then the facts without vectors, newest first and without score. With both: the facts found by either, by reciprocal rank fusion (each ranking adds 1 / (60 + rank); score: the sum divided by 2 / 61). Exact search: every fact read is compared. Ties: newer first, then namespace and key. \`filter\` keeps facts whose value's top-level fields meet every condition. A search reads at most ${MAX_SEARCH_SCAN_ROWS} rows or ${MAX_SEARCH_SCAN_BYTES} bytes of values; past that \`truncated\` is true and the results cover the part read. Expired facts are never results. ${MEMORY_NOTE}`,
    tag: TAGS.memory,
    access: 'tenant',
    body: {
      ...json({
        type: 'object',
        required: ['namespace'],
        additionalProperties: false,
        properties: {
          namespace: { anyOf: [schemaRef('MemoryNamespace'), { const: '' }] },
          text: { type: 'string', description: 'Words to look for; absent or empty: no ranking.' },
          vector: schemaRef('MemoryVector'),
          distance: { enum: ['cosine', 'dot', 'l2'], default: 'cosine' },
          limit: { type: 'integer', minimum: 1, maximum: MAX_SEARCH_LIMIT, default: DEFAULT_SEARCH_LIMIT },
          offset: { type: 'integer', minimum: 0, maximum: MAX_SEARCH_OFFSET, default: 0 },
          filter: schemaRef('MemoryFilter'),
        },
      }),
      description: 'Where and what to look for.',
      limitBytes: MAX_SEARCH_BODY_BYTES,
    },
    answers: { 200: jsonAnswer('The results.', schemaRef('MemorySearchResult')) },
    errors: [400, 501],
  }),
};

const batchOperation = (op: string, properties: JsonObject, required: string[] = []) => ({
  type: 'object',
  required: ['op', ...required],
  additionalProperties: false,
  properties: { op: { const: op }, ...properties },
});
const batchFact = {
  namespace: schemaRef('MemoryNamespace'),
  key: schemaRef('MemoryKey'),
};
const batchIfMatch = { type: 'string', description: 'As the `If-Match` header: an ETag, or `*`.' };

const memoryBatchPath = {
  post: operation({
    operationId: 'memoryBatch',
    summary: 'Run several memory operations in one request',
    description: `The operations LangGraph's \`BaseStore.batch\` gives (get, put, delete, search, listNamespaces), at most ${MAX_BATCH_OPERATIONS}, run in order and answered in order: each result carries the \`status\` its route would answer and its result fields, or its error JSON (and \`etag\` on 412). Not atomic: an operation that fails (400 naming \`operations.<i>.<field>\`, 412, 413, 503) fails alone and the others go on; a later operation sees what an earlier one wrote. Each operation has its route's semantics (checks, compare-and-swap, an audit record per write); puts without a condition that follow one another are stored together (on Table Storage one transaction per up to 98 facts when the service knows their versions or they are new). The body is at most ${MAX_BATCH_BODY_BYTES} bytes (else 413); \`operations\` empty, not an array or longer is a 400 naming it. ${MEMORY_NOTE}`,
    tag: TAGS.memory,
    access: 'tenant',
    body: {
      ...json({
        type: 'object',
        required: ['operations'],
        additionalProperties: false,
        properties: {
          operations: {
            type: 'array',
            minItems: 1,
            maxItems: MAX_BATCH_OPERATIONS,
            items: {
              // The route answers any object in its place (a bad one gets its own 400 naming
              // `operations.<i>.<field>`; the others run), so the document accepts any item too.
              anyOf: [
                {
                  oneOf: [
                    batchOperation('get', batchFact, ['namespace', 'key']),
                    batchOperation(
                      'put',
                      {
                        ...batchFact,
                        value: { description: 'Any JSON value.' },
                        ttl: { type: 'integer', minimum: 1, maximum: MAX_TTL_SECONDS },
                        vectors: { type: 'object', additionalProperties: schemaRef('MemoryVector') },
                        ifMatch: batchIfMatch,
                        ifNoneMatch: { const: '*' },
                      },
                      ['namespace', 'key', 'value'],
                    ),
                    batchOperation('delete', { ...batchFact, ifMatch: batchIfMatch }, ['namespace', 'key']),
                    batchOperation(
                      'search',
                      {
                        namespace: { anyOf: [schemaRef('MemoryNamespace'), { const: '' }] },
                        text: { type: 'string' },
                        vector: schemaRef('MemoryVector'),
                        distance: { enum: ['cosine', 'dot', 'l2'] },
                        limit: { type: 'integer', minimum: 1, maximum: MAX_SEARCH_LIMIT },
                        offset: { type: 'integer', minimum: 0, maximum: MAX_SEARCH_OFFSET },
                        filter: schemaRef('MemoryFilter'),
                      },
                      ['namespace'],
                    ),
                    batchOperation('listNamespaces', {
                      prefix: { type: 'string' },
                      suffix: { type: 'string' },
                      maxDepth: { type: 'integer', minimum: 1, maximum: MAX_NAMESPACE_SEGMENTS },
                      limit: { type: 'integer', minimum: 1, maximum: MAX_NAMESPACE_LIMIT },
                      offset: { type: 'integer', minimum: 0, maximum: MAX_LISTED_NAMESPACES },
                    }),
                  ],
                },
                {
                  description:
                    'Anything else: answered in its place with its own 400 error naming the field (`operations.<i>.<field>`); the other operations run.',
                },
              ],
            },
          },
        },
      }),
      description: 'The operations, in order.',
      limitBytes: MAX_BATCH_BODY_BYTES,
    },
    answers: {
      200: jsonAnswer('One result per operation, in order.', {
        type: 'object',
        required: ['results'],
        additionalProperties: false,
        properties: {
          results: {
            type: 'array',
            items: {
              type: 'object',
              required: ['status'],
              additionalProperties: false,
              properties: {
                status: { type: 'integer', description: "The status the operation's route would answer." },
                item: {
                  anyOf: [schemaRef('MemoryItem'), { type: 'null' }],
                  description: 'get: the fact or null; put: the fact stored.',
                },
                created: { type: 'boolean', description: 'put: no live fact was there.' },
                deleted: { type: 'boolean', description: 'delete: a live fact was there.' },
                items: {
                  type: 'array',
                  items: { type: 'object' },
                  description: 'search: as the search route.',
                },
                truncated: { type: 'boolean' },
                namespaces: {
                  type: 'array',
                  items: { type: 'array', items: { type: 'string' } },
                  description: 'listNamespaces: as the listing route.',
                },
                error: {
                  type: 'object',
                  required: ['code', 'message'],
                  properties: { code: { type: 'string' }, message: { type: 'string', minLength: 1 } },
                  description: "The operation's error JSON, as its route would answer it.",
                },
                etag: {
                  type: 'string',
                  description: 'On 412: the current ETag of the fact, when it exists.',
                },
              },
            },
          },
        },
      }),
    },
    errors: [400, 501],
  }),
};

const memoryNamespacesPath = {
  get: operation({
    operationId: 'listMemoryNamespaces',
    summary: 'List the namespaces that hold facts',
    description: `Distinct namespaces with at least one live fact, at or below \`prefix\`, ending with \`suffix\` (whole segments), cut to \`maxDepth\` segments (then distinct again), ordered segment by segment, paged with \`offset\` and \`limit\`. At most ${MAX_LISTED_NAMESPACES} namespaces are found (then \`truncated\`). ${MEMORY_NOTE}`,
    tag: TAGS.memory,
    access: 'tenant',
    parameters: [
      queryParameter('prefix', 'Only this namespace and below; default all.', {
        anyOf: [schemaRef('MemoryNamespace'), { const: '' }],
      }),
      queryParameter('suffix', 'Only namespaces ending with these segments.', schemaRef('MemoryNamespace')),
      queryParameter('maxDepth', 'Cut namespaces to this many segments.', {
        type: 'integer',
        minimum: 1,
        maximum: MAX_NAMESPACE_SEGMENTS,
      }),
      queryParameter('limit', 'Namespaces per page.', {
        type: 'integer',
        minimum: 1,
        maximum: MAX_NAMESPACE_LIMIT,
        default: DEFAULT_NAMESPACE_LIMIT,
      }),
      queryParameter('offset', 'Namespaces to skip.', {
        type: 'integer',
        minimum: 0,
        maximum: MAX_LISTED_NAMESPACES,
        default: 0,
      }),
    ],
    answers: { 200: jsonAnswer('One page of namespaces.', schemaRef('MemoryNamespaceList')) },
    errors: [400, 501],
  }),
  delete: operation({
    operationId: 'forgetNamespace',
    summary: 'Forget a namespace and everything below it',
    description: `Deletes the facts of the namespace and of every namespace below it (\`namespace=\` with \`all=true\`: every fact of the tenant; without \`all=true\` an empty namespace is a 400). At most ${FORGET_ALL_BUDGET} facts per call: \`more\` true means call again. Idempotent; facts written while it runs may remain. ${MEMORY_NOTE}`,
    tag: TAGS.memory,
    access: 'tenant',
    parameters: [
      requiredQuery('namespace', 'The namespace; empty only with `all=true`.', {
        anyOf: [schemaRef('MemoryNamespace'), { const: '' }],
      }),
      queryParameter('all', '`true` to allow the empty namespace (the whole tenant).', {
        enum: ['true', 'false'],
        default: 'false',
      }),
    ],
    answers: { 200: jsonAnswer('What was deleted.', schemaRef('MemoryForgotten')) },
    errors: [400, 501],
  }),
};

// ---------------------------------------------------------------------------------------------
// MCP

const mcpPath = {
  post: operation({
    operationId: 'mcp',
    summary: 'Model Context Protocol (Streamable HTTP)',
    description:
      "Cairn as an MCP server: memory, key/value, delivery claims, promises and read-only threads as tools, facts and keys as resources, for the caller's tenant (docs/mcp.md). Stateless: every request stands alone and is answered with JSON; GET and DELETE answer 405. Every answer is JSON, whatever `Accept` says. A tool that fails answers 200 with an MCP tool error whose text is the error JSON of this API; a body that is not JSON, not a JSON-RPC message of MCP or a batch of 1 to 100 of them, or of an unsupported `MCP-Protocol-Version` is 400 with the error JSON. A batch is answered with an array of the answers to its requests, in their order.",
    tag: TAGS.mcp,
    access: 'tenant',
    body: {
      ...json({ type: ['object', 'array'] }),
      description: 'A JSON-RPC message of MCP, or a batch.',
      limitBytes: mcpBodyLimit(DEFAULT_MAX_VALUE_BYTES),
    },
    answers: {
      200: jsonAnswer('The JSON-RPC answer (an array for a batch, even of one request).', {
        type: ['object', 'array'],
      }),
      202: emptyAnswer('The body held only notifications or responses: nothing to answer.'),
    },
  }),
};

// ---------------------------------------------------------------------------------------------
// Service

/**
 * The paths generated from the route specs (shared/protocol/), with the component schemas they
 * reference. The paths below are the routes not declared as specs yet, documented by hand.
 */
const generated = generatePaths(ROUTE_SPECS);

/** The paths documented by hand (a shrinking list: a route converted to a spec leaves it). */
export const HAND_WRITTEN_PATHS: Readonly<Record<string, JsonObject>> = {
  '/api/memory/facts': memoryFactsPath,
  '/api/memory/search': memorySearchPath,
  '/api/memory/namespaces': memoryNamespacesPath,
  '/api/memory/batch': memoryBatchPath,
  '/api/mcp': mcpPath,
};

for (const name of Object.keys(generated.schemas)) {
  if (name in components.schemas) throw new Error(`schema ${name} is both generated and written by hand`);
}

const { '/api/{path}': noRoutePath, ...specPaths } = generated.paths;

export const openApiDocument = {
  openapi: '3.1.0',
  info: {
    title: 'Cairn',
    // The app's version replaces this when the document is served (see documentForVersion).
    version: '0.0.0',
    summary:
      'Durable state for AI agents: key/value, session archives, fleet coordination, threads, memory, workspace snapshots, migrations, encryption at rest, audit trail.',
    description: [
      'Base path `/api`; JSON in and out unless an operation says bytes.',
      "Every operation but `GET /api/health`, `GET /api/health/ready` and `GET /api/openapi.json` needs `Authorization: Bearer <token>`, an API key or a Microsoft Entra ID access token; without a valid one, 401 with `WWW-Authenticate: Bearer`. Everything a tenant stores is visible to that tenant only; another tenant's data answers as absent data does (404).",
      'Errors are the status plus `{"error": {"code", "message", ...details}}`; the components list each one. A method a path does not list answers 405 `method_not_allowed` with `Allow`.',
      'Every answer carries `x-request-id`. Times are RFC 3339 strings in UTC. Size limits are checked before anything else about a body: an oversize body is 413 whatever else is wrong with it. A JSON body may nest arrays and objects at most ' +
        String(MAX_JSON_DEPTH) +
        ' levels deep, the body counting as one (else 400 naming the top-level field). Keys, prefixes and every user-chosen name that goes into a storage key refuse control characters, Unicode noncharacters and unpaired surrogates. A failed request writes nothing unless its operation says otherwise.',
    ].join('\n\n'),
    license: { name: 'MIT', identifier: 'MIT' },
  },
  tags: [
    { name: TAGS.service, description: 'Health, this document, and the answer for unknown paths.' },
    { name: TAGS.kv, description: 'Values by key, with compare-and-swap on ETags.' },
    { name: TAGS.sessions, description: 'Immutable, content-checked archives of agent sessions.' },
    {
      name: TAGS.coordination,
      description:
        'Email cursor, watched chats, chat cursors and delivery claims, promises, interaction log.',
    },
    {
      name: TAGS.threads,
      description:
        'Threads of delta checkpoints, pending writes and rewinds, with one run per thread holding it under a lease (docs/threads.md). A write that keeps losing its compare-and-swap on the thread record to other writers answers 503 `storage_unavailable`, like a storage failure: retry.',
    },
    {
      name: TAGS.snapshots,
      description:
        "Signed snapshots of an agent's workspace (files, modes, symlinks): content-addressed parts, Ed25519-signed manifests named by their SHA-256, each workspace's latest moved by compare-and-swap, and the tenants' trusted signing keys (docs/snapshots.md).",
    },
    {
      name: TAGS.memory,
      description:
        'Long-term memory: JSON facts per tenant under `/`-separated namespaces, with time to live, compare-and-swap on ETags, and keyword search over a namespace and below (docs/memory.md). Times are Unix milliseconds.',
    },
    { name: TAGS.migrations, description: 'Copying local state to Blob storage (admin only).' },
    {
      name: TAGS.audit,
      description:
        "Each tenant's hash-chained audit trail: records, verification, signed heads (CAIRN_AUDIT).",
    },
    {
      name: TAGS.encryption,
      description: 'Encryption at rest: re-sealing stored values with the first key (admin only).',
    },
    {
      name: TAGS.mcp,
      description:
        "Cairn as a Model Context Protocol server on the Streamable HTTP transport: the tenant's memory, key/value, claims, promises and threads as tools (docs/mcp.md).",
    },
    {
      name: TAGS.retention,
      description:
        "Retention (admin only): each tenant's policy over the CAIRN_RETENTION_* defaults, a prune run now (the retentionPrune timer runs one every hour), verify of what is kept, and the tenant directory (docs/retention.md).",
    },
  ],
  security: [{ apiKey: [] }, { entraId: [] }],
  paths: {
    ...specPaths,
    ...HAND_WRITTEN_PATHS,
    // Last: the path of every path no other operation serves.
    ...(noRoutePath === undefined ? {} : { '/api/{path}': noRoutePath }),
  },
  components: { ...components, schemas: { ...components.schemas, ...generated.schemas } },
} satisfies JsonObject;

export type OpenApiDocument = typeof openApiDocument;

/** The document as served: `info.version` is the app's version. */
export function documentForVersion(version: string): OpenApiDocument {
  return { ...openApiDocument, info: { ...openApiDocument.info, version } };
}
