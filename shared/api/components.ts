import { header, type JsonObject, REQUEST_ID_HEADER, type Schema, schemaRef } from './openapiKit';

/**
 * The shared parts of the OpenAPI document: schemas of names and bodies, the error answers, the
 * common headers and parameters, and the security schemes. Patterns mirror the validation in
 * shared/ (keys.ts and snapshots/identifiers.ts); where a rule cannot be a pattern (bytes of UTF-8),
 * the description says it. The schemas of the routes declared in shared/protocol/ are generated
 * from them and merged in.
 */

const schemas: Record<string, Schema> = {
  ThreadBusyError: errorSchema(['thread_busy'], {
    runId: { ...schemaRef('Id'), description: 'The run that holds the thread.' },
    retryAfter: {
      type: 'integer',
      minimum: 1,
      description: "Seconds until the holder's lease ends unless it is renewed; also sent as `Retry-After`.",
    },
  }),
  RunFencedError: errorSchema(['run_fenced'], {
    runId: { ...schemaRef('Id'), description: 'The run the request named.' },
    status: {
      enum: ['interrupted', 'finished', 'failed', 'expired', 'unknown'],
      description: 'What is known of that run.',
    },
  }),
};

/**
 * The error JSON, `{"error": {"code", "message", ...details}}`, with `codes` allowed and `details`
 * (each required unless listed in `optional`) inside the error object.
 */
function errorSchema(
  codes: readonly string[],
  details: Readonly<Record<string, Schema>> = {},
  optional: readonly string[] = [],
): Schema {
  return {
    type: 'object',
    required: ['error'],
    additionalProperties: false,
    properties: {
      error: {
        type: 'object',
        required: ['code', 'message', ...Object.keys(details).filter((name) => !optional.includes(name))],
        additionalProperties: false,
        properties: {
          code: codes.length === 1 ? { const: codes[0] ?? '' } : { enum: [...codes] },
          message: { type: 'string', minLength: 1, description: 'What went wrong and what to do.' },
          ...details,
        },
      },
    },
  };
}

function errorAnswer(
  description: string,
  schema: Schema,
  headers: Record<string, JsonObject> = {},
): JsonObject {
  return {
    description,
    headers: { ...REQUEST_ID_HEADER, ...headers },
    content: { 'application/json': { schema } },
  };
}

/** `Retry-After` of a `thread_busy`: required when the answer is always one, else only with one. */
function threadBusyRetryAfter(optional: boolean): JsonObject {
  return header(
    `Seconds until the holder's lease ends unless renewed (at least 1), as \`retryAfter\`${optional ? '; sent with `thread_busy` only' : ''}.`,
    { type: 'integer', minimum: 1 },
    optional,
  );
}

const responses: Record<string, JsonObject> = {
  BadRequest: errorAnswer(
    '`invalid_argument`: a bad key, name, JSON body, header combination or limit; the message names the field.',
    errorSchema(['invalid_argument']),
  ),
  Unauthorized: errorAnswer(
    '`unauthorized`: the credential is missing, malformed, unknown or expired.',
    errorSchema(['unauthorized']),
    { 'WWW-Authenticate': header('Always `Bearer`.', { type: 'string', const: 'Bearer' }) },
  ),
  Forbidden: errorAnswer(
    '`forbidden`: authenticated but not allowed (an admin-only route, or a session owned by another tenant: `tenant mismatch`).',
    errorSchema(['forbidden']),
  ),
  NotFound: errorAnswer(
    "`not_found`: absent; another tenant's data answers exactly the same.",
    errorSchema(['not_found']),
  ),
  MethodNotAllowed: errorAnswer(
    '`method_not_allowed`: a known path with a method it does not list. Any operation may answer it.',
    errorSchema(['method_not_allowed']),
    { Allow: header('The methods the path serves, comma-separated.', { type: 'string', minLength: 1 }) },
  ),
  Conflict: errorAnswer(
    '`conflict`: the write conflicts with what is stored; the operation says when.',
    errorSchema(
      ['conflict'],
      {
        latest: {
          type: ['string', 'null'],
          description: 'Publishing a checkpoint: the current latest checkpoint (null when none).',
        },
      },
      ['latest'],
    ),
  ),
  ThreadBusy: errorAnswer(
    '`thread_busy`: a live run holds the thread; `runId` names it, `retryAfter` (also `Retry-After`) says when its lease ends unless renewed. Nothing was written.',
    schemaRef('ThreadBusyError'),
    { 'Retry-After': threadBusyRetryAfter(false) },
  ),
  RunFenced: errorAnswer(
    '`run_fenced`: the run named does not hold the thread (any more); `status` says what is known of it. Nothing was written.',
    schemaRef('RunFencedError'),
  ),
  ThreadBusyOrRunFenced: errorAnswer(
    '`thread_busy`: no `runId` was given while a live run holds the thread (`Retry-After` as `retryAfter`); `run_fenced`: the `runId` given is not the live holder. Nothing a reader can see was written.',
    { oneOf: [schemaRef('ThreadBusyError'), schemaRef('RunFencedError')] },
    { 'Retry-After': threadBusyRetryAfter(true) },
  ),
  ThreadWriteConflict: errorAnswer(
    '`conflict`: the checkpoint id is stored with other content, the parent is not stored in the namespace, or the thread was deleted and created again during the put; `thread_busy` / `run_fenced` as for the other writes. Nothing a reader can see was written.',
    { oneOf: [errorSchema(['conflict']), schemaRef('ThreadBusyError'), schemaRef('RunFencedError')] },
    { 'Retry-After': threadBusyRetryAfter(true) },
  ),
  PreconditionFailed: errorAnswer(
    '`precondition_failed`: If-Match or If-None-Match not met; nothing was written.',
    errorSchema(['precondition_failed']),
    { ETag: header('The current ETag, when the item exists.', schemaRef('Etag'), true) },
  ),
  PayloadTooLarge: errorAnswer(
    "`payload_too_large`: the body is over the operation's limit, whatever else is wrong with it; or what the operation would store is over the storage's value limit (the operation says when). Nothing was written that a reader can see.",
    errorSchema(['payload_too_large'], {
      limit: { type: 'integer', minimum: 0, description: 'The limit in bytes.' },
    }),
  ),
  MissingObjects: errorAnswer(
    '`missing_objects`: the checkpoint references objects that are not stored, or not with the size it needs.',
    errorSchema(['missing_objects'], {
      missing: {
        type: 'array',
        maxItems: 1000,
        items: { type: 'string' },
        description: 'Their object keys (the first 1,000).',
      },
      missingCount: { type: 'integer', minimum: 1, description: 'How many in all.' },
    }),
  ),
  SnapshotPublishConflict: errorAnswer(
    "`conflict`: the workspace's latest snapshot is not `parent` (nor this snapshot): `latest` names it (null: the workspace has none); nothing was written when the publish was told before writing, and the manifest stays stored as a snapshot that is not the latest when it lost the final compare-and-swap. Without `latest`: the snapshot is already stored with another signature, which it keeps.",
    errorSchema(
      ['conflict'],
      {
        latest: {
          anyOf: [schemaRef('SnapshotId'), { type: 'null' }],
          description: "The workspace's latest snapshot (null when it has none).",
        },
      },
      ['latest'],
    ),
  ),
  SnapshotMissingParts: errorAnswer(
    '`missing_objects`: parts the manifest references are not stored, or not with the size its files need; nothing was written.',
    errorSchema(['missing_objects'], {
      missing: {
        type: 'array',
        maxItems: 1000,
        items: { type: 'string', pattern: String.raw`^[0-9a-f]{64}/(0|[1-9][0-9]{0,9})$` },
        description: 'Their names, `<sha256>/<part>`, sorted (the first 1,000).',
      },
      missingCount: { type: 'integer', minimum: 1, description: 'How many in all.' },
    }),
  ),
  InternalError: errorAnswer(
    '`internal` (a bug) or `integrity_error` (stored bytes failed their hash).',
    errorSchema(['internal', 'integrity_error']),
  ),
  NotConfigured: errorAnswer(
    '`not_configured`: this deployment does not configure the part of Cairn the route belongs to; `setting` names the setting an operator must set (the message says how). Retrying does not help until then; nothing was read or written.',
    errorSchema(['not_configured'], {
      setting: {
        type: 'string',
        pattern: '^CAIRN_[A-Z0-9_]+$',
        description: 'The setting that turns the part on, e.g. CAIRN_TABLE_ENDPOINT or CAIRN_AUDIT.',
      },
    }),
  ),
  NotReady: errorAnswer(
    "`storage_unavailable`: a configured store did not answer (`failed`) or not within the deadline (`timeout`); `checks` gives every store's outcome. Retry after `Retry-After`.",
    errorSchema(['storage_unavailable'], { checks: schemaRef('ReadinessChecks') }),
    { 'Retry-After': header('Seconds to wait before probing again.', { type: 'integer', minimum: 0 }) },
  ),
  StorageUnavailable: errorAnswer(
    '`storage_unavailable`: the storage (or the token signing keys) failed or timed out; retry after `Retry-After`. Never reported as 404.',
    errorSchema(['storage_unavailable']),
    { 'Retry-After': header('Seconds to wait before retrying.', { type: 'integer', minimum: 0 }) },
  ),
};

const headers: Record<string, JsonObject> = {
  RequestId: header(
    "The request's id: the caller's `x-request-id` when it sent a valid one, otherwise a new one. Quote it when reporting a problem.",
    { type: 'string', pattern: '^[A-Za-z0-9._:-]{1,128}$' },
  ),
};

const parameters: Record<string, JsonObject> = {
  RequestId: {
    name: 'x-request-id',
    in: 'header',
    required: false,
    description:
      'Your id for this request (1-128 characters of [A-Za-z0-9._:-]); the answer carries it back.',
    schema: { type: 'string', pattern: '^[A-Za-z0-9._:-]{1,128}$' },
  },
};

export const components = {
  securitySchemes: {
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
  },
  schemas,
  responses,
  headers,
  parameters,
} satisfies JsonObject;
