import { z } from 'zod';

import { Etag, KiB, MiB } from './fields.js';
import { route } from './spec.js';
import { TAGS } from './tags.js';
import { characterProblem, utf8Length } from './text.js';

/**
 * Long-term memory (docs/memory.md): facts per tenant under namespaces. Namespaces and keys travel
 * in the query string, so any name the rules allow reaches the store exactly as sent. The limits
 * are written here once; the memory facts (shared/memory/) import them and check every input again
 * before any I/O (the MCP tools and the batch route call them too), with the same messages.
 */

// ---------------------------------------------------------------------------------------------
// Limits

export const MAX_NAMESPACE_BYTES = 512;
export const MAX_NAMESPACE_SEGMENTS = 16;
export const MAX_FACT_KEY_BYTES = 512;
/** The largest value, as serialised JSON in UTF-8. */
export const MAX_FACT_VALUE_BYTES = 32 * KiB;
/** Ten years: a longer time to live is almost certainly a unit mistake (milliseconds for seconds). */
export const MAX_TTL_SECONDS = 10 * 365 * 24 * 3600;
export const DEFAULT_SEARCH_LIMIT = 10;
export const MAX_SEARCH_LIMIT = 1000;
export const MAX_SEARCH_OFFSET = 10_000;
export const MAX_SEARCH_TEXT_BYTES = 2048;
export const DEFAULT_NAMESPACE_LIMIT = 100;
export const MAX_NAMESPACE_LIMIT = 1000;
/** Rows a search reads at most; past this the answer says `truncated`. */
export const MAX_SEARCH_SCAN_ROWS = 10_000;
/** Bytes of stored values a search reads at most. */
export const MAX_SEARCH_SCAN_BYTES = 48 * MiB;
/** Rows one forget of a namespace deletes at most; `more` then says to call again. */
export const FORGET_ALL_BUDGET = 1000;
/** Distinct namespaces a listing finds at most. */
export const MAX_LISTED_NAMESPACES = 10_000;
/** Fields a search filter names at most. */
export const MAX_FILTER_FIELDS = 32;
/** Numbers in one vector at most. */
export const MAX_VECTOR_DIMS = 4096;
/** Vectors one fact may carry. */
export const MAX_VECTORS_PER_FACT = 8;
export const MAX_FIELD_PATH_BYTES = 256;
/** Operations one batch holds at most. */
export const MAX_BATCH_OPERATIONS = 1000;
/** The largest batch body: room for many facts with vectors, less than a fact's 1 MiB times many. */
export const MAX_BATCH_BODY_BYTES = 4 * MiB;
/**
 * A fact's value is at most 32 KiB of JSON; the body around it gets room for whitespace, ttl and
 * up to 8 vectors of 4,096 numbers written out in JSON (about 25 characters each at most).
 */
export const MAX_FACT_BODY_BYTES = 1 * MiB;
/** A search body: namespace, text, a filter of up to 32 fields and a vector of up to 4,096 numbers. */
export const MAX_SEARCH_BODY_BYTES = 256 * KiB;

/** How closeness to a query vector is measured. */
export const DISTANCES = ['cosine', 'dot', 'l2'] as const;
export type Distance = (typeof DISTANCES)[number];

// ---------------------------------------------------------------------------------------------
// Names

/**
 * Why `namespace` is not a namespace, or null: `/`-separated non-empty segments of the characters
 * a store key may hold, 1-512 bytes of UTF-8, at most 16 segments. `""` (the whole tenant) passes
 * only with `allowEmpty`.
 */
export function namespaceProblem(namespace: string, allowEmpty = false): string | null {
  if (namespace === '') return allowEmpty ? null : 'must not be empty';
  if (utf8Length(namespace) > MAX_NAMESPACE_BYTES) {
    return `must be at most ${MAX_NAMESPACE_BYTES} bytes of UTF-8`;
  }
  const characters = characterProblem(namespace);
  if (characters !== null) return characters;
  const segments = namespace.split('/');
  if (segments.some((segment) => segment === '')) {
    return 'must not have an empty segment or a leading or trailing "/"';
  }
  if (segments.length > MAX_NAMESPACE_SEGMENTS) {
    return `must have at most ${MAX_NAMESPACE_SEGMENTS} segments`;
  }
  return null;
}

/** Why `key` is not a fact's key, or null: 1-512 bytes of UTF-8 of the characters a store key may hold. */
export function factKeyProblem(key: string): string | null {
  if (key === '') return 'must not be empty';
  if (utf8Length(key) > MAX_FACT_KEY_BYTES) return `must be at most ${MAX_FACT_KEY_BYTES} bytes of UTF-8`;
  return characterProblem(key);
}

/** A required string checked by `problem` (null: valid); absent or not a string: `missing`. */
function ruled(problem: (text: string) => string | null, missing: string) {
  return z.string({ error: missing }).superRefine((text, context) => {
    const found = problem(text);
    if (found !== null) context.addIssue({ code: 'custom', message: found });
  });
}

const LENGTH_NOTE =
  'Lengths count UTF-16 code units (an astral character counts 2); unpaired surrogates and Unicode noncharacters (U+FDD0-U+FDEF, U+FFFE and U+FFFF in every plane) are refused.';

/** A namespace, undocumented (for schemas that are not the document's, e.g. the MCP tools'). */
export const namespaceText = ruled(namespaceProblem, 'is required');

const namespaceMeta = {
  id: 'MemoryNamespace',
  description: `A namespace: "/"-separated non-empty segments without control characters or Unicode noncharacters, 1-${MAX_NAMESPACE_BYTES} bytes of UTF-8, at most ${MAX_NAMESPACE_SEGMENTS} segments. ${LENGTH_NOTE}`,
  minLength: 1,
  pattern: String.raw`^(?!/)(?!.*/$)(?!.*//)[^\u0000-\u001F\u007F]+$`,
};

export const MemoryNamespace = namespaceText.meta(namespaceMeta);

/**
 * A namespace or `""` (the whole tenant); absent or not a string: `missing`. Documented as
 * `MemoryNamespace` or `""`, unless `documented` is false.
 */
export function namespaceOrEmpty(missing = 'is required', documented = true) {
  return z.union([documented ? MemoryNamespace : namespaceText, z.literal('')], {
    error: (issue) =>
      typeof issue.input === 'string' ? (namespaceProblem(issue.input, true) ?? 'is invalid') : missing,
  });
}

/** A fact's key, undocumented (for schemas that are not the document's). */
export const factKeyText = ruled(factKeyProblem, 'is required');

const keyMeta = {
  id: 'MemoryKey',
  description: `A fact's key: 1-${MAX_FACT_KEY_BYTES} bytes of UTF-8 without control characters or Unicode noncharacters ("/" is allowed).`,
  minLength: 1,
  pattern: String.raw`^[^\u0000-\u001F\u007F\uFDD0-\uFDEF\uFFFE\uFFFF]*$`,
};

export const MemoryKey = factKeyText.meta(keyMeta);

// ---------------------------------------------------------------------------------------------
// Values, vectors, filters: checked by the memory facts, which name the element at fault
// (`vectors.<path>`, `filter.<field>.<operator>`); the schemas here take any JSON and document it.

export const MemoryVector = z.unknown().meta({
  id: 'MemoryVector',
  description:
    'An embedding: float32 numbers (stored as float32), as a JSON array of numbers or as a string of base64 (standard alphabet, padded) of the float32 numbers little-endian, 4 bytes each (a quarter of the size on the wire).',
  anyOf: [
    { type: 'array', minItems: 1, maxItems: MAX_VECTOR_DIMS, items: { type: 'number' } },
    {
      type: 'string',
      contentEncoding: 'base64',
      minLength: 8,
      maxLength: 4 * Math.ceil((MAX_VECTOR_DIMS * 4) / 3),
    },
  ],
});

const vectorsField = z
  .unknown()
  .optional()
  .meta({
    type: 'object',
    maxProperties: MAX_VECTORS_PER_FACT,
    propertyNames: { minLength: 1, maxLength: MAX_FIELD_PATH_BYTES },
    additionalProperties: { $ref: '#/components/schemas/MemoryVector' },
  });

const filterOperators = {
  type: 'object',
  minProperties: 1,
  additionalProperties: false,
  properties: {
    $eq: {},
    $ne: {},
    $gt: { type: ['number', 'string'] },
    $gte: { type: ['number', 'string'] },
    $lt: { type: ['number', 'string'] },
    $lte: { type: ['number', 'string'] },
    $in: { type: 'array' },
    $nin: { type: 'array' },
    $exists: { type: 'boolean' },
  },
};

export const MemoryFilter = z.unknown().meta({
  id: 'MemoryFilter',
  description:
    'Conditions on top-level fields of the value, all of which must hold: a plain value is equality (deep JSON equality); an object of operators `$eq $ne $gt $gte $lt $lte $in $nin $exists` applies each. Order operators compare two numbers or two strings (else they do not hold); `$ne` and `$nin` hold for a missing field; `$exists: true` holds for a present field, also null.',
  type: 'object',
  maxProperties: MAX_FILTER_FIELDS,
  additionalProperties: { anyOf: [filterOperators, {}] },
});

// ---------------------------------------------------------------------------------------------
// Requests

const TTL_TYPE_RULE = 'must be a whole number of seconds';
const TTL_RULE = `must be a whole number of seconds from 1 to ${MAX_TTL_SECONDS}`;
const ttlField = z
  .number({ error: TTL_TYPE_RULE })
  .int(TTL_TYPE_RULE)
  .min(1, TTL_RULE)
  .max(MAX_TTL_SECONDS, TTL_RULE);

const WHOLE = 'must be a whole number';
const range = (min: number, max: number) => `must be a whole number from ${min} to ${max}`;
/** A whole number from `min` to `max`: not a number is `must be a whole number`, else the range. */
const wholeIn = (min: number, max: number) =>
  z.number({ error: WHOLE }).int(range(min, max)).min(min, range(min, max)).max(max, range(min, max));
/** The same in a query string (a fraction is `must be a whole number`, as it is not one). */
const wholeQueryIn = (min: number, max: number) =>
  z.coerce.number({ error: WHOLE }).int(WHOLE).min(min, range(min, max)).max(max, range(min, max));

const NAMESPACE_PARAMETER = 'The namespace, e.g. `users/42`.';
const KEY_PARAMETER = "The fact's key within the namespace.";

/** The fact of `/api/memory/facts`: its namespace and key. */
export const factQuery = z.object({
  namespace: MemoryNamespace.describe(NAMESPACE_PARAMETER),
  key: MemoryKey.describe(KEY_PARAMETER),
});

/**
 * The fact of a write: documented as {@link factQuery}, its names checked by the memory facts
 * after the value's size, so that a value over its limit is 413 whatever else is wrong.
 */
const rememberQuery = z.object({
  namespace: z.string({ error: 'is required' }).meta(namespaceMeta).describe(NAMESPACE_PARAMETER),
  key: z.string({ error: 'is required' }).meta(keyMeta).describe(KEY_PARAMETER),
});

export const rememberBody = z.strictObject({
  value: z.unknown().describe(`Any JSON value, at most ${MAX_FACT_VALUE_BYTES} bytes serialised.`),
  ttl: ttlField.optional().describe('Seconds until the fact expires; absent: never.'),
  vectors: vectorsField.describe(
    "Field path (`$`, `text`, `a.b[*]`, ...) → its embedding, computed by the caller. Every vector of a tenant has the dimension count of the tenant's first vector (else 400 naming `vectors.<path>`). Stored and sealed with the value; a write without `vectors` leaves the fact without vectors.",
  ),
});

export const searchBody = z.strictObject({
  namespace: namespaceOrEmpty('is required ("" searches every namespace)'),
  text: z.string().optional().describe('Words to look for; absent or empty: no ranking.'),
  vector: MemoryVector.optional(),
  distance: z.enum(DISTANCES, { error: `must be one of ${DISTANCES.join(', ')}` }).default('cosine'),
  limit: wholeIn(1, MAX_SEARCH_LIMIT).default(DEFAULT_SEARCH_LIMIT),
  offset: wholeIn(0, MAX_SEARCH_OFFSET).default(0),
  filter: MemoryFilter.optional(),
});

export const namespacesQuery = z.object({
  prefix: namespaceOrEmpty().optional().describe('Only this namespace and below; default all.'),
  suffix: namespaceOrEmpty().optional().describe('Only namespaces ending with these segments.'),
  maxDepth: wholeQueryIn(1, MAX_NAMESPACE_SEGMENTS)
    .optional()
    .describe('Cut namespaces to this many segments.'),
  limit: wholeQueryIn(1, MAX_NAMESPACE_LIMIT)
    .default(DEFAULT_NAMESPACE_LIMIT)
    .describe('Namespaces per page.'),
  offset: wholeQueryIn(0, MAX_LISTED_NAMESPACES).default(0).describe('Namespaces to skip.'),
});

export const forgetAllQuery = z.object({
  namespace: namespaceOrEmpty().describe('The namespace; empty only with `all=true`.'),
  all: z
    .enum(['true', 'false'], { error: 'must be true or false' })
    .default('false')
    .describe('`true` to allow the empty namespace (the whole tenant).'),
});

/** An If-Match: `*`, or one quoted ETag (the header of a fact's route, a batch operation's `ifMatch`). */
// eslint-disable-next-line no-control-regex
const IF_MATCH_PATTERN = /^(\*|"[^"\u0000-\u001F\u007F]*")$/;
const IF_MATCH_RULE = 'must be "*" or one quoted ETag as returned by Cairn';

/**
 * The conditions of a batch operation, as the headers of its route, with the same checks: an
 * `ifMatch` that is no ETag is a 400 naming it, as the header is, not a 412 against the fact.
 */
export const batchConditions = {
  ifMatch: z
    .string({ error: IF_MATCH_RULE })
    .regex(IF_MATCH_PATTERN, IF_MATCH_RULE)
    .optional()
    .describe('As the `If-Match` header: an ETag, or `*`.'),
  ifNoneMatch: z
    .literal('*', { error: 'must be "*"' })
    .optional()
    .describe('As the `If-None-Match` header: `*`.'),
};

/** The operations of a batch, by `op`: each as its route takes it. */
export const batchOperations = {
  get: z.strictObject({ op: z.literal('get'), namespace: MemoryNamespace, key: MemoryKey }),
  put: z.strictObject({
    op: z.literal('put'),
    namespace: MemoryNamespace,
    key: MemoryKey,
    value: z.unknown().describe('Any JSON value.'),
    ttl: ttlField.optional(),
    vectors: vectorsField,
    ...batchConditions,
  }),
  delete: z.strictObject({
    op: z.literal('delete'),
    namespace: MemoryNamespace,
    key: MemoryKey,
    ifMatch: batchConditions.ifMatch,
  }),
  search: z.strictObject({ op: z.literal('search'), ...searchBody.shape }),
  listNamespaces: z.strictObject({
    op: z.literal('listNamespaces'),
    prefix: namespaceOrEmpty().optional(),
    suffix: namespaceOrEmpty().optional(),
    maxDepth: wholeIn(1, MAX_NAMESPACE_SEGMENTS).optional(),
    limit: wholeIn(1, MAX_NAMESPACE_LIMIT).optional(),
    offset: wholeIn(0, MAX_LISTED_NAMESPACES).optional(),
  }),
};

export type BatchOperation = {
  [K in keyof typeof batchOperations]: z.output<(typeof batchOperations)[K]>;
}[keyof typeof batchOperations];

/**
 * The batch body. Any item is taken in its place (a bad one gets its own 400 naming
 * `operations.<i>.<field>` and the others run), so the schema of an item accepts anything too.
 */
export const batchBody = z.strictObject({
  operations: z
    .array(
      z.union([
        z.discriminatedUnion('op', [
          batchOperations.get,
          batchOperations.put,
          batchOperations.delete,
          batchOperations.search,
          batchOperations.listNamespaces,
        ]),
        z
          .unknown()
          .describe(
            'Anything else: answered in its place with its own 400 error naming the field (`operations.<i>.<field>`); the other operations run.',
          ),
      ]),
      { error: 'must be an array of operations' },
    )
    .min(1, 'must hold at least one operation')
    .max(MAX_BATCH_OPERATIONS, `must hold at most ${MAX_BATCH_OPERATIONS} operations`),
});

// ---------------------------------------------------------------------------------------------
// Answers

const millis = (description: string) => z.number().int().min(0).describe(description);

const itemShape = {
  namespace: z
    .array(z.string().min(1))
    .min(1)
    .max(MAX_NAMESPACE_SEGMENTS)
    .describe("The namespace's segments."),
  key: MemoryKey,
  value: z.unknown().describe('The JSON value as remembered.'),
  createdAt: millis('Unix milliseconds of the first write.'),
  updatedAt: millis('Unix milliseconds of the last write; strictly increasing per fact.'),
  expiresAt: millis('Unix milliseconds from which the fact is absent; only with a time to live.').optional(),
  vectorFields: z
    .array(z.string())
    .optional()
    .describe('The field paths the fact has vectors for; absent when it has none.'),
  etag: Etag,
};

/** A fact as answered. Times are Unix milliseconds. */
export const MemoryItem = z.object(itemShape).meta({ id: 'MemoryItem' });

/** A search result: the fact and, for a search with text or a vector, its relevance in [0, 1]. */
export const ScoredMemoryItem = z.object({
  ...itemShape,
  score: z
    .number()
    .min(0)
    .max(1)
    .optional()
    .describe('Relevance to the text or the vector; only for a search with either.'),
});

export const MemorySearchResult = z
  .object({
    items: z.array(ScoredMemoryItem),
    truncated: z
      .boolean()
      .describe('True when the namespace held more than one search reads; results cover what was read.'),
  })
  .meta({ id: 'MemorySearchResult' });

export const MemoryNamespaceList = z
  .object({
    namespaces: z.array(z.array(z.string().min(1)).min(1)).describe('Each namespace as its segments.'),
    truncated: z.boolean().describe('True when more namespaces exist than one listing finds.'),
  })
  .meta({ id: 'MemoryNamespaceList' });

export const MemoryForgotten = z
  .object({
    deleted: z.number().int().min(0).describe('Live facts deleted by this call.'),
    more: z.boolean().describe('True when facts may remain: call again.'),
  })
  .meta({ id: 'MemoryForgotten' });

export const MemoryBatchResult = z.object({
  status: z.number().int().describe("The status the operation's route would answer."),
  item: MemoryItem.nullable().optional().describe('get: the fact or null; put: the fact stored.'),
  created: z.boolean().optional().describe('put: no live fact was there.'),
  deleted: z.boolean().optional().describe('delete: a live fact was there.'),
  items: z.array(ScoredMemoryItem).optional().describe('search: as the search route.'),
  truncated: z.boolean().optional(),
  namespaces: MemoryNamespaceList.shape.namespaces
    .optional()
    .describe('listNamespaces: as the listing route.'),
  error: z
    .looseObject({ code: z.string(), message: z.string().min(1) })
    .optional()
    .describe("The operation's error JSON, as its route would answer it."),
  etag: z.string().optional().describe('On 412: the current ETag of the fact, when it exists.'),
});

export const MemoryBatchResults = z
  .object({ results: z.array(MemoryBatchResult).describe('One per operation, in order.') })
  .meta({ id: 'MemoryBatchResults' });

// ---------------------------------------------------------------------------------------------
// Routes

const NOTE =
  "Facts are per tenant: another tenant's fact is absent for the caller. Without a table service (CAIRN_TABLE_ENDPOINT) on the Blob backend these routes answer 501 `not_configured` naming it.";

const conditions = {
  'If-Match': {
    description:
      "Write only if the fact's current ETag is this one (an absent fact fails), or with `*` only if it exists. Not met: 412, nothing written. Not with If-None-Match (400).",
    schema: z.string().regex(IF_MATCH_PATTERN),
  },
  'If-None-Match': {
    description: 'Only `*`: write only if no live fact is there. Not met: 412, nothing written.',
    schema: z.literal('*'),
  },
};

const factEtag = { ETag: { description: "The fact's ETag.", schema: Etag } };

export const memoryFactRoute = route({
  name: 'memoryFact',
  route: 'memory/facts',
  operations: {
    PUT: {
      operationId: 'rememberFact',
      summary: 'Remember a fact (create or replace)',
      description: `Replaces the value, keeps \`createdAt\`, moves \`updatedAt\` forward (strictly, also within a millisecond). \`ttl\` (seconds) makes the fact expire; without it the fact never expires (a previous ttl is cleared). \`If-Match\` makes it a compare-and-swap on the fact's ETag (412 with the current ETag when another write came first; an expired fact is absent); \`If-None-Match: *\` creates only. The value is at most ${MAX_FACT_VALUE_BYTES} bytes as JSON (else 413). ${NOTE}`,
      tag: TAGS.memory,
      auth: 'tenant',
      query: rememberQuery,
      headers: conditions,
      body: {
        kind: 'json',
        description: 'The value, its time to live and its vectors.',
        schema: rememberBody,
        limit: MAX_FACT_BODY_BYTES,
      },
      answers: {
        200: { description: 'Replaced.', body: MemoryItem, headers: factEtag },
        201: { description: 'Created (no live fact was there).', body: MemoryItem, headers: factEtag },
      },
      errors: [400, 412, 501],
    },
    GET: {
      operationId: 'recallFact',
      summary: 'Recall a fact',
      description: `404 when absent or expired; reading never extends a time to live. ${NOTE}`,
      tag: TAGS.memory,
      auth: 'tenant',
      query: factQuery,
      answers: { 200: { description: 'The fact.', body: MemoryItem, headers: factEtag } },
      errors: [400, 404, 501],
    },
    DELETE: {
      operationId: 'forgetFact',
      summary: 'Forget a fact',
      description: `204 also when absent. \`If-Match\`: only that version (412 when it is not the current one, also when the fact is absent). ${NOTE}`,
      tag: TAGS.memory,
      auth: 'tenant',
      query: factQuery,
      headers: conditions,
      answers: { 204: { description: 'Forgotten, or absent.' } },
      errors: [400, 412, 501],
    },
  },
});

export const memorySearchRoute = route({
  name: 'memorySearch',
  route: 'memory/search',
  operations: {
    POST: {
      operationId: 'searchFacts',
      summary: 'Search facts in a namespace and below',
      description: `Covers the namespace and every namespace below it by whole segments (\`users\` covers \`users/42\`, not \`usersX/1\`; \`""\` covers the tenant). With \`text\`: facts whose key or value's strings contain one of its words (whole words, case-insensitive), best first, each with \`score\` in [0, 1] (BM25, normalised); without text or vector: every fact, newest \`updatedAt\` first. With \`vector\`: the facts with vectors, closest first (a fact is as close as its closest field's vector; \`distance\` cosine (default), dot or l2; score (1 + cos) / 2, 1 / (1 + e^-dot), 1 / (1 + distance)), then the facts without vectors, newest first and without score. With both: the facts found by either, by reciprocal rank fusion (each ranking adds 1 / (60 + rank); score: the sum divided by 2 / 61). Exact search: every fact read is compared. Ties: newer first, then namespace and key. \`filter\` keeps facts whose value's top-level fields meet every condition. A search reads at most ${MAX_SEARCH_SCAN_ROWS} rows or ${MAX_SEARCH_SCAN_BYTES} bytes of values; past that \`truncated\` is true and the results cover the part read. Expired facts are never results. ${NOTE}`,
      tag: TAGS.memory,
      auth: 'tenant',
      body: {
        kind: 'json',
        description: 'Where and what to look for.',
        schema: searchBody,
        limit: MAX_SEARCH_BODY_BYTES,
      },
      answers: { 200: { description: 'The results.', body: MemorySearchResult } },
      errors: [400, 501],
    },
  },
});

export const memoryNamespacesRoute = route({
  name: 'memoryNamespaces',
  route: 'memory/namespaces',
  operations: {
    GET: {
      operationId: 'listMemoryNamespaces',
      summary: 'List the namespaces that hold facts',
      description: `Distinct namespaces with at least one live fact, at or below \`prefix\`, ending with \`suffix\` (whole segments), cut to \`maxDepth\` segments (then distinct again), ordered segment by segment, paged with \`offset\` and \`limit\`. At most ${MAX_LISTED_NAMESPACES} namespaces are found (then \`truncated\`). ${NOTE}`,
      tag: TAGS.memory,
      auth: 'tenant',
      query: namespacesQuery,
      answers: { 200: { description: 'One page of namespaces.', body: MemoryNamespaceList } },
      errors: [400, 501],
    },
    DELETE: {
      operationId: 'forgetNamespace',
      summary: 'Forget a namespace and everything below it',
      description: `Deletes the facts of the namespace and of every namespace below it (\`namespace=\` with \`all=true\`: every fact of the tenant; without \`all=true\` an empty namespace is a 400). At most ${FORGET_ALL_BUDGET} facts per call: \`more\` true means call again. Idempotent; facts written while it runs may remain. ${NOTE}`,
      tag: TAGS.memory,
      auth: 'tenant',
      query: forgetAllQuery,
      answers: { 200: { description: 'What was deleted.', body: MemoryForgotten } },
      errors: [400, 501],
    },
  },
});

export const memoryBatchRoute = route({
  name: 'memoryBatch',
  route: 'memory/batch',
  operations: {
    POST: {
      operationId: 'memoryBatch',
      summary: 'Run several memory operations in one request',
      description: `The operations LangGraph's \`BaseStore.batch\` gives (get, put, delete, search, listNamespaces), at most ${MAX_BATCH_OPERATIONS}, run in order and answered in order: each result carries the \`status\` its route would answer and its result fields, or its error JSON (and \`etag\` on 412). Not atomic: an operation that fails (400 naming \`operations.<i>.<field>\`, 412, 413, 503) fails alone and the others go on; a later operation sees what an earlier one wrote. Each operation has its route's semantics (checks, compare-and-swap, an audit record per write); puts without a condition that follow one another are stored together (on Table Storage one transaction per up to 98 facts when the service knows their versions or they are new). The body is at most ${MAX_BATCH_BODY_BYTES} bytes (else 413); \`operations\` empty, not an array or longer is a 400 naming it. ${NOTE}`,
      tag: TAGS.memory,
      auth: 'tenant',
      body: {
        kind: 'json',
        description: 'The operations, in order.',
        schema: batchBody,
        limit: MAX_BATCH_BODY_BYTES,
        // The array and the object around each operation's fields: an operation nests as deep as
        // its route's body (a put's value 63 levels, as `PUT /api/memory/facts` takes it).
        wrapDepth: 2,
      },
      answers: { 200: { description: 'One result per operation, in order.', body: MemoryBatchResults } },
      errors: [400, 501],
    },
  },
});
