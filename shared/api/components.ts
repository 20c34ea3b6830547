import { BLOCK_BYTES, MAX_DATA_BYTES, MAX_FILES_PER_CHECKPOINT } from '../archive/identifiers';
import { BASE64_PATTERN } from '../protocol/fields';
import {
  MAX_CHANNEL_LENGTH,
  MAX_NAMESPACE_LENGTH,
  MAX_TASK_ID_LENGTH,
  MAX_TASK_PATH_LENGTH,
} from '../threads/identifiers';
import { MAX_RECENT_RUNS } from '../threads/records';
import { MAX_VERSION_LENGTH } from '../threads/validation';
import { header, type JsonObject, REQUEST_ID_HEADER, type Schema, schemaRef } from './openapiKit';

/**
 * The shared parts of the OpenAPI document: schemas of names and bodies, the error answers, the
 * common headers and parameters, and the security schemes. Patterns mirror the validation in
 * shared/ (keys.ts, archive/identifiers.ts, coordination/chatIds.ts, threads/identifiers.ts,
 * threads/validation.ts and snapshots/identifiers.ts); where a rule cannot be a pattern (bytes of
 * UTF-8), the description says it.
 */

const nullable = (schema: Schema): Schema => ({ ...schema, type: [schema['type'] as string, 'null'] });

/** RFC 3339 date-time, as Cairn writes them in UTC (`2026-11-29T21:16:51.123Z`). */
const timestamp: Schema = {
  type: 'string',
  format: 'date-time',
  description: 'RFC 3339 date-time; Cairn writes UTC with milliseconds, e.g. 2026-11-29T21:16:51.123Z.',
};

const ID_PATTERN = String.raw`^(?!\.\.?$)[A-Za-z0-9._-]{1,128}$`;
const ID_SEGMENT = String.raw`(?!\.\.?/)[A-Za-z0-9._-]{1,128}`;
const ID_LAST_SEGMENT = String.raw`(?!\.\.?$)[A-Za-z0-9._-]{1,128}`;

/**
 * Text without control characters or Unicode noncharacters (thread namespaces, channels, task ids and
 * paths; the pattern spells out those of the first plane, the descriptions say all).
 */
const PLAIN_TEXT = String.raw`^[^\u0000-\u001F\u007F\uFDD0-\uFDEF\uFFFE\uFFFF]*$`;
const LENGTH_NOTE =
  'Lengths count UTF-16 code units (an astral character counts 2); unpaired surrogates and Unicode noncharacters (U+FDD0-U+FDEF, U+FFFE and U+FFFF in every plane) are refused.';

const runFields = {
  runId: schemaRef('Id'),
  threadId: schemaRef('Id'),
  fencingToken: {
    type: 'integer',
    minimum: 1,
    description: "The run's fencing token: every run start on the thread takes the next one (1, 2, 3...).",
  },
  startedAt: timestamp,
} satisfies Record<string, Schema>;

/** A run holding the thread (or that held it until its lease ended), with `extra` fields. */
function liveRunSchema(extra: Record<string, Schema> = {}): Schema {
  return {
    type: 'object',
    required: [
      'runId',
      'threadId',
      'status',
      'fencingToken',
      'startedAt',
      'leaseExpiresAt',
      ...Object.keys(extra),
    ],
    additionalProperties: false,
    properties: {
      ...runFields,
      status: {
        enum: ['running', 'expired'],
        description:
          "running while `leaseExpiresAt` is ahead of the serving instance's clock; expired once it passed.",
      },
      leaseExpiresAt: timestamp,
      ...extra,
    },
  };
}

const schemas: Record<string, Schema> = {
  Id: {
    type: 'string',
    pattern: ID_PATTERN,
    description:
      'A session id, generation or checkpoint id, a thread name or a run id: 1-128 characters of [A-Za-z0-9._-], not "." or "..".',
  },
  ChatId: {
    type: 'string',
    minLength: 1,
    pattern: String.raw`^[^\s/\\?#%\u0000-\u001F\u007F-\u009F]+$`,
    description:
      'A chat id: no whitespace, "/", "\\", "?", "#", "%" or control characters; at most 250 bytes once percent-encoded.',
  },
  ClaimId: { type: 'string', pattern: '^[A-Za-z0-9._:-]{1,128}$' },
  Timestamp: timestamp,
  ObjectStored: {
    type: 'object',
    required: ['key', 'size'],
    additionalProperties: false,
    properties: { key: { type: 'string' }, size: { type: 'integer', minimum: 1 } },
  },
  ManifestFile: {
    type: 'object',
    required: ['path', 'generation', 'size', 'sha256'],
    additionalProperties: false,
    properties: {
      path: schemaRef('Key'),
      generation: schemaRef('Id'),
      size: { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER },
      sha256: {
        type: 'string',
        pattern: '^[0-9a-fA-F]{64}$',
        description:
          'Hex SHA-256 of the whole file; for a file of size 0 it must be the hash of no bytes, e3b0c442…b855 (else 400).',
      },
    },
    description:
      `A file of \`size\` bytes is blocks 0 … floor(size/${BLOCK_BYTES})-1 of its generation and, when ` +
      `size % ${BLOCK_BYTES} > 0, the tail tails/<checkpointId>/<generation> of that length.`,
  },
  CheckpointData: nullable({
    type: 'object',
    description: `Any JSON object of at most ${MAX_DATA_BYTES} bytes, or null.`,
  }),
  PublishRequest: {
    type: 'object',
    required: ['checkpointId', 'files'],
    additionalProperties: false,
    properties: {
      checkpointId: { allOf: [schemaRef('Id')], not: { const: 'latest' } },
      parent: {
        ...nullable({ type: 'string', pattern: ID_PATTERN }),
        default: null,
        description: 'The checkpoint this one follows; null (the default) for the first.',
      },
      files: {
        type: 'array',
        maxItems: MAX_FILES_PER_CHECKPOINT,
        items: schemaRef('ManifestFile'),
        description: 'Paths and generations are unique within a checkpoint.',
      },
      data: { ...schemaRef('CheckpointData'), default: null },
    },
  },
  Published: {
    type: 'object',
    required: ['checkpointId', 'latest'],
    additionalProperties: false,
    properties: { checkpointId: schemaRef('Id'), latest: schemaRef('Id') },
  },
  Manifest: {
    type: 'object',
    required: ['checkpointId', 'parent', 'createdAt', 'files', 'data'],
    additionalProperties: false,
    properties: {
      checkpointId: schemaRef('Id'),
      parent: nullable({ type: 'string', pattern: ID_PATTERN }),
      createdAt: timestamp,
      files: { type: 'array', items: schemaRef('ManifestFile') },
      data: schemaRef('CheckpointData'),
    },
  },
  Session: {
    type: 'object',
    required: ['id', 'checkpointId', 'updatedAt', 'data'],
    additionalProperties: false,
    properties: {
      id: schemaRef('Id'),
      checkpointId: { ...schemaRef('Id'), description: 'The latest checkpoint the index knows of.' },
      updatedAt: timestamp,
      data: schemaRef('CheckpointData'),
    },
  },
  SessionPage: {
    type: 'object',
    required: ['sessions', 'next'],
    additionalProperties: false,
    properties: {
      sessions: { type: 'array', items: schemaRef('Session') },
      next: {
        ...nullable({ type: 'string', pattern: ID_PATTERN }),
        description: 'The last id of this page when more follow (pass it as `after`), else null.',
      },
    },
  },
  ObjectKey: {
    type: 'string',
    pattern: `^(?:blocks/${ID_SEGMENT}/(?:0|[1-9][0-9]{0,14})|tails/${ID_SEGMENT}/${ID_LAST_SEGMENT})$`,
    description:
      `blocks/<generation>/<index> (exactly ${BLOCK_BYTES} bytes) or tails/<checkpointId>/<generation> ` +
      `(1-${BLOCK_BYTES - 1} bytes); <index> is a decimal number without leading zeros.`,
  },
  EmailCursor: {
    oneOf: [
      {
        type: 'object',
        required: ['outcome', 'cursor', 'etag', 'recentClaims'],
        additionalProperties: false,
        properties: {
          outcome: { const: 'present' },
          cursor: timestamp,
          etag: schemaRef('Etag'),
          recentClaims: {
            type: 'array',
            items: schemaRef('ClaimId'),
            description: 'The latest claims that moved the cursor, newest last.',
          },
        },
      },
      {
        type: 'object',
        required: ['outcome', 'cursor', 'etag', 'recentClaims'],
        additionalProperties: false,
        properties: {
          outcome: {
            enum: ['absent', 'unresolved'],
            description:
              'absent: the read succeeded and found no cursor. unresolved: the read failed or the value is not a cursor (never reported as absent).',
          },
          cursor: { type: 'null' },
          etag: { type: 'null' },
          recentClaims: { type: 'array', maxItems: 0 },
        },
      },
    ],
  },
  EmailClaim: {
    type: 'object',
    required: ['newCursor', 'etag', 'claimId'],
    additionalProperties: false,
    properties: {
      newCursor: timestamp,
      etag: {
        type: 'string',
        pattern: String.raw`^"[^"\u0000-\u001F\u007F]{1,256}"$`,
        description: 'The ETag of the cursor as read (GET /api/poll/email-cursor).',
      },
      claimId: schemaRef('ClaimId'),
      priorClaims: { type: 'array', maxItems: 64, items: schemaRef('ClaimId') },
    },
  },
  WatchedChats: {
    oneOf: [
      {
        type: 'object',
        required: ['outcome', 'chatIds', 'etag'],
        additionalProperties: false,
        properties: {
          outcome: { const: 'present' },
          chatIds: { type: 'array', items: { type: 'string' } },
          etag: schemaRef('Etag'),
        },
      },
      {
        type: 'object',
        required: ['outcome', 'chatIds', 'etag'],
        additionalProperties: false,
        properties: {
          outcome: { enum: ['absent', 'unresolved'] },
          chatIds: { type: 'array', maxItems: 0 },
          etag: { type: 'null' },
        },
      },
    ],
  },
  ChatCursor: {
    type: 'object',
    required: ['lastTs', 'seenIdsTail', 'bootstrapped', 'lastWrittenAt'],
    additionalProperties: false,
    properties: {
      lastTs: nullable({ type: 'string', description: 'The newest message time seen, as stored.' }),
      seenIdsTail: {
        type: 'array',
        items: { type: 'string' },
        description: 'The ids of the latest messages delivered, newest last.',
      },
      bootstrapped: { type: 'boolean' },
      lastWrittenAt: nullable({
        type: 'string',
        description: 'When the cursor was last written, as stored.',
      }),
    },
  },
  ChatCursorRead: {
    oneOf: [
      {
        type: 'object',
        required: ['outcome', 'cursor'],
        additionalProperties: false,
        properties: { outcome: { const: 'present' }, cursor: schemaRef('ChatCursor') },
      },
      {
        type: 'object',
        required: ['outcome', 'cursor'],
        additionalProperties: false,
        properties: { outcome: { enum: ['absent', 'unresolved'] }, cursor: { type: 'null' } },
      },
    ],
  },
  Promise: {
    type: 'object',
    required: ['id', 'createdAt', 'chatId', 'description', 'dueBy', 'status'],
    additionalProperties: false,
    properties: {
      id: { type: 'string', minLength: 1 },
      createdAt: { type: 'string', description: 'RFC 3339, as stored.' },
      chatId: { type: 'string' },
      description: { type: 'string' },
      dueBy: nullable({ type: 'string', description: 'RFC 3339, as given.' }),
      status: { enum: ['open', 'resolved'] },
      resolvedAt: { type: 'string', description: 'Set once resolved.' },
      resolution: { type: 'string', description: 'Set once resolved.' },
    },
  },
  Interaction: {
    type: 'object',
    required: ['id', 'ts', 'channel', 'direction', 'sender', 'summary'],
    additionalProperties: false,
    properties: {
      id: { type: 'string' },
      ts: { type: 'string', description: 'RFC 3339, when the entry was written.' },
      channel: { type: 'string' },
      direction: {
        type: 'string',
        description: 'inbound or outbound; entries written by other tools are returned as stored.',
      },
      sender: { type: 'string' },
      summary: { type: 'string' },
      recipient: { type: 'string' },
      action: { type: 'string' },
      contentRef: { type: 'string' },
      metadata: { type: 'object' },
    },
  },
  ThreadCheckpointId: {
    allOf: [schemaRef('Id')],
    not: { const: 'latest' },
    description:
      'A checkpoint id of a thread: 1-128 characters of [A-Za-z0-9._-], not ".", ".." or "latest".',
  },
  Namespace: {
    type: 'string',
    maxLength: MAX_NAMESPACE_LENGTH,
    pattern: PLAIN_TEXT,
    description: `A checkpoint namespace: at most ${MAX_NAMESPACE_LENGTH} characters without control characters or Unicode noncharacters; "" is the root namespace. ${LENGTH_NOTE}`,
  },
  Channel: {
    type: 'string',
    minLength: 1,
    maxLength: MAX_CHANNEL_LENGTH,
    pattern: PLAIN_TEXT,
    not: { const: '__proto__' },
    description: `A channel name: 1-${MAX_CHANNEL_LENGTH} characters without control characters or Unicode noncharacters, not "__proto__". ${LENGTH_NOTE}`,
  },
  ChannelVersion: {
    oneOf: [{ type: 'number' }, { type: 'string', minLength: 1, maxLength: MAX_VERSION_LENGTH }],
    description: `A channel's version: a number, or a string of 1-${MAX_VERSION_LENGTH} characters.`,
  },
  TypeTag: {
    type: 'string',
    pattern: String.raw`^[\x21-\x7E]{1,64}$`,
    description: "The serializer's type tag (e.g. `json`): 1-64 printable ASCII characters without spaces.",
  },
  TypedBytes: {
    type: 'object',
    required: ['type', 'data'],
    additionalProperties: false,
    properties: { type: schemaRef('TypeTag'), data: schemaRef('Base64') },
  },
  TaskId: {
    type: 'string',
    minLength: 1,
    maxLength: MAX_TASK_ID_LENGTH,
    pattern: PLAIN_TEXT,
    description: `A task id: 1-${MAX_TASK_ID_LENGTH} characters without control characters or Unicode noncharacters. ${LENGTH_NOTE}`,
  },
  TaskPath: {
    type: 'string',
    maxLength: MAX_TASK_PATH_LENGTH,
    pattern: PLAIN_TEXT,
    description: `A task's path, which orders writes: at most ${MAX_TASK_PATH_LENGTH} characters without control characters or Unicode noncharacters. ${LENGTH_NOTE}`,
  },
  WriteIndex: {
    type: 'integer',
    minimum: Number.MIN_SAFE_INTEGER,
    maximum: Number.MAX_SAFE_INTEGER,
    description:
      'At least 0: a regular write (the first stored under its task id and index is kept); below 0: a special write (replaces the one stored).',
  },
  Base64: {
    type: 'string',
    contentEncoding: 'base64',
    pattern: BASE64_PATTERN,
    description: 'Bytes the client serialised, in base64 (with padding); opaque to Cairn.',
  },
  PendingWrite: {
    type: 'object',
    required: ['taskId', 'taskPath', 'channel', 'idx', 'type', 'data'],
    additionalProperties: false,
    properties: {
      taskId: schemaRef('TaskId'),
      taskPath: schemaRef('TaskPath'),
      channel: schemaRef('Channel'),
      idx: schemaRef('WriteIndex'),
      type: schemaRef('TypeTag'),
      data: schemaRef('Base64'),
    },
  },
  ThreadCheckpoint: {
    type: 'object',
    required: [
      'threadId',
      'ns',
      'checkpointId',
      'parent',
      'createdAt',
      'v',
      'checkpoint',
      'metadata',
      'channelVersions',
      'values',
      'pendingWrites',
    ],
    additionalProperties: false,
    properties: {
      threadId: schemaRef('Id'),
      ns: schemaRef('Namespace'),
      checkpointId: schemaRef('ThreadCheckpointId'),
      parent: {
        anyOf: [schemaRef('ThreadCheckpointId'), { type: 'null' }],
        description: 'The checkpoint this one follows; null for the first.',
      },
      createdAt: timestamp,
      v: {
        type: 'integer',
        minimum: 0,
        maximum: Number.MAX_SAFE_INTEGER,
        description: "The client's checkpoint format version, as sent.",
      },
      checkpoint: {
        ...schemaRef('TypedBytes'),
        description: 'The serialised checkpoint without its channel values, as sent.',
      },
      metadata: { type: 'object', description: 'The JSON object sent with the checkpoint.' },
      channelVersions: {
        type: 'object',
        propertyNames: schemaRef('Channel'),
        additionalProperties: schemaRef('ChannelVersion'),
      },
      values: {
        type: 'object',
        propertyNames: schemaRef('Channel'),
        additionalProperties: schemaRef('TypedBytes'),
        description:
          'Every channel that has a value at this checkpoint (stored with it or before it), with that value.',
      },
      pendingWrites: {
        type: 'array',
        items: schemaRef('PendingWrite'),
        description: 'Merged, in (task path, task id, index) order, strings by Unicode code point.',
      },
      pendingSends: {
        type: 'array',
        items: schemaRef('TypedBytes'),
        description:
          "Only for a checkpoint of format (`v`) below 4 with a parent: the parent's pending writes to the channel `__pregel_tasks`, in the order stored.",
      },
      runId: { ...schemaRef('Id'), description: 'The run that stored it; absent when none did.' },
    },
  },
  ThreadCheckpointPage: {
    type: 'object',
    required: ['checkpoints', 'next'],
    additionalProperties: false,
    properties: {
      checkpoints: {
        type: 'array',
        items: schemaRef('ThreadCheckpoint'),
        description: 'Newest first (by id, descending).',
      },
      next: nullable({
        type: 'string',
        minLength: 1,
        description:
          'Opaque; pass it as `cursor` for the next page. Null when no older checkpoint is left. A page may hold fewer than `limit` with a non-null `next`.',
      }),
    },
  },
  ThreadCheckpointStored: {
    type: 'object',
    required: ['threadId', 'ns', 'checkpointId', 'head'],
    additionalProperties: false,
    properties: {
      threadId: schemaRef('Id'),
      ns: schemaRef('Namespace'),
      checkpointId: schemaRef('ThreadCheckpointId'),
      head: { ...schemaRef('ThreadCheckpointId'), description: "The namespace's head after the put." },
    },
  },
  ThreadWritesStored: {
    type: 'object',
    required: ['threadId', 'ns', 'checkpointId', 'writes'],
    additionalProperties: false,
    properties: {
      threadId: schemaRef('Id'),
      ns: schemaRef('Namespace'),
      checkpointId: schemaRef('ThreadCheckpointId'),
      writes: { type: 'integer', minimum: 1, description: 'How many writes the call sent.' },
    },
  },
  ThreadHead: {
    type: 'object',
    required: ['checkpointId', 'parent', 'createdAt', 'since'],
    additionalProperties: false,
    properties: {
      checkpointId: schemaRef('ThreadCheckpointId'),
      parent: { anyOf: [schemaRef('ThreadCheckpointId'), { type: 'null' }] },
      createdAt: { ...timestamp, description: 'When the checkpoint was stored.' },
      since: { ...timestamp, description: 'When it became the head (a put or a rewind).' },
    },
  },
  LiveRun: {
    ...liveRunSchema(),
    description:
      'The run that holds the thread, or held it until its lease ended and no other run started since.',
  },
  EndedRun: {
    type: 'object',
    required: ['runId', 'threadId', 'status', 'fencingToken', 'startedAt', 'endedAt'],
    additionalProperties: false,
    properties: {
      ...runFields,
      status: { enum: ['finished', 'failed', 'interrupted', 'expired'] },
      endedAt: {
        ...timestamp,
        description: 'When it ended; for an expired run, when its lease ended.',
      },
    },
  },
  Run: { oneOf: [schemaRef('LiveRun'), schemaRef('EndedRun')] },
  StartedRun: {
    ...liveRunSchema({
      interrupted: {
        anyOf: [schemaRef('Id'), { type: 'null' }],
        description: 'The run this start interrupted, or null.',
      },
    }),
    description:
      'The run just started (`running`, unless its lease already ended), and the run it interrupted.',
  },
  Thread: {
    type: 'object',
    required: ['threadId', 'createdAt', 'updatedAt', 'heads', 'run', 'recentRuns'],
    additionalProperties: false,
    properties: {
      threadId: schemaRef('Id'),
      createdAt: timestamp,
      updatedAt: { ...timestamp, description: 'Its last change.' },
      heads: {
        type: 'object',
        propertyNames: schemaRef('Namespace'),
        additionalProperties: schemaRef('ThreadHead'),
        description:
          'Namespace → head, for the namespaces whose head the thread record holds: at most 32, the root and the most recently changed others (a head set by a rewind stays).',
      },
      run: {
        anyOf: [schemaRef('LiveRun'), { type: 'null' }],
        description: 'The run that holds or last held the thread, until another starts or it finishes.',
      },
      recentRuns: {
        type: 'array',
        maxItems: MAX_RECENT_RUNS,
        items: schemaRef('EndedRun'),
        description: `The last ${MAX_RECENT_RUNS} runs that ended, newest first.`,
      },
    },
  },
  ThreadPage: {
    type: 'object',
    required: ['threads', 'next'],
    additionalProperties: false,
    properties: {
      threads: {
        type: 'array',
        items: {
          type: 'object',
          required: ['threadId'],
          additionalProperties: false,
          properties: { threadId: schemaRef('Id') },
        },
        description: 'Ascending by name.',
      },
      next: nullable({
        type: 'string',
        minLength: 1,
        description: 'Opaque; pass it as `cursor` for the next page. Null on the last page.',
      }),
    },
  },
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
