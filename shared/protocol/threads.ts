import { z } from 'zod';

import { BASE64_PATTERN, Id, KiB, MiB, SEAL_OVERHEAD, SHA256_HEX, Timestamp } from './fields.js';
import { JSON_DEPTH_RULE, tooDeepPath } from './json.js';
import { route } from './spec.js';
import { TAGS } from './tags.js';
import { characterProblem, utf8Length } from './text.js';

/**
 * Threads, checkpoints and runs (docs/threads.md), for LangGraph-style checkpointers and agent
 * loops. Thread names are per tenant. The names of the path, the namespaces and the ids of the
 * bodies are checked here; the rules of a body that need more (channel names, type tags, task ids,
 * sizes of decoded bytes, the rules between fields) are checked by the thread store
 * (shared/threads/validation.ts) before any I/O, and the schemas here document them. Bytes a
 * client serialised travel as `{"type": "<serializer tag>", "data": "<base64>"}`.
 */

/** Request bodies up to these sizes are read; larger ones are 413 before anything else. */
export const MAX_PUT_BODY_BYTES = 16 * MiB;
export const MAX_WRITES_BODY_BYTES = 4 * MiB;
export const MAX_SMALL_BODY_BYTES = 16 * KiB;

export const MAX_NAMESPACE_LENGTH = 512;
export const MAX_CHANNEL_LENGTH = 256;
export const MAX_TASK_ID_LENGTH = 256;
export const MAX_TASK_PATH_LENGTH = 1024;
export const MAX_METADATA_BYTES = 16 * KiB;
export const MAX_CHECKPOINT_BYTES = 256 * KiB;
export const MAX_CHANNELS = 1000;
export const MAX_VERSION_LENGTH = 128;
export const MAX_WRITES_PER_CALL = 1000;
export const MAX_FILTER_KEYS = 32;
export const MAX_FILTER_LENGTH = 4096;
export const MIN_LEASE_MS = 1000;
export const MAX_LEASE_MS = 600_000;
export const DEFAULT_LEASE_MS = 60_000;
export const MAX_BUSY_TIMEOUT_MS = 60_000;
export const DEFAULT_BUSY_TIMEOUT_MS = 30_000;
/** The ended runs a thread record keeps, newest first. */
export const MAX_RECENT_RUNS = 16;

/**
 * The largest record the thread store writes, in bytes: the storage's value limit
 * (CAIRN_MAX_VALUE_BYTES), less the seal's overhead when the thread space is sealed (encryption at
 * rest), so that a record of the limit still fits once sealed.
 */
export function threadValueLimit(maxValueBytes: number, sealed: boolean): number {
  return maxValueBytes - (sealed ? SEAL_OVERHEAD : 0);
}

/**
 * The most bytes a channel value of type tag `type` may hold, once decoded, under the thread
 * store's record limit ({@link threadValueLimit}): a value is stored after its tag and a line
 * break.
 */
export function channelValueLimit(recordLimit: number, type: string): number {
  return recordLimit - utf8Length(type) - 1;
}

/**
 * Free text used as a name (namespaces, channels, task ids): the characters of a store key (no
 * control characters, Unicode noncharacters or unpaired surrogates), at most `maxLength` UTF-16
 * code units.
 */
export function isPlainText(value: string, maxLength: number, allowEmpty: boolean): boolean {
  if (value.length === 0) return allowEmpty;
  return value.length <= maxLength && characterProblem(value) === null;
}

export const namespaceRule = `must be at most ${MAX_NAMESPACE_LENGTH} characters without control characters or Unicode noncharacters ("" is the root namespace)`;
export const channelRule = `must be 1-${MAX_CHANNEL_LENGTH} characters without control characters or Unicode noncharacters`;

/** Checkpoint ids: the name rule ({@link Id}), and not `latest`, which the path reads as "the head". */
export function isCheckpointId(value: string): boolean {
  return Id.safeParse(value).success && value !== 'latest';
}
export const NOT_LATEST_RULE = 'must not be "latest" (the path reads it as the head)';

/**
 * Text without control characters or Unicode noncharacters (the pattern spells out those of the
 * first plane, the descriptions say all).
 */
const PLAIN_TEXT = String.raw`^[^\u0000-\u001F\u007F\uFDD0-\uFDEF\uFFFE\uFFFF]*$`;
const LENGTH_NOTE =
  'Lengths count UTF-16 code units (an astral character counts 2); unpaired surrogates and Unicode noncharacters (U+FDD0-U+FDEF, U+FFFE and U+FFFF in every plane) are refused.';

const text = () => z.string({ error: 'must be a string' });

export const ThreadCheckpointId = Id.refine((value) => value !== 'latest', NOT_LATEST_RULE).meta({
  id: 'ThreadCheckpointId',
  not: { const: 'latest' },
  description: 'A checkpoint id of a thread: 1-128 characters of [A-Za-z0-9._-], not ".", ".." or "latest".',
});

export const Namespace = text()
  .refine((value) => isPlainText(value, MAX_NAMESPACE_LENGTH, true), namespaceRule)
  .meta({
    id: 'Namespace',
    maxLength: MAX_NAMESPACE_LENGTH,
    pattern: PLAIN_TEXT,
    description: `A checkpoint namespace: at most ${MAX_NAMESPACE_LENGTH} characters without control characters or Unicode noncharacters; "" is the root namespace. ${LENGTH_NOTE}`,
  });

// Checked by the thread store, which names the channel in the field (`channelVersions.<channel>`).
export const Channel = z.string().meta({
  id: 'Channel',
  minLength: 1,
  maxLength: MAX_CHANNEL_LENGTH,
  pattern: PLAIN_TEXT,
  not: { const: '__proto__' },
  description: `A channel name: 1-${MAX_CHANNEL_LENGTH} characters without control characters or Unicode noncharacters, not "__proto__". ${LENGTH_NOTE}`,
});

export const ChannelVersion = z
  .union([z.number(), z.string()], { error: 'must be a number or a string' })
  .meta({
    id: 'ChannelVersion',
    oneOf: [{ type: 'number' }, { type: 'string', minLength: 1, maxLength: MAX_VERSION_LENGTH }],
    description: `A channel's version: a number, or a string of 1-${MAX_VERSION_LENGTH} characters.`,
  });

export const TypeTag = text().meta({
  id: 'TypeTag',
  pattern: String.raw`^[\x21-\x7E]{1,64}$`,
  description: "The serializer's type tag (e.g. `json`): 1-64 printable ASCII characters without spaces.",
});

export const Base64 = text().regex(new RegExp(BASE64_PATTERN), 'must be base64').meta({
  id: 'Base64',
  contentEncoding: 'base64',
  pattern: BASE64_PATTERN,
  description: 'Bytes the client serialised, in base64 (with padding); opaque to Cairn.',
});

export const TypedBytes = z.strictObject({ type: TypeTag, data: Base64 }).meta({ id: 'TypedBytes' });

export const ValueSha256 = text().regex(SHA256_HEX, 'must be 64 lowercase hex digits').meta({
  id: 'ValueSha256',
  pattern: SHA256_HEX.source,
  description: 'The SHA-256 of the whole value, in lowercase hex.',
});

const keepField = z
  .number({ error: 'must be a number' })
  .int('must be a whole number')
  .min(0, 'must be a whole number of at least 0');

/**
 * A value given as a change to a value the other side holds (docs/threads.md, Deltas): the first
 * `keep` bytes of that value, then `append`; `sha256` is the digest of the whole result, which a
 * reconstruction that does not match refuses.
 */
export const ValueDelta = z
  .strictObject({
    type: TypeTag,
    keep: keepField.describe('How many bytes of the base value the value starts with.'),
    append: Base64.describe('The bytes after them.'),
    sha256: ValueSha256,
  })
  .meta({ id: 'ValueDelta' });

/** A channel value of a put given as a change to a value the thread holds. */
export const ValueDeltaPut = z
  .strictObject({
    type: TypeTag,
    base: z
      .strictObject({
        checkpointId: ThreadCheckpointId.describe('A checkpoint of the same thread and namespace.'),
        channel: Channel.optional().describe('The channel whose value there is the base; default: this one.'),
      })
      .describe('The stored value the delta starts from.'),
    keep: keepField.describe('How many bytes of the base value the value starts with.'),
    append: Base64.describe('The bytes after them.'),
    sha256: ValueSha256,
  })
  .meta({ id: 'ValueDeltaPut' });

export const TaskId = text().meta({
  id: 'TaskId',
  minLength: 1,
  maxLength: MAX_TASK_ID_LENGTH,
  pattern: PLAIN_TEXT,
  description: `A task id: 1-${MAX_TASK_ID_LENGTH} characters without control characters or Unicode noncharacters. ${LENGTH_NOTE}`,
});

export const TaskPath = text().meta({
  id: 'TaskPath',
  maxLength: MAX_TASK_PATH_LENGTH,
  pattern: PLAIN_TEXT,
  description: `A task's path, which orders writes: at most ${MAX_TASK_PATH_LENGTH} characters without control characters or Unicode noncharacters. ${LENGTH_NOTE}`,
});

export const WriteIndex = z.number({ error: 'must be a number' }).int('must be a whole number').meta({
  id: 'WriteIndex',
  description:
    'At least 0: a regular write (the first stored under its task id and index is kept); below 0: a special write (replaces the one stored).',
});

/** A JSON object, kept as sent (own keys, `__proto__` included). */
const jsonObject = z
  .custom<Record<string, unknown>>(
    (value) => typeof value === 'object' && value !== null && !Array.isArray(value),
    { error: 'must be a JSON object' },
  )
  .meta({ type: 'object' });

const CHANNEL_MAP_RULE = 'must be a JSON object of channels (not "__proto__")';

/**
 * A map keyed by channel names; `__proto__` is refused before the record is built (a record would
 * silently drop it).
 */
function channelMap<T extends z.ZodType>(values: T) {
  return z.preprocess(
    (value, context) => {
      if (typeof value === 'object' && value !== null && Object.hasOwn(value, '__proto__')) {
        context.addIssue({ code: 'custom', message: CHANNEL_MAP_RULE });
        return z.NEVER;
      }
      return value;
    },
    z.record(Channel, values, { error: CHANNEL_MAP_RULE }),
  );
}

const runIdField = Id.describe('The run sending this; required while a live run holds the thread.');

/** The body of `POST /api/threads/{threadId}/checkpoints`. */
export const putCheckpointBody = z.strictObject({
  checkpointId: ThreadCheckpointId,
  ns: Namespace.default(''),
  parent: ThreadCheckpointId.nullable()
    .default(null)
    .describe('A stored checkpoint of the namespace, or null (the default) for the first.'),
  runId: runIdField.optional(),
  v: z
    .number({ error: 'must be a number' })
    .int('must be a whole number')
    .min(0, 'must be a whole number of at least 0')
    .default(4)
    .describe("The client's checkpoint format version; below 4, reads add `pendingSends`."),
  checkpoint: TypedBytes.describe(
    `The serialised checkpoint without its channel values: at most ${MAX_CHECKPOINT_BYTES} bytes once decoded.`,
  ),
  metadata: jsonObject
    .default({})
    .describe(
      `Any JSON object of at most ${MAX_METADATA_BYTES} bytes of JSON; its top-level keys can filter the history.`,
    ),
  channelVersions: channelMap(ChannelVersion)
    .meta({ maxProperties: MAX_CHANNELS })
    .describe('Every channel of the checkpoint and its version.'),
  values: channelMap(z.union([TypedBytes, ValueDeltaPut]).nullable())
    .default({})
    .describe(
      `The channels whose version is new here (each must be in \`channelVersions\`): the value (whole, or as a delta against a value the thread holds: 409 \`base_mismatch\` naming \`values.<channel>\` when that base is not stored or the result's digest differs), or null when the channel has none. A value's decoded bytes and its type tag fit in CAIRN_MAX_VALUE_BYTES less one byte, and less ${SEAL_OVERHEAD} bytes more (the seal's overhead) when encryption at rest is on.`,
    ),
});

/** The body of `POST /api/threads/{threadId}/checkpoints/{checkpointId}/writes`. */
export const putWritesBody = z.strictObject({
  ns: Namespace.default(''),
  taskId: TaskId,
  taskPath: TaskPath.default(''),
  runId: runIdField.optional(),
  writes: z
    .array(z.strictObject({ channel: Channel, idx: WriteIndex, type: TypeTag, data: Base64 }), {
      error: 'must be an array',
    })
    .meta({ minItems: 1, maxItems: MAX_WRITES_PER_CALL }),
});

/** The body of `POST /api/threads/{threadId}/rewind`. */
export const rewindBody = z.strictObject({
  ns: Namespace.default(''),
  checkpointId: ThreadCheckpointId,
  runId: runIdField.optional(),
});

const seconds = (min: number, max: number) =>
  z
    .number({ error: 'must be a number of seconds' })
    .min(min, `must be from ${min} to ${max} seconds`)
    .max(max, `must be from ${min} to ${max} seconds`);

const leaseSeconds = () => seconds(MIN_LEASE_MS / 1000, MAX_LEASE_MS / 1000);

/** The body of `POST /api/threads/{threadId}/runs`. */
export const startRunBody = z.strictObject({
  onBusy: z
    .enum(['reject', 'wait', 'interrupt'], { error: 'must be reject, wait or interrupt' })
    .default('wait'),
  busyTimeout: seconds(0, MAX_BUSY_TIMEOUT_MS / 1000)
    .default(DEFAULT_BUSY_TIMEOUT_MS / 1000)
    .describe('Seconds `wait` waits for the thread.'),
  leaseSeconds: leaseSeconds()
    .default(DEFAULT_LEASE_MS / 1000)
    .describe('The lease in seconds.'),
});

/** The body of `POST /api/threads/{threadId}/runs/{runId}/heartbeat`. */
export const heartbeatBody = z.strictObject({
  leaseSeconds: leaseSeconds()
    .optional()
    .describe('The new lease in seconds; default: the lease the run has.'),
});

/** The body of `POST /api/threads/{threadId}/runs/{runId}/finish`. */
export const finishRunBody = z.strictObject({
  status: z.enum(['finished', 'failed'], { error: 'must be finished or failed' }),
});

const limit = (max: number, fallback: number) => {
  const rule = `must be a whole number from 1 to ${max}`;
  return z.coerce.number({ error: rule }).int(rule).min(1, rule).max(max, rule).default(fallback);
};

const cursor = (description: string) =>
  z.string().min(1, 'must not be empty').optional().describe(description);

/** The query of `GET /api/threads`; the MCP tool `list_threads` takes the same fields. */
export const threadListQuery = z.object({
  // Checked by the thread store (a name's beginning: up to 128 characters of the alphabet).
  prefix: z
    .string()
    .meta({ pattern: '^[A-Za-z0-9._-]{0,128}$' })
    .optional()
    .describe('Names starting with this string; empty: all.'),
  after: Id.optional().describe('Names greater than this one.'),
  cursor: cursor(
    'The `next` of the previous page, with the same `prefix` (else 400); instead of `after`, which it overrides.',
  ),
  limit: limit(1000, 100).describe('Names per page.'),
});

/** The query of the routes that read one checkpoint. */
export const checkpointQuery = z.object({
  ns: Namespace.default('').describe('The namespace; default "" (the root).'),
  since: ThreadCheckpointId.optional().describe(
    'A checkpoint of the namespace whose values the client holds: the answer may then give a value as a delta against the value of the same channel there (`keep` its length and `append` empty when unchanged). Ignored (values whole, no `since` in the answer) when that checkpoint is not stored.',
  ),
});

const FILTER_RULE = `must be a JSON object of at most ${MAX_FILTER_KEYS} metadata keys`;

/** The query of `GET /api/threads/{threadId}/checkpoints`. */
export const historyQuery = z.object({
  ns: Namespace.optional().describe('One namespace ("" is the root); absent: every namespace.'),
  before: ThreadCheckpointId.optional().describe(
    'Only checkpoints with a smaller id (every checkpoint of that id is skipped). Not with `cursor` (400).',
  ),
  cursor: cursor('The `next` of the previous page.'),
  limit: limit(100, 10).describe('Checkpoints per page, at most.'),
  filter: z
    .string()
    .max(MAX_FILTER_LENGTH, `must be at most ${MAX_FILTER_LENGTH} characters`)
    .transform((value, context) => {
      try {
        const parsed = JSON.parse(value) as unknown;
        if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) {
          // Bounded like a body: history filters compare it with stored metadata recursively.
          if (tooDeepPath(parsed) !== null) {
            context.addIssue({ code: 'custom', message: JSON_DEPTH_RULE });
            return z.NEVER;
          }
          if (Object.keys(parsed).length <= MAX_FILTER_KEYS) return parsed as Record<string, unknown>;
        }
      } catch {
        // reported below
      }
      context.addIssue({ code: 'custom', message: FILTER_RULE });
      return z.NEVER;
    })
    .meta({ contentMediaType: 'application/json' })
    .optional()
    .describe(
      `A JSON object of at most ${MAX_FILTER_KEYS} keys (at most ${MAX_FILTER_LENGTH} characters): each top-level metadata key must equal its value, compared as JSON (objects and arrays by content).`,
    ),
});

// ---------------------------------------------------------------------------------------------
// Answers

const fencingToken = z
  .number()
  .int()
  .min(1)
  .describe("The run's fencing token: every run start on the thread takes the next one (1, 2, 3...).");

const runFields = { runId: Id, threadId: Id, fencingToken, startedAt: Timestamp };

const liveRunFields = {
  ...runFields,
  status: z
    .enum(['running', 'expired'])
    .describe(
      "running while `leaseExpiresAt` is ahead of the serving instance's clock; expired once it passed.",
    ),
  leaseExpiresAt: Timestamp,
};

export const LiveRun = z.object(liveRunFields).meta({
  id: 'LiveRun',
  description:
    'The run that holds the thread, or held it until its lease ended and no other run started since.',
});

export const EndedRun = z
  .object({
    ...runFields,
    status: z.enum(['finished', 'failed', 'interrupted', 'expired']),
    endedAt: Timestamp.describe('When it ended; for an expired run, when its lease ended.'),
  })
  .meta({ id: 'EndedRun' });

/** A run: live or ended, exactly one of the two (their statuses differ). */
export const Run = z.xor([LiveRun, EndedRun]).meta({ id: 'Run' });

export const StartedRun = z
  .object({
    ...liveRunFields,
    interrupted: Id.nullable().describe('The run this start interrupted, or null.'),
  })
  .meta({
    id: 'StartedRun',
    description:
      'The run just started (`running`, unless its lease already ended), and the run it interrupted.',
  });

const FinishedRun = EndedRun.extend({ status: z.enum(['finished', 'failed']) });

export const ThreadHead = z
  .object({
    checkpointId: ThreadCheckpointId,
    parent: ThreadCheckpointId.nullable(),
    createdAt: Timestamp.describe('When the checkpoint was stored.'),
    since: Timestamp.describe('When it became the head (a put or a rewind).'),
  })
  .meta({ id: 'ThreadHead' });

export const Thread = z
  .object({
    threadId: Id,
    createdAt: Timestamp,
    updatedAt: Timestamp.describe('Its last change.'),
    heads: z
      .record(Namespace, ThreadHead)
      .describe(
        'Namespace → head, for the namespaces whose head the thread record holds: at most 32, the root and the most recently changed others (a head set by a rewind stays).',
      ),
    run: LiveRun.nullable().describe(
      'The run that holds or last held the thread, until another starts or it finishes.',
    ),
    recentRuns: z
      .array(EndedRun)
      .max(MAX_RECENT_RUNS)
      .describe(`The last ${MAX_RECENT_RUNS} runs that ended, newest first.`),
  })
  .meta({ id: 'Thread' });

export const ThreadPage = z
  .object({
    threads: z.array(z.object({ threadId: Id })).describe('Ascending by name.'),
    next: z
      .string()
      .min(1)
      .nullable()
      .describe('Opaque; pass it as `cursor` for the next page. Null on the last page.'),
  })
  .meta({ id: 'ThreadPage' });

export const PendingWrite = z
  .object({
    taskId: TaskId,
    taskPath: TaskPath,
    channel: Channel,
    idx: WriteIndex,
    type: TypeTag,
    data: Base64,
  })
  .meta({ id: 'PendingWrite' });

export const ThreadCheckpoint = z
  .object({
    threadId: Id,
    ns: Namespace,
    checkpointId: ThreadCheckpointId,
    parent: ThreadCheckpointId.nullable().describe('The checkpoint this one follows; null for the first.'),
    createdAt: Timestamp,
    v: z.number().int().min(0).describe("The client's checkpoint format version, as sent."),
    checkpoint: TypedBytes.describe('The serialised checkpoint without its channel values, as sent.'),
    metadata: jsonObject.describe('The JSON object sent with the checkpoint.'),
    channelVersions: z.record(Channel, ChannelVersion),
    values: z
      .record(Channel, z.union([TypedBytes, ValueDelta]))
      .describe(
        'Every channel that has a value at this checkpoint (stored with it or before it), with that value: whole, or, only when the answer has `since`, as a delta against the value of the same channel at `since`.',
      ),
    since: ThreadCheckpointId.optional().describe(
      'The `since` of the query, when it was applied: deltas in `values` are against its values.',
    ),
    pendingWrites: z
      .array(PendingWrite)
      .describe('Merged, in (task path, task id, index) order, strings by Unicode code point.'),
    pendingSends: z
      .array(TypedBytes)
      .optional()
      .describe(
        "Only for a checkpoint of format (`v`) below 4 with a parent: the parent's pending writes to the channel `__pregel_tasks`, in the order stored.",
      ),
    runId: Id.optional().describe('The run that stored it; absent when none did.'),
  })
  .meta({ id: 'ThreadCheckpoint' });

export const ThreadCheckpointPage = z
  .object({
    checkpoints: z.array(ThreadCheckpoint).describe('Newest first (by id, descending).'),
    next: z
      .string()
      .min(1)
      .nullable()
      .describe(
        'Opaque; pass it as `cursor` for the next page. Null when no older checkpoint is left. A page may hold fewer than `limit` with a non-null `next`.',
      ),
  })
  .meta({ id: 'ThreadCheckpointPage' });

export const ThreadCheckpointStored = z
  .object({
    threadId: Id,
    ns: Namespace,
    checkpointId: ThreadCheckpointId,
    head: ThreadCheckpointId.describe("The namespace's head after the put."),
  })
  .meta({ id: 'ThreadCheckpointStored' });

export const ThreadWritesStored = z
  .object({
    threadId: Id,
    ns: Namespace,
    checkpointId: ThreadCheckpointId,
    writes: z.number().int().min(1).describe('How many writes the call sent.'),
  })
  .meta({ id: 'ThreadWritesStored' });

// ---------------------------------------------------------------------------------------------
// Routes

const THREADS_NOTE =
  "Thread names are per tenant: another tenant's thread of the same name is a different thread, and answers as absent (404) to the caller.";
const WRITER_NOTE =
  'A writer naming a run (`runId`) is accepted only while that run is the live holder (else 409 `run_fenced`); a writer naming none only while no live run holds the thread (else 409 `thread_busy`).';

const threadParams = z.object({ threadId: Id.describe('The thread name.') });
const checkpointParams = threadParams.extend({
  checkpointId: ThreadCheckpointId.describe('The checkpoint id.'),
});
const runParams = threadParams.extend({ runId: Id.describe('The run id, as its start answered.') });

const threadBusy = { status: 409, response: 'ThreadBusy' } as const;
const runFenced = { status: 409, response: 'RunFenced' } as const;
const busyOrFenced = { status: 409, response: 'ThreadBusyOrRunFenced' } as const;

const smallBody = <S extends z.ZodType>(schema: S, description: string, emptyIsObject = false) =>
  ({ kind: 'json', description, schema, limit: MAX_SMALL_BODY_BYTES, emptyIsObject }) as const;

export const threadListRoute = route({
  name: 'threadList',
  route: 'threads',
  operations: {
    GET: {
      operationId: 'listThreads',
      summary: "List the caller's threads",
      description: `Ascending by name. \`after\` lists from the first name and skips (about one storage request per 1,000 names skipped); \`cursor\` continues a listing in one. ${THREADS_NOTE}`,
      tag: TAGS.threads,
      auth: 'tenant',
      query: threadListQuery,
      answers: { 200: { description: 'One page of names.', body: ThreadPage } },
      errors: [400],
    },
  },
});

export const threadRoute = route({
  name: 'thread',
  route: 'threads/{threadId}',
  params: threadParams,
  operations: {
    PUT: {
      operationId: 'createThread',
      summary: 'Create a thread',
      description: `Idempotent; no body. Checkpoint puts and run starts also create a thread that does not exist. 404 only when the thread, created by another request in the same instant, was deleted before it could be read. ${THREADS_NOTE}`,
      tag: TAGS.threads,
      auth: 'tenant',
      answers: {
        200: { description: 'The thread existed.', body: Thread },
        201: { description: 'Created.', body: Thread },
      },
      errors: [400, 404],
    },
    GET: {
      operationId: 'getThread',
      summary: 'A thread: its heads, its run and its recent runs',
      description: THREADS_NOTE,
      tag: TAGS.threads,
      auth: 'tenant',
      answers: { 200: { description: 'The thread.', body: Thread } },
      errors: [400, 404],
    },
    DELETE: {
      operationId: 'deleteThread',
      summary: 'Delete a thread with its checkpoints, values and writes',
      description: `Refused with 409 \`thread_busy\` while a live run holds it (finish or interrupt the run first). A thread created again under the name starts empty. ${THREADS_NOTE}`,
      tag: TAGS.threads,
      auth: 'tenant',
      answers: { 204: { description: 'Deleted.' } },
      errors: [400, 404, threadBusy],
    },
  },
});

export const threadCheckpointsRoute = route({
  name: 'threadCheckpoints',
  route: 'threads/{threadId}/checkpoints',
  params: threadParams,
  operations: {
    POST: {
      operationId: 'putThreadCheckpoint',
      summary: 'Store a checkpoint and make it the head of its namespace',
      description:
        "Only the channels whose version changed are sent (`values`); every other channel of `channelVersions` must have its version at the parent (else 400 naming `values.<channel>`), and keeps its value. Creates the thread when absent. A checkpoint id stored again with the same content is a retry (200; the head then moves only when it is still the parent or an older id); with other content, 409 `conflict`. A parent not stored in the namespace is 409 `conflict`; 404 when the thread is deleted while the checkpoint is stored. 413 also when the checkpoint's record (metadata, channel names and versions) would pass the storage's value limit (CAIRN_MAX_VALUE_BYTES, less the seal's overhead with encryption at rest). " +
        WRITER_NOTE,
      tag: TAGS.threads,
      auth: 'tenant',
      body: {
        kind: 'json',
        description: 'The checkpoint.',
        schema: putCheckpointBody,
        limit: MAX_PUT_BODY_BYTES,
      },
      answers: {
        200: {
          description:
            'A retry: the checkpoint was already stored with this content; `head` says where the head is.',
          body: ThreadCheckpointStored,
        },
        201: { description: 'Stored; `head` is the checkpoint.', body: ThreadCheckpointStored },
      },
      errors: [400, 404, { status: 409, response: 'ThreadWriteConflict' }],
    },
    GET: {
      operationId: 'listThreadCheckpoints',
      summary: "A thread's history",
      description:
        'Newest first (by id, descending), each checkpoint whole. A page reads at most 256 records, lists at most 20 pages of 1,000 keys and stops adding checkpoints past 8 MiB of values: it may hold fewer than `limit` with a non-null `next`; follow `next` until it is null.',
      tag: TAGS.threads,
      auth: 'tenant',
      query: historyQuery,
      answers: { 200: { description: 'One page of checkpoints.', body: ThreadCheckpointPage } },
      errors: [400, 404],
    },
  },
});

export const threadCheckpointLatestRoute = route({
  name: 'threadCheckpointLatest',
  route: 'threads/{threadId}/checkpoints/latest',
  params: threadParams,
  operations: {
    GET: {
      operationId: 'getLatestThreadCheckpoint',
      summary: 'The head of a namespace',
      description: 'The checkpoint stored last in the namespace, or the one a rewind moved the head to.',
      tag: TAGS.threads,
      auth: 'tenant',
      query: checkpointQuery,
      answers: { 200: { description: 'The checkpoint.', body: ThreadCheckpoint } },
      errors: [400, 404],
    },
  },
});

export const threadCheckpointRoute = route({
  name: 'threadCheckpoint',
  route: 'threads/{threadId}/checkpoints/{checkpointId}',
  params: checkpointParams,
  operations: {
    GET: {
      operationId: 'getThreadCheckpoint',
      summary: 'A checkpoint by id',
      description: '404 when the thread has no checkpoint of that id in the namespace.',
      tag: TAGS.threads,
      auth: 'tenant',
      query: checkpointQuery,
      answers: { 200: { description: 'The checkpoint.', body: ThreadCheckpoint } },
      errors: [400, 404],
    },
  },
});

export const threadCheckpointWritesRoute = route({
  name: 'threadCheckpointWrites',
  route: 'threads/{threadId}/checkpoints/{checkpointId}/writes',
  params: checkpointParams,
  operations: {
    POST: {
      operationId: 'putPendingWrites',
      summary: 'Store the pending writes of one task against a checkpoint',
      description:
        "A regular write (`idx` at least 0) already stored under (task id, index) is kept; a special write (below 0) replaces it. Parallel calls lose nothing. The checkpoint need not be stored yet (LangGraph sends a step's writes before the put of their checkpoint with a DeltaChannel): writes are read only through their checkpoint, so they show once it is stored. An absent thread is created, as a checkpoint put creates it. 413 also when the writes of the checkpoint would pass the storage's value limit (CAIRN_MAX_VALUE_BYTES, less the seal's overhead with encryption at rest). The writer is checked just before the append: a run fenced in that instant still gets this call's writes stored. " +
        WRITER_NOTE,
      tag: TAGS.threads,
      auth: 'tenant',
      body: {
        kind: 'json',
        description: 'The writes of one task.',
        schema: putWritesBody,
        limit: MAX_WRITES_BODY_BYTES,
      },
      answers: {
        200: { description: 'Stored; `writes` is how many were sent.', body: ThreadWritesStored },
      },
      errors: [400, busyOrFenced],
    },
  },
});

export const threadRewindRoute = route({
  name: 'threadRewind',
  route: 'threads/{threadId}/rewind',
  params: threadParams,
  operations: {
    POST: {
      operationId: 'rewindThread',
      summary: 'Move the head of a namespace to a stored checkpoint',
      description: `The next checkpoint names it as parent; the checkpoints after it stay readable as an abandoned branch. 404 when the thread, or the checkpoint in the namespace, is not stored. ${WRITER_NOTE}`,
      tag: TAGS.threads,
      auth: 'tenant',
      body: smallBody(rewindBody, 'The checkpoint to rewind to.'),
      answers: { 200: { description: 'The thread after the rewind.', body: Thread } },
      errors: [400, 404, busyOrFenced],
    },
  },
});

export const threadRunsRoute = route({
  name: 'threadRuns',
  route: 'threads/{threadId}/runs',
  params: threadParams,
  operations: {
    POST: {
      operationId: 'startRun',
      summary: 'Start a run: take the thread with a lease',
      description:
        'Creates the thread when absent, and takes its next fencing token. When a live run holds the thread, `onBusy` decides: `reject` answers 409 `thread_busy` at once; `wait` waits up to `busyTimeout` seconds for the thread, then 409 `thread_busy`; `interrupt` ends the holder as `interrupted` and starts at once. A holder whose lease ended is recorded as `expired`.',
      tag: TAGS.threads,
      auth: 'tenant',
      body: smallBody(startRunBody, 'How to start; may be empty.', true),
      answers: {
        201: {
          description: 'Started; `interrupted` is the run it interrupted, or null.',
          body: StartedRun,
        },
      },
      errors: [400, threadBusy],
    },
  },
});

export const threadRunRoute = route({
  name: 'threadRun',
  route: 'threads/{threadId}/runs/{runId}',
  params: runParams,
  operations: {
    GET: {
      operationId: 'getRun',
      summary: 'A run',
      description:
        'The live run (or the last one, once its lease ended) and the last 16 ended runs are known; 404 for others.',
      tag: TAGS.threads,
      auth: 'tenant',
      answers: { 200: { description: 'The run.', body: Run } },
      errors: [400, 404],
    },
  },
});

export const threadRunHeartbeatRoute = route({
  name: 'threadRunHeartbeat',
  route: 'threads/{threadId}/runs/{runId}/heartbeat',
  params: runParams,
  operations: {
    POST: {
      operationId: 'renewRunLease',
      summary: "Renew a run's lease from now",
      description:
        "409 `run_fenced` once the run no longer holds the thread (interrupted, finished, failed, or its lease ended: the error's `status` says which); 404 for a run the thread does not know.",
      tag: TAGS.threads,
      auth: 'tenant',
      body: smallBody(heartbeatBody, 'May be empty.', true),
      answers: { 200: { description: 'The run with its new lease.', body: LiveRun } },
      errors: [400, 404, runFenced],
    },
  },
});

export const threadRunFinishRoute = route({
  name: 'threadRunFinish',
  route: 'threads/{threadId}/runs/{runId}/finish',
  params: runParams,
  operations: {
    POST: {
      operationId: 'finishRun',
      summary: 'End a run and free the thread',
      description:
        'Idempotent: ending it again with the same status answers the same; another status, or a run that no longer holds the thread, is 409 `run_fenced`. 404 for a run the thread does not know.',
      tag: TAGS.threads,
      auth: 'tenant',
      body: smallBody(finishRunBody, 'How the run ended.'),
      answers: {
        200: { description: 'The ended run, with the status it was ended with.', body: FinishedRun },
      },
      errors: [400, 404, runFenced],
    },
  },
});

/** The thread routes, in the order the document lists them. */
export const THREAD_ROUTES = [
  threadListRoute,
  threadRoute,
  threadCheckpointsRoute,
  threadCheckpointLatestRoute,
  threadCheckpointRoute,
  threadCheckpointWritesRoute,
  threadRewindRoute,
  threadRunsRoute,
  threadRunRoute,
  threadRunHeartbeatRoute,
  threadRunFinishRoute,
] as const;

// ---------------------------------------------------------------------------------------------
// The wire types, as the client reads and sends them

export type ThreadJson = z.output<typeof Thread>;
export type ThreadHeadJson = z.output<typeof ThreadHead>;
export type ThreadPageJson = z.output<typeof ThreadPage>;
export type RunJson = z.output<typeof Run>;
export type LiveRunJson = z.output<typeof LiveRun>;
export type StartedRunJson = z.output<typeof StartedRun>;
export type ThreadCheckpointJson = z.output<typeof ThreadCheckpoint>;
export type ThreadCheckpointPageJson = z.output<typeof ThreadCheckpointPage>;
export type ThreadCheckpointStoredJson = z.output<typeof ThreadCheckpointStored>;
export type ThreadWritesStoredJson = z.output<typeof ThreadWritesStored>;
export type TypedBytesJson = z.output<typeof TypedBytes>;
export type ValueDeltaJson = z.output<typeof ValueDelta>;
export type ValueDeltaPutJson = z.output<typeof ValueDeltaPut>;
export type PendingWriteJson = z.output<typeof PendingWrite>;
export type PutCheckpointBody = z.input<typeof putCheckpointBody>;
export type PutWritesBody = z.input<typeof putWritesBody>;
export type RewindBody = z.input<typeof rewindBody>;
export type StartRunBody = z.input<typeof startRunBody>;
export type FinishRunStatus = z.output<typeof finishRunBody>['status'];
