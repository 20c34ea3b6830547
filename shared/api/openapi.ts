import { BLOCK_BYTES, MAX_FILES_PER_CHECKPOINT } from '../archive/identifiers';
import { MAX_JSON_DEPTH } from '../json';
import { mcpBodyLimit } from '../mcp/limits';
import { ROUTE_SPECS } from '../protocol';
import { DEFAULT_MAX_VALUE_BYTES } from '../protocol/fields';
import { generatePaths } from '../protocol/openapi';
import { TAGS } from '../protocol/tags';
import { MAX_OBJECT_BYTES } from '../storage/immutableObjectStore';
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
  bytesAnswer,
  emptyAnswer,
  header,
  jsonAnswer,
  type JsonObject,
  namedError,
  operation,
  pathParameter,
  queryParameter,
  schemaRef,
} from './openapiKit';

/**
 * Cairn's HTTP API as an OpenAPI 3.1 document: every route the app registers, with its methods,
 * parameters, bodies, answers and errors. Served at `GET /api/openapi.json`. A test holds it to the
 * app's registrations both ways (a route missing here, or a path here that no route serves, fails
 * it), and the end-to-end tests check every answer they get against it: a new route is added here
 * with one `operation(...)` per method, or the tests fail.
 */

const KiB = 1024;

const json = (schema: JsonObject) => ({ mediaType: 'application/json', schema }) as const;

// ---------------------------------------------------------------------------------------------
// Session archives

const SESSIONS_NOTE =
  "A session id belongs to the tenant that first writes to it: another tenant's write is 403 `tenant mismatch`, its read 404. Without the session index configured (CAIRN_TABLE_ENDPOINT) these routes answer 501 `not_configured` naming it. For a tenant CAIRN_ENCRYPT_TENANTS lists, objects, manifests and the index's `data` are sealed at rest (sizes and answers unchanged); stored bytes that do not open answer 500 `integrity_error`, never 404.";

const sid = pathParameter('sid', 'The session id.', schemaRef('Id'));
const cid = pathParameter('cid', 'A checkpoint id, or `latest` for the latest checkpoint.', schemaRef('Id'));

const sessionsPath = {
  get: operation({
    operationId: 'listSessions',
    summary: "List the caller's sessions",
    description: `Ascending by id. ${SESSIONS_NOTE}`,
    tag: TAGS.sessions,
    access: 'tenant',
    parameters: [
      queryParameter('after', 'Sessions with an id greater than this one.', {
        type: 'string',
        pattern: '^[A-Za-z0-9._-]{0,128}$',
      }),
      queryParameter('limit', 'Sessions per page.', {
        type: 'integer',
        minimum: 1,
        maximum: 1000,
        default: 100,
      }),
    ],
    answers: { 200: jsonAnswer('One page of sessions.', schemaRef('SessionPage')) },
    errors: [400, 501],
  }),
};

const sessionPath = {
  parameters: [sid],
  get: operation({
    operationId: 'getSession',
    summary: "A session's index record",
    description: SESSIONS_NOTE,
    tag: TAGS.sessions,
    access: 'tenant',
    answers: { 200: jsonAnswer('The record.', schemaRef('Session')) },
    errors: [400, 404, 501],
  }),
};

const sessionObjectPath = {
  parameters: [
    sid,
    pathParameter('objectKey', 'The object key, the rest of the path.', schemaRef('ObjectKey'), {
      restOfPath: true,
    }),
  ],
  put: operation({
    operationId: 'putSessionObject',
    summary: 'Store a block or a tail',
    description: `Objects are immutable. ${SESSIONS_NOTE}`,
    tag: TAGS.sessions,
    access: 'tenant',
    body: {
      mediaType: 'application/octet-stream',
      description: `The bytes: a block exactly ${BLOCK_BYTES}, a tail 1-${BLOCK_BYTES - 1} (else 400).`,
      schema: { type: 'string', contentMediaType: 'application/octet-stream' },
      limitBytes: MAX_OBJECT_BYTES,
    },
    answers: {
      200: jsonAnswer('The same bytes were already stored.', schemaRef('ObjectStored')),
      201: jsonAnswer('Stored.', schemaRef('ObjectStored')),
    },
    errors: [400, 403, 409, 501],
  }),
  get: operation({
    operationId: 'getSessionObject',
    summary: 'Read a block or a tail',
    description: SESSIONS_NOTE,
    tag: TAGS.sessions,
    access: 'tenant',
    answers: { 200: bytesAnswer('The bytes.') },
    errors: [400, 404, 501],
  }),
};

const checkpointsPath = {
  parameters: [sid],
  post: operation({
    operationId: 'publishCheckpoint',
    summary: 'Publish a checkpoint',
    description:
      'Every referenced object must be stored with the size the files need (else 422). The manifest is stored immutably: publishing the same checkpoint again answers as the first time did; a different manifest under an existing checkpoint id is 409. `latest` then moves to `checkpointId` only if it equals `parent` (null: no checkpoint yet), otherwise 409 with `latest` in the error. ' +
      SESSIONS_NOTE,
    tag: TAGS.sessions,
    access: 'tenant',
    body: {
      ...json(schemaRef('PublishRequest')),
      description: `The manifest: at most ${MAX_FILES_PER_CHECKPOINT} files.`,
      limitBytes: 512 * KiB,
    },
    answers: { 201: jsonAnswer('Published; `latest` is the new checkpoint.', schemaRef('Published')) },
    errors: [400, 403, 409, 422, 501],
  }),
};

const checkpointPath = {
  parameters: [sid, cid],
  get: operation({
    operationId: 'getCheckpoint',
    summary: "A checkpoint's manifest",
    description: SESSIONS_NOTE,
    tag: TAGS.sessions,
    access: 'tenant',
    answers: { 200: jsonAnswer('The manifest.', schemaRef('Manifest')) },
    errors: [400, 404, 501],
  }),
};

const checkpointFilePath = {
  parameters: [
    sid,
    cid,
    pathParameter('path', "The file's path in the manifest, the rest of the path.", schemaRef('Key'), {
      restOfPath: true,
    }),
  ],
  get: operation({
    operationId: 'getCheckpointFile',
    summary: "A checkpoint file's bytes",
    description:
      "Streamed and checked against the manifest's `sha256`: a mismatch is a 500 `integrity_error` (for a large file, whose answer has started, the connection is cut before the last bytes). " +
      SESSIONS_NOTE,
    tag: TAGS.sessions,
    access: 'tenant',
    answers: {
      200: bytesAnswer("The file's bytes.", {
        'Content-Length': header('The size of the file.', { type: 'integer', minimum: 0 }),
        'Repr-Digest': header('RFC 9530: `sha-256=:<base64 of the SHA-256>:`.', {
          type: 'string',
          pattern: '^sha-256=:[A-Za-z0-9+/]{43}=:$',
        }),
      }),
    },
    errors: [400, 404, 501],
  }),
};

// ---------------------------------------------------------------------------------------------
// Fleet coordination

const COORDINATION_NOTE =
  "Lives in the tenant's key/value space, so it is readable with the key/value routes too.";

const chatIdParameter = pathParameter('chatId', 'The chat id.', schemaRef('ChatId'));

const emailCursorPath = {
  get: operation({
    operationId: 'getEmailCursor',
    summary: 'Read the email cursor',
    description: `Key \`poll_state/email_cursor.txt\`. ${COORDINATION_NOTE}`,
    tag: TAGS.coordination,
    access: 'tenant',
    answers: { 200: jsonAnswer('The cursor, or why there is none.', schemaRef('EmailCursor')) },
  }),
};

const emailCursorInitPath = {
  post: operation({
    operationId: 'initEmailCursor',
    summary: 'Create the email cursor if absent',
    description: 'Create-only; also enrols the tenant in the `emailWindowPoll` timer.',
    tag: TAGS.coordination,
    access: 'tenant',
    body: {
      ...json({
        type: 'object',
        additionalProperties: false,
        properties: { now: { ...schemaRef('Timestamp'), description: 'The initial cursor; default: now.' } },
      }),
      description: 'May be empty.',
      limitBytes: 16 * KiB,
      required: false,
    },
    answers: {
      200: jsonAnswer('Whether this call created it.', {
        type: 'object',
        required: ['initialized'],
        additionalProperties: false,
        properties: { initialized: { type: 'boolean' } },
      }),
    },
    errors: [400],
  }),
};

const emailCursorClaimPath = {
  post: operation({
    operationId: 'claimEmailWindow',
    summary: 'Claim the window up to newCursor',
    description: 'One conditional write on the ETag as read, no retry on conflict.',
    tag: TAGS.coordination,
    access: 'tenant',
    body: { ...json(schemaRef('EmailClaim')), description: 'The claim.', limitBytes: 16 * KiB },
    answers: {
      200: jsonAnswer('The outcome.', {
        type: 'object',
        required: ['result'],
        additionalProperties: false,
        properties: {
          result: {
            enum: ['won', 'lost', 'failed', 'unknown'],
            description: 'unknown: the write may have happened; settle it with the same body.',
          },
        },
      }),
    },
    errors: [400],
  }),
};

const emailCursorSettlePath = {
  post: operation({
    operationId: 'settleEmailClaim',
    summary: 'Settle a claim whose outcome was unknown',
    tag: TAGS.coordination,
    access: 'tenant',
    body: { ...json(schemaRef('EmailClaim')), description: 'The body of the claim.', limitBytes: 16 * KiB },
    answers: {
      200: jsonAnswer('true: the claim won; false: it lost; null: cannot tell yet.', {
        type: 'object',
        required: ['result'],
        additionalProperties: false,
        properties: { result: { type: ['boolean', 'null'] } },
      }),
    },
    errors: [400],
  }),
};

const watchedChatsPath = {
  get: operation({
    operationId: 'getWatchedChats',
    summary: 'Read the watched chats',
    description: `Key \`watched_chats\`. ${COORDINATION_NOTE}`,
    tag: TAGS.coordination,
    access: 'tenant',
    answers: { 200: jsonAnswer('The list, or why there is none.', schemaRef('WatchedChats')) },
  }),
  post: operation({
    operationId: 'addWatchedChats',
    summary: 'Add chats to the watched list',
    description: 'Up to 4 attempts on conflict.',
    tag: TAGS.coordination,
    access: 'tenant',
    body: {
      ...json({
        type: 'object',
        required: ['chatIds'],
        additionalProperties: false,
        properties: { chatIds: { type: 'array', maxItems: 1000, items: schemaRef('ChatId') } },
      }),
      description: 'The chat ids to add.',
      limitBytes: 256 * KiB,
    },
    answers: {
      200: jsonAnswer('Whether the list was written, and the ids not listed before.', {
        type: 'object',
        required: ['persisted', 'added'],
        additionalProperties: false,
        properties: { persisted: { type: 'boolean' }, added: { type: 'array', items: { type: 'string' } } },
      }),
    },
    errors: [400],
  }),
};

const chatCursorPath = {
  parameters: [chatIdParameter],
  get: operation({
    operationId: 'getChatCursor',
    summary: "Read a chat's cursor",
    description: `Key \`chat_cursors/<percent-encoded chat id>.json\`. ${COORDINATION_NOTE}`,
    tag: TAGS.coordination,
    access: 'tenant',
    answers: { 200: jsonAnswer('The cursor, or why there is none.', schemaRef('ChatCursorRead')) },
    errors: [400],
  }),
};

const chatClaimsPath = {
  parameters: [chatIdParameter],
  post: operation({
    operationId: 'claimChatMessages',
    summary: 'Claim messages of a chat for delivery',
    description:
      'Each candidate id is claimed by exactly one caller across all concurrent callers, including the first claims on an absent cursor; up to 4 attempts; anything uncertain claims nothing.',
    tag: TAGS.coordination,
    access: 'tenant',
    body: {
      ...json({
        type: 'object',
        required: ['candidateIds'],
        additionalProperties: false,
        properties: {
          candidateIds: {
            type: 'array',
            maxItems: 500,
            items: {
              type: 'string',
              minLength: 1,
              maxLength: 256,
              pattern: String.raw`^[^\u0000-\u001F\u007F]*$`,
            },
          },
          lastTs: { anyOf: [schemaRef('Timestamp'), { type: 'null' }] },
        },
      }),
      description: 'The message ids to claim, and the newest message time seen.',
      limitBytes: 128 * KiB,
    },
    answers: {
      200: jsonAnswer('The ids this caller claimed, and why nothing was claimed when so.', {
        type: 'object',
        required: ['claimed', 'reason'],
        additionalProperties: false,
        properties: {
          claimed: { type: 'array', items: { type: 'string' } },
          reason: { enum: [null, 'unresolved', 'contention'] },
        },
      }),
    },
    errors: [400],
  }),
};

const promisesPath = {
  get: operation({
    operationId: 'listPromises',
    summary: 'List promises',
    description: `Key \`promises.jsonl\`, in creation order. ${COORDINATION_NOTE}`,
    tag: TAGS.coordination,
    access: 'tenant',
    parameters: [queryParameter('status', 'Which promises.', { enum: ['open', 'all'], default: 'open' })],
    answers: {
      200: jsonAnswer('The promises.', {
        type: 'object',
        required: ['promises'],
        additionalProperties: false,
        properties: { promises: { type: 'array', items: schemaRef('Promise') } },
      }),
    },
    errors: [400],
  }),
  post: operation({
    operationId: 'addPromise',
    summary: 'Record a promise',
    tag: TAGS.coordination,
    access: 'tenant',
    body: {
      ...json({
        type: 'object',
        required: ['chatId', 'description'],
        additionalProperties: false,
        properties: {
          chatId: { type: 'string', maxLength: 1024, description: 'Not blank.' },
          description: { type: 'string', maxLength: 4000, description: 'Not blank.' },
          dueBy: { anyOf: [schemaRef('Timestamp'), { type: 'null' }] },
        },
      }),
      description: 'The promise.',
      limitBytes: 16 * KiB,
    },
    answers: { 201: jsonAnswer('The open promise.', schemaRef('Promise')) },
    errors: [400, 409],
  }),
};

const promiseResolvePath = {
  parameters: [pathParameter('id', 'The promise id.', { type: 'string', minLength: 1 })],
  post: operation({
    operationId: 'resolvePromise',
    summary: 'Resolve a promise',
    description: 'Resolving twice changes nothing. 409 when the promises kept changing through one retry.',
    tag: TAGS.coordination,
    access: 'tenant',
    body: {
      ...json({
        type: 'object',
        required: ['resolution'],
        additionalProperties: false,
        properties: { resolution: { type: 'string', maxLength: 4000, description: 'Not blank.' } },
      }),
      description: 'How it was resolved.',
      limitBytes: 16 * KiB,
    },
    answers: { 200: jsonAnswer('The resolved promise.', schemaRef('Promise')) },
    errors: [400, 404, 409],
  }),
};

const interactionsPath = {
  post: operation({
    operationId: 'logInteraction',
    summary: 'Log an interaction',
    description: 'Appended to the log of the UTC day, key `interactions/<YYYY-MM-DD>.jsonl`.',
    tag: TAGS.coordination,
    access: 'tenant',
    body: {
      ...json({
        type: 'object',
        required: ['channel', 'direction', 'sender', 'summary'],
        additionalProperties: false,
        properties: {
          channel: { type: 'string', maxLength: 64, description: 'Not blank.' },
          direction: { enum: ['inbound', 'outbound'] },
          sender: { type: 'string', maxLength: 512 },
          summary: { type: 'string', maxLength: 8000, description: 'Not blank.' },
          recipient: { type: 'string', maxLength: 512 },
          action: { type: 'string', maxLength: 256 },
          contentRef: { type: 'string', maxLength: 2048 },
          metadata: { type: 'object' },
        },
      }),
      description: 'The interaction.',
      limitBytes: 64 * KiB,
    },
    answers: { 201: jsonAnswer('The entry as logged.', schemaRef('Interaction')) },
    errors: [400],
  }),
};

const interactionDayPath = {
  parameters: [
    pathParameter('day', 'A UTC day.', {
      type: 'string',
      format: 'date',
      pattern: String.raw`^\d{4}-\d{2}-\d{2}$`,
    }),
  ],
  get: operation({
    operationId: 'getInteractionDay',
    summary: "A day's interactions",
    description: `In the order logged; lines that are not entries are skipped. ${COORDINATION_NOTE}`,
    tag: TAGS.coordination,
    access: 'tenant',
    answers: {
      200: jsonAnswer('The entries (none when the day has no log).', {
        type: 'object',
        required: ['entries'],
        additionalProperties: false,
        properties: { entries: { type: 'array', items: schemaRef('Interaction') } },
      }),
    },
    errors: [400],
  }),
};

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
  '/api/sessions': sessionsPath,
  '/api/sessions/{sid}': sessionPath,
  '/api/sessions/{sid}/objects/{objectKey}': sessionObjectPath,
  '/api/sessions/{sid}/checkpoints': checkpointsPath,
  '/api/sessions/{sid}/checkpoints/{cid}': checkpointPath,
  '/api/sessions/{sid}/checkpoints/{cid}/files/{path}': checkpointFilePath,
  '/api/poll/email-cursor': emailCursorPath,
  '/api/poll/email-cursor/init': emailCursorInitPath,
  '/api/poll/email-cursor/claim': emailCursorClaimPath,
  '/api/poll/email-cursor/settle': emailCursorSettlePath,
  '/api/poll/watched-chats': watchedChatsPath,
  '/api/chats/{chatId}/cursor': chatCursorPath,
  '/api/chats/{chatId}/claims': chatClaimsPath,
  '/api/promises': promisesPath,
  '/api/promises/{id}/resolve': promiseResolvePath,
  '/api/interactions': interactionsPath,
  '/api/interactions/{day}': interactionDayPath,
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
