import { MAX_JSON_DEPTH } from '../json';
import { mcpBodyLimit } from '../mcp/limits';
import { ROUTE_SPECS } from '../protocol';
import { DEFAULT_MAX_VALUE_BYTES } from '../protocol/fields';
import { generatePaths } from '../protocol/openapi';
import { TAGS } from '../protocol/tags';
import { components } from './components';
import { emptyAnswer, jsonAnswer, type JsonObject, operation } from './openapiKit';

/**
 * Cairn's HTTP API as an OpenAPI 3.1 document: every route the app registers, with its methods,
 * parameters, bodies, answers and errors. Served at `GET /api/openapi.json`. A test holds it to the
 * app's registrations both ways (a route missing here, or a path here that no route serves, fails
 * it), and the end-to-end tests check every answer they get against it: a new route is added here
 * with one `operation(...)` per method, or the tests fail.
 */

const json = (schema: JsonObject) => ({ mediaType: 'application/json', schema }) as const;

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
