import { MAX_JSON_DEPTH } from '../json';
import { ROUTE_SPECS } from '../protocol/index';
import { generateOpenApi } from '../protocol/openapi';
import { TAGS } from '../protocol/tags';

/**
 * Cairn's HTTP API as an OpenAPI 3.1 document: every route the app registers, with its methods,
 * parameters, bodies, answers and errors. Served at `GET /api/openapi.json`. Its paths and every
 * component (schemas, the error answers, headers, security schemes) are generated from the route
 * specs and the error answers of the protocol (shared/protocol/, ROUTE_SPECS, ERROR_ANSWERS); what
 * is written here is the document's description and its tags. A test holds
 * it to the app's registrations both ways (a route without a spec, or a spec no route serves,
 * fails it), and the end-to-end tests check every request and answer against it.
 */

const generated = generateOpenApi(ROUTE_SPECS);

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
    // Last: the path of every path no other operation serves.
    ...(noRoutePath === undefined ? {} : { '/api/{path}': noRoutePath }),
  },
  components: generated.components,
};

export type OpenApiDocument = typeof openApiDocument;

/** The document as served: `info.version` is the app's version. */
export function documentForVersion(version: string): OpenApiDocument {
  return { ...openApiDocument, info: { ...openApiDocument.info, version } };
}
