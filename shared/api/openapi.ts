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
import {
  DEFAULT_BUSY_TIMEOUT_MS,
  DEFAULT_LEASE_MS,
  MAX_BUSY_TIMEOUT_MS,
  MAX_CHANNELS,
  MAX_CHECKPOINT_BYTES,
  MAX_FILTER_KEYS,
  MAX_LEASE_MS,
  MAX_METADATA_BYTES,
  MAX_WRITES_PER_CALL,
  MIN_LEASE_MS,
} from '../threads/validation';
import { MAX_PUT_BODY_BYTES, MAX_SMALL_BODY_BYTES, MAX_WRITES_BODY_BYTES } from '../threads/wire';
import { components } from './components';
import {
  emptyAnswer,
  header,
  jsonAnswer,
  type JsonObject,
  namedError,
  operation,
  pathParameter,
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
// Threads, checkpoints and runs (docs/threads.md)

const THREADS_NOTE =
  "Thread names are per tenant: another tenant's thread of the same name is a different thread, and answers as absent (404) to the caller.";
const WRITER_NOTE =
  'A writer naming a run (`runId`) is accepted only while that run is the live holder (else 409 `run_fenced`); a writer naming none only while no live run holds the thread (else 409 `thread_busy`).';

const threadId = pathParameter('threadId', 'The thread name.', schemaRef('Id'));
const threadCheckpointId = pathParameter(
  'checkpointId',
  'The checkpoint id.',
  schemaRef('ThreadCheckpointId'),
);
const runId = pathParameter('runId', 'The run id, as its start answered.', schemaRef('Id'));
const nsParameter = queryParameter('ns', 'The namespace; default "" (the root).', {
  ...schemaRef('Namespace'),
  default: '',
});
const runIdField = {
  ...schemaRef('Id'),
  description: 'The run sending this; required while a live run holds the thread.',
};
const leaseSeconds = (description: string) => ({
  type: 'number',
  minimum: MIN_LEASE_MS / 1000,
  maximum: MAX_LEASE_MS / 1000,
  description,
});
const smallBody = (schema: JsonObject, description: string, required = true) => ({
  ...json(schema),
  description,
  limitBytes: MAX_SMALL_BODY_BYTES,
  required,
});
const threadBusy = namedError(409, 'ThreadBusy');
const runFenced = namedError(409, 'RunFenced');

const threadListPath = {
  get: operation({
    operationId: 'listThreads',
    summary: "List the caller's threads",
    description: `Ascending by name. \`after\` lists from the first name and skips (about one storage request per 1,000 names skipped); \`cursor\` continues a listing in one. ${THREADS_NOTE}`,
    tag: TAGS.threads,
    access: 'tenant',
    parameters: [
      queryParameter('prefix', 'Names starting with this string; empty: all.', {
        type: 'string',
        pattern: '^[A-Za-z0-9._-]{0,128}$',
      }),
      queryParameter('after', 'Names greater than this one.', schemaRef('Id')),
      queryParameter(
        'cursor',
        'The `next` of the previous page, with the same `prefix` (else 400); instead of `after`, which it overrides.',
        { type: 'string', minLength: 1 },
      ),
      queryParameter('limit', 'Names per page.', {
        type: 'integer',
        minimum: 1,
        maximum: 1000,
        default: 100,
      }),
    ],
    answers: { 200: jsonAnswer('One page of names.', schemaRef('ThreadPage')) },
    errors: [400],
  }),
};

const threadPath = {
  parameters: [threadId],
  put: operation({
    operationId: 'createThread',
    summary: 'Create a thread',
    description: `Idempotent; no body. Checkpoint puts and run starts also create a thread that does not exist. 404 only when the thread, created by another request in the same instant, was deleted before it could be read. ${THREADS_NOTE}`,
    tag: TAGS.threads,
    access: 'tenant',
    answers: {
      200: jsonAnswer('The thread existed.', schemaRef('Thread')),
      201: jsonAnswer('Created.', schemaRef('Thread')),
    },
    errors: [400, 404],
  }),
  get: operation({
    operationId: 'getThread',
    summary: 'A thread: its heads, its run and its recent runs',
    description: THREADS_NOTE,
    tag: TAGS.threads,
    access: 'tenant',
    answers: { 200: jsonAnswer('The thread.', schemaRef('Thread')) },
    errors: [400, 404],
  }),
  delete: operation({
    operationId: 'deleteThread',
    summary: 'Delete a thread with its checkpoints, values and writes',
    description: `Refused with 409 \`thread_busy\` while a live run holds it (finish or interrupt the run first). A thread created again under the name starts empty. ${THREADS_NOTE}`,
    tag: TAGS.threads,
    access: 'tenant',
    answers: { 204: emptyAnswer('Deleted.') },
    errors: [400, 404, threadBusy],
  }),
};

const threadCheckpointsPath = {
  parameters: [threadId],
  post: operation({
    operationId: 'putThreadCheckpoint',
    summary: 'Store a checkpoint and make it the head of its namespace',
    description:
      "Only the channels whose version changed are sent (`values`); every other channel of `channelVersions` must have its version at the parent (else 400 naming `values.<channel>`), and keeps its value. Creates the thread when absent. A checkpoint id stored again with the same content is a retry (200; the head then moves only when it is still the parent or an older id); with other content, 409 `conflict`. A parent not stored in the namespace is 409 `conflict`; 404 when the thread is deleted while the checkpoint is stored. 413 also when the checkpoint's record (metadata, channel names and versions) would pass the storage's value limit (CAIRN_MAX_VALUE_BYTES). " +
      WRITER_NOTE,
    tag: TAGS.threads,
    access: 'tenant',
    body: {
      ...json({
        type: 'object',
        required: ['checkpointId', 'checkpoint', 'channelVersions'],
        additionalProperties: false,
        properties: {
          checkpointId: schemaRef('ThreadCheckpointId'),
          ns: { ...schemaRef('Namespace'), default: '' },
          parent: {
            anyOf: [schemaRef('ThreadCheckpointId'), { type: 'null' }],
            default: null,
            description: 'A stored checkpoint of the namespace, or null (the default) for the first.',
          },
          runId: runIdField,
          v: {
            type: 'integer',
            minimum: 0,
            maximum: Number.MAX_SAFE_INTEGER,
            default: 4,
            description: "The client's checkpoint format version; below 4, reads add `pendingSends`.",
          },
          checkpoint: {
            ...schemaRef('TypedBytes'),
            description: `The serialised checkpoint without its channel values: at most ${MAX_CHECKPOINT_BYTES} bytes once decoded.`,
          },
          metadata: {
            type: 'object',
            default: {},
            description: `Any JSON object of at most ${MAX_METADATA_BYTES} bytes of JSON; its top-level keys can filter the history.`,
          },
          channelVersions: {
            type: 'object',
            maxProperties: MAX_CHANNELS,
            propertyNames: schemaRef('Channel'),
            additionalProperties: schemaRef('ChannelVersion'),
            description: 'Every channel of the checkpoint and its version.',
          },
          values: {
            type: 'object',
            default: {},
            propertyNames: schemaRef('Channel'),
            additionalProperties: { anyOf: [schemaRef('TypedBytes'), { type: 'null' }] },
            description:
              "The channels whose version is new here (each must be in `channelVersions`): the value, or null when the channel has none. A value's decoded bytes and its type tag fit in CAIRN_MAX_VALUE_BYTES less one byte.",
          },
        },
      }),
      description: 'The checkpoint.',
      limitBytes: MAX_PUT_BODY_BYTES,
    },
    answers: {
      200: jsonAnswer(
        'A retry: the checkpoint was already stored with this content; `head` says where the head is.',
        schemaRef('ThreadCheckpointStored'),
      ),
      201: jsonAnswer('Stored; `head` is the checkpoint.', schemaRef('ThreadCheckpointStored')),
    },
    errors: [400, 404, namedError(409, 'ThreadWriteConflict')],
  }),
  get: operation({
    operationId: 'listThreadCheckpoints',
    summary: "A thread's history",
    description:
      'Newest first (by id, descending), each checkpoint whole. A page reads at most 256 records, lists at most 20 pages of 1,000 keys and stops adding checkpoints past 8 MiB of values: it may hold fewer than `limit` with a non-null `next`; follow `next` until it is null.',
    tag: TAGS.threads,
    access: 'tenant',
    parameters: [
      queryParameter(
        'ns',
        'One namespace ("" is the root); absent: every namespace.',
        schemaRef('Namespace'),
      ),
      queryParameter(
        'before',
        'Only checkpoints with a smaller id (every checkpoint of that id is skipped). Not with `cursor` (400).',
        schemaRef('ThreadCheckpointId'),
      ),
      queryParameter('cursor', 'The `next` of the previous page.', { type: 'string', minLength: 1 }),
      queryParameter('limit', 'Checkpoints per page, at most.', {
        type: 'integer',
        minimum: 1,
        maximum: 100,
        default: 10,
      }),
      queryParameter(
        'filter',
        `A JSON object of at most ${MAX_FILTER_KEYS} keys (at most 4096 characters): each top-level metadata key must equal its value, compared as JSON (objects and arrays by content).`,
        { type: 'string', maxLength: 4096, contentMediaType: 'application/json' },
      ),
    ],
    answers: { 200: jsonAnswer('One page of checkpoints.', schemaRef('ThreadCheckpointPage')) },
    errors: [400, 404],
  }),
};

const threadCheckpointLatestPath = {
  parameters: [threadId],
  get: operation({
    operationId: 'getLatestThreadCheckpoint',
    summary: 'The head of a namespace',
    description: 'The checkpoint stored last in the namespace, or the one a rewind moved the head to.',
    tag: TAGS.threads,
    access: 'tenant',
    parameters: [nsParameter],
    answers: { 200: jsonAnswer('The checkpoint.', schemaRef('ThreadCheckpoint')) },
    errors: [400, 404],
  }),
};

const threadCheckpointPath = {
  parameters: [threadId, threadCheckpointId],
  get: operation({
    operationId: 'getThreadCheckpoint',
    summary: 'A checkpoint by id',
    description: '404 when the thread has no checkpoint of that id in the namespace.',
    tag: TAGS.threads,
    access: 'tenant',
    parameters: [nsParameter],
    answers: { 200: jsonAnswer('The checkpoint.', schemaRef('ThreadCheckpoint')) },
    errors: [400, 404],
  }),
};

const threadCheckpointWritesPath = {
  parameters: [threadId, threadCheckpointId],
  post: operation({
    operationId: 'putPendingWrites',
    summary: 'Store the pending writes of one task against a checkpoint',
    description:
      "A regular write (`idx` at least 0) already stored under (task id, index) is kept; a special write (below 0) replaces it. Parallel calls lose nothing. The checkpoint need not be stored yet (LangGraph sends a step's writes before the put of their checkpoint with a DeltaChannel): writes are read only through their checkpoint, so they show once it is stored. An absent thread is created, as a checkpoint put creates it. 413 also when the writes of the checkpoint would pass the storage's value limit (CAIRN_MAX_VALUE_BYTES). The writer is checked just before the append: a run fenced in that instant still gets this call's writes stored. " +
      WRITER_NOTE,
    tag: TAGS.threads,
    access: 'tenant',
    body: {
      ...json({
        type: 'object',
        required: ['taskId', 'writes'],
        additionalProperties: false,
        properties: {
          ns: { ...schemaRef('Namespace'), default: '' },
          taskId: schemaRef('TaskId'),
          taskPath: { ...schemaRef('TaskPath'), default: '' },
          runId: runIdField,
          writes: {
            type: 'array',
            minItems: 1,
            maxItems: MAX_WRITES_PER_CALL,
            items: {
              type: 'object',
              required: ['channel', 'idx', 'type', 'data'],
              additionalProperties: false,
              properties: {
                channel: schemaRef('Channel'),
                idx: schemaRef('WriteIndex'),
                type: schemaRef('TypeTag'),
                data: schemaRef('Base64'),
              },
            },
          },
        },
      }),
      description: 'The writes of one task.',
      limitBytes: MAX_WRITES_BODY_BYTES,
    },
    answers: {
      200: jsonAnswer('Stored; `writes` is how many were sent.', schemaRef('ThreadWritesStored')),
    },
    errors: [400, namedError(409, 'ThreadBusyOrRunFenced')],
  }),
};

const threadRewindPath = {
  parameters: [threadId],
  post: operation({
    operationId: 'rewindThread',
    summary: 'Move the head of a namespace to a stored checkpoint',
    description: `The next checkpoint names it as parent; the checkpoints after it stay readable as an abandoned branch. 404 when the thread, or the checkpoint in the namespace, is not stored. ${WRITER_NOTE}`,
    tag: TAGS.threads,
    access: 'tenant',
    body: smallBody(
      {
        type: 'object',
        required: ['checkpointId'],
        additionalProperties: false,
        properties: {
          ns: { ...schemaRef('Namespace'), default: '' },
          checkpointId: schemaRef('ThreadCheckpointId'),
          runId: runIdField,
        },
      },
      'The checkpoint to rewind to.',
    ),
    answers: { 200: jsonAnswer('The thread after the rewind.', schemaRef('Thread')) },
    errors: [400, 404, namedError(409, 'ThreadBusyOrRunFenced')],
  }),
};

const threadRunsPath = {
  parameters: [threadId],
  post: operation({
    operationId: 'startRun',
    summary: 'Start a run: take the thread with a lease',
    description:
      'Creates the thread when absent, and takes its next fencing token. When a live run holds the thread, `onBusy` decides: `reject` answers 409 `thread_busy` at once; `wait` waits up to `busyTimeout` seconds for the thread, then 409 `thread_busy`; `interrupt` ends the holder as `interrupted` and starts at once. A holder whose lease ended is recorded as `expired`.',
    tag: TAGS.threads,
    access: 'tenant',
    body: smallBody(
      {
        type: 'object',
        additionalProperties: false,
        properties: {
          onBusy: { enum: ['reject', 'wait', 'interrupt'], default: 'wait' },
          busyTimeout: {
            type: 'number',
            minimum: 0,
            maximum: MAX_BUSY_TIMEOUT_MS / 1000,
            default: DEFAULT_BUSY_TIMEOUT_MS / 1000,
            description: 'Seconds `wait` waits for the thread.',
          },
          leaseSeconds: { ...leaseSeconds('The lease in seconds.'), default: DEFAULT_LEASE_MS / 1000 },
        },
      },
      'How to start; may be empty.',
      false,
    ),
    answers: {
      201: jsonAnswer('Started; `interrupted` is the run it interrupted, or null.', schemaRef('StartedRun')),
    },
    errors: [400, threadBusy],
  }),
};

const threadRunPath = {
  parameters: [threadId, runId],
  get: operation({
    operationId: 'getRun',
    summary: 'A run',
    description:
      'The live run (or the last one, once its lease ended) and the last 16 ended runs are known; 404 for others.',
    tag: TAGS.threads,
    access: 'tenant',
    answers: { 200: jsonAnswer('The run.', schemaRef('Run')) },
    errors: [400, 404],
  }),
};

const threadRunHeartbeatPath = {
  parameters: [threadId, runId],
  post: operation({
    operationId: 'renewRunLease',
    summary: "Renew a run's lease from now",
    description:
      "409 `run_fenced` once the run no longer holds the thread (interrupted, finished, failed, or its lease ended: the error's `status` says which); 404 for a run the thread does not know.",
    tag: TAGS.threads,
    access: 'tenant',
    body: smallBody(
      {
        type: 'object',
        additionalProperties: false,
        properties: {
          leaseSeconds: leaseSeconds('The new lease in seconds; default: the lease the run has.'),
        },
      },
      'May be empty.',
      false,
    ),
    answers: { 200: jsonAnswer('The run with its new lease.', schemaRef('LiveRun')) },
    errors: [400, 404, runFenced],
  }),
};

const threadRunFinishPath = {
  parameters: [threadId, runId],
  post: operation({
    operationId: 'finishRun',
    summary: 'End a run and free the thread',
    description:
      'Idempotent: ending it again with the same status answers the same; another status, or a run that no longer holds the thread, is 409 `run_fenced`. 404 for a run the thread does not know.',
    tag: TAGS.threads,
    access: 'tenant',
    body: smallBody(
      {
        type: 'object',
        required: ['status'],
        additionalProperties: false,
        properties: { status: { enum: ['finished', 'failed'] } },
      },
      'How the run ended.',
    ),
    answers: {
      200: jsonAnswer('The ended run, with the status it was ended with.', {
        allOf: [schemaRef('EndedRun')],
        type: 'object',
        properties: { status: { enum: ['finished', 'failed'] } },
      }),
    },
    errors: [400, 404, runFenced],
  }),
};

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
  '/api/threads': threadListPath,
  '/api/threads/{threadId}': threadPath,
  '/api/threads/{threadId}/checkpoints': threadCheckpointsPath,
  '/api/threads/{threadId}/checkpoints/latest': threadCheckpointLatestPath,
  '/api/threads/{threadId}/checkpoints/{checkpointId}': threadCheckpointPath,
  '/api/threads/{threadId}/checkpoints/{checkpointId}/writes': threadCheckpointWritesPath,
  '/api/threads/{threadId}/rewind': threadRewindPath,
  '/api/threads/{threadId}/runs': threadRunsPath,
  '/api/threads/{threadId}/runs/{runId}': threadRunPath,
  '/api/threads/{threadId}/runs/{runId}/heartbeat': threadRunHeartbeatPath,
  '/api/threads/{threadId}/runs/{runId}/finish': threadRunFinishPath,
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
