import { z } from 'zod';

import { actorOf, type Principal } from '../auth';
import { claimDelivery } from '../coordination/chatCursors';
import { addPromise, listPromises } from '../coordination/promises';
import type { Caller, MemoryFacts } from '../memory/memory';
import { checkFilter } from '../memory/valueFilter';
import { chatIdRule, claimCandidates, promiseBody, promisesQuery } from '../protocol/coordination';
import {
  ForbiddenError,
  InvalidArgumentError,
  NotFoundError,
  PayloadTooLargeError,
} from '../protocol/errors';
import { factKeyText, namespaceOrEmpty, namespaceText, rememberBody, searchBody } from '../protocol/memory';
import { checkpointQuery, historyQuery, threadListQuery } from '../protocol/threads';
import { rfc3339 } from '../protocol/time';
import { configuredMemory, type Services } from '../services';
import type { KeyValueStore, WriteConditions } from '../storage/keyValueStore';
import { keysQuery } from '../storage/kvWire';
import { tupleJson } from '../threads/wire';

/**
 * The MCP tools (docs/mcp.md): each one validates its arguments with the zod schema of the HTTP
 * route it mirrors (the same field rules, with descriptions added for a model to read), calls the
 * same domain function for the caller's tenant, and answers the route's JSON. Arguments are a
 * strict object: an unknown argument is refused naming it, as an unknown body field is.
 */

/** Who calls a tool: the authenticated principal, and the process's services. */
export interface ToolCall {
  readonly principal: Principal;
  readonly services: Services;
}

export interface Tool {
  readonly name: string;
  readonly title: string;
  readonly description: string;
  /** `admin`: listed and callable only for admin principals (forbidden otherwise). */
  readonly access: 'tenant' | 'admin';
  readonly readOnly: boolean;
  readonly schema: z.ZodType<Record<string, unknown>>;
  readonly run: (args: never, call: ToolCall) => Promise<unknown>;
}

function tool<S extends z.ZodType<Record<string, unknown>>>(definition: {
  name: string;
  title: string;
  description: string;
  access?: 'tenant' | 'admin';
  readOnly: boolean;
  schema: S;
  run: (args: z.output<S>, call: ToolCall) => Promise<unknown>;
}): Tool {
  return { access: 'tenant', ...definition };
}

/** Validates `args` with the tool's schema; the first problem names its argument (`candidateIds.3`). */
export function parseArguments<T>(schema: z.ZodType<T>, args: unknown): T {
  const result = schema.safeParse(args ?? {});
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  if (issue === undefined) throw new InvalidArgumentError('arguments', 'are invalid');
  if (issue.code === 'unrecognized_keys') {
    const where = [...issue.path, issue.keys[0] ?? ''].map(String).join('.');
    throw new InvalidArgumentError(where, 'is not a known argument');
  }
  const field = issue.path.length === 0 ? 'arguments' : issue.path.map(String).join('.');
  // An absent argument whose schema takes any JSON value (`value`) has no message of its own.
  if (issue.code === 'invalid_type' && issue.expected === 'nonoptional') {
    throw new InvalidArgumentError(field, 'is required');
  }
  throw new InvalidArgumentError(field, issue.message);
}

// ---------------------------------------------------------------------------------------------
// Shared pieces

const memoryOf = (call: ToolCall): MemoryFacts => configuredMemory(call.services);

const callerOf = (call: ToolCall): Caller => ({
  tenant: call.principal.tenant,
  actor: actorOf(call.principal),
});

const storeOf = (call: ToolCall): KeyValueStore => call.services.kvStores.forTenant(call.principal.tenant);

const NAMESPACE =
  'The namespace: a path of "/"-separated segments, e.g. "users/42" or "project/decisions". Facts of one subject share a namespace.';
const FACT_KEY = 'The key of the fact within its namespace, e.g. "preferred-language".';
const IF_MATCH =
  'Optional: write only if the stored version still has this ETag (as returned by an earlier call); otherwise the call fails with precondition_failed and nothing is written.';
const IF_ABSENT = 'Optional: true to write only if nothing is stored yet (create only).';

// eslint-disable-next-line no-control-regex
const ETAG = /^"[^"\u0000-\u001f\u007f]*"$/;

/** `ifMatch` / `ifAbsent`: the If-Match / If-None-Match: * of the HTTP routes, with the same rules. */
const conditionShape = {
  ifMatch: z
    .string({ error: 'must be a string' })
    .refine((tag) => tag === '*' || ETAG.test(tag), 'must be "*" or one quoted ETag as returned by Cairn')
    .optional()
    .describe(IF_MATCH),
  ifAbsent: z.boolean({ error: 'must be true or false' }).optional().describe(IF_ABSENT),
};

function conditionsOf(args: {
  ifMatch?: string | undefined;
  ifAbsent?: boolean | undefined;
}): WriteConditions {
  if (args.ifMatch !== undefined && args.ifAbsent === true) {
    throw new InvalidArgumentError('ifMatch', 'cannot be combined with ifAbsent');
  }
  if (args.ifAbsent === true) return { ifAbsent: true };
  if (args.ifMatch !== undefined) return { ifMatch: args.ifMatch };
  return {};
}

// ---------------------------------------------------------------------------------------------
// Memory

const remember = tool({
  name: 'remember',
  title: 'Remember a fact',
  description:
    'Stores a fact (any JSON value, at most 32 KiB) under a namespace and key, replacing what was stored there. Use it for anything worth keeping across conversations: user preferences, decisions, learned facts. Optionally expires after `ttl` seconds. Answers the stored fact with its ETag; `created` says whether it is new.',
  readOnly: false,
  schema: z.strictObject({
    namespace: namespaceText.describe(NAMESPACE),
    key: factKeyText.describe(FACT_KEY),
    value: rememberBody.shape.value.describe('The fact: any JSON value (text, number, object, list).'),
    ttl: rememberBody.shape.ttl.describe('Optional: seconds until the fact is forgotten by itself.'),
    ...conditionShape,
  }),
  run: async (args, call) => {
    const { item, created } = await memoryOf(call).remember(
      callerOf(call),
      args.namespace,
      args.key,
      args.value,
      {
        conditions: conditionsOf(args),
        ...(args.ttl === undefined ? {} : { ttl: args.ttl }),
      },
    );
    return { ...item, created };
  },
});

const recall = tool({
  name: 'recall',
  title: 'Recall a fact',
  description:
    'Reads the fact stored under a namespace and key. Fails with not_found when nothing is stored there (or it expired); use search_memory when the exact key is not known.',
  readOnly: true,
  schema: z.strictObject({
    namespace: namespaceText.describe(NAMESPACE),
    key: factKeyText.describe(FACT_KEY),
  }),
  run: async (args, call) => {
    const item = await memoryOf(call).recall(callerOf(call), args.namespace, args.key);
    if (item === null) throw new NotFoundError('no fact is stored under this namespace and key');
    return item;
  },
});

const searchMemory = tool({
  name: 'search_memory',
  title: 'Search memory',
  description:
    'Finds facts in a namespace and everything below it ("" searches every namespace). With `text`, ranks facts by keyword relevance to it (each result has a score from 0 to 1); without, lists them newest first. With `vector` (an embedding with as many dimensions as the vectors stored with the facts), ranks facts with vectors by cosine similarity to it; with both, by reciprocal rank fusion of the two rankings. `filter` keeps facts whose value has the given top-level fields, e.g. {"kind": "preference"}.',
  readOnly: true,
  schema: z.strictObject({
    namespace: namespaceOrEmpty('is required ("" searches every namespace)', false)
      .default('')
      .describe(`${NAMESPACE} Default "": every namespace.`),
    text: searchBody.shape.text.describe('Optional: keywords to rank the facts by.'),
    vector: z
      .array(z.number({ error: 'must be a list of numbers' }), { error: 'must be a list of numbers' })
      .optional()
      .describe('Optional: a query embedding to rank the facts with vectors by closeness to it.'),
    limit: searchBody.shape.limit.describe('Optional: at most this many results (default 10, at most 1000).'),
    offset: searchBody.shape.offset.describe('Optional: skip this many results, to page.'),
    filter: z
      .unknown()
      .optional()
      .describe('Optional: a JSON object of top-level value fields and the values they must equal.'),
  }),
  run: async (args, call) => {
    return memoryOf(call).search(callerOf(call), {
      namespace: args.namespace,
      ...(args.text === undefined ? {} : { text: args.text }),
      ...(args.vector === undefined ? {} : { vector: args.vector }),
      ...(args.limit === undefined ? {} : { limit: args.limit }),
      ...(args.offset === undefined ? {} : { offset: args.offset }),
      ...(args.filter === undefined ? {} : { filter: checkFilter(args.filter) }),
    });
  },
});

const forget = tool({
  name: 'forget',
  title: 'Forget a fact',
  description:
    'Deletes the fact under a namespace and key. Succeeds when nothing is stored there too (forgetting is idempotent), unless `ifMatch` is given.',
  readOnly: false,
  schema: z.strictObject({
    namespace: namespaceText.describe(NAMESPACE),
    key: factKeyText.describe(FACT_KEY),
    ifMatch: conditionShape.ifMatch,
  }),
  run: async (args, call) => {
    await memoryOf(call).forget(callerOf(call), args.namespace, args.key, conditionsOf(args));
    return { forgotten: true };
  },
});

const forgetAll = tool({
  name: 'forget_all',
  title: 'Forget a namespace',
  description:
    'Deletes every fact in a namespace and below it (at most 1000 per call: when `more` is true, call again). `namespace` "" with `all` true forgets every fact of the tenant; ask the user before doing that.',
  readOnly: false,
  schema: z.strictObject({
    namespace: namespaceOrEmpty('is required', false).describe(
      `${NAMESPACE} "" (with all) for every namespace.`,
    ),
    all: z
      .boolean({ error: 'must be true or false' })
      .optional()
      .describe('Must be true when namespace is "" (forget everything).'),
  }),
  run: (args, call) => memoryOf(call).forgetAll(callerOf(call), args.namespace, { all: args.all === true }),
});

// ---------------------------------------------------------------------------------------------
// Key/value

const KV_KEY =
  'The key: "/"-separated segments, e.g. "agents/planner/state.json"; no empty, "." or ".." segment.';
const encoding = z
  .enum(['utf8', 'base64'], { error: 'must be "utf8" or "base64"' })
  .default('utf8')
  .describe('How `value` is written: "utf8" text (default) or "base64" bytes.');
const kvKey = z.string({ error: 'is required' }).describe(KV_KEY);

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Bytes as a tool answers them: text when they are UTF-8, else base64. */
export function valueJson(bytes: Buffer): { encoding: 'utf8' | 'base64'; value: string } {
  try {
    return { encoding: 'utf8', value: utf8.decode(bytes) };
  } catch {
    return { encoding: 'base64', value: bytes.toString('base64') };
  }
}

function bytesOf(call: ToolCall, value: string, how: 'utf8' | 'base64'): Buffer {
  if (how === 'base64' && !/^[A-Za-z0-9+/]*={0,2}$/.test(value)) {
    throw new InvalidArgumentError('value', 'must be base64 (encoding is "base64")');
  }
  const bytes = Buffer.from(value, how);
  const limit = call.services.config.maxValueBytes;
  if (bytes.length > limit) throw new PayloadTooLargeError(limit, 'value');
  return bytes;
}

const writeSchema = z.strictObject({
  key: kvKey,
  value: z.string({ error: 'must be a string (text, or base64 with encoding "base64")' }),
  encoding,
  ...conditionShape,
});

const kvGet = tool({
  name: 'kv_get',
  title: 'Read a value',
  description:
    'Reads the value stored at a key. Answers it as text when it is UTF-8 (encoding "utf8"), else as base64, with its ETag for a later conditional write. Fails with not_found when nothing is stored.',
  readOnly: true,
  schema: z.strictObject({ key: kvKey }),
  run: async (args, call) => {
    const stored = await storeOf(call).read(args.key);
    if (stored === null) throw new NotFoundError('no value is stored at this key');
    return { key: args.key, etag: stored.etag, size: stored.value.length, ...valueJson(stored.value) };
  },
});

const kvPut = tool({
  name: 'kv_put',
  title: 'Write a value',
  description:
    'Writes a value at a key, replacing what is there. For safe read-modify-write pass the ETag you read as `ifMatch`; `ifAbsent` true writes only a new key. Answers the new ETag and size; `created` says whether the key is new.',
  readOnly: false,
  schema: writeSchema,
  run: async (args, call) => {
    const result = await storeOf(call).write(
      args.key,
      bytesOf(call, args.value, args.encoding),
      conditionsOf(args),
    );
    return { key: args.key, etag: result.etag, size: result.size, created: result.created };
  },
});

const kvAppend = tool({
  name: 'kv_append',
  title: 'Append to a value',
  description:
    'Appends to the value at a key (creating it when absent), e.g. one JSON line to a log. Concurrent appends all land, in some order. Answers the new ETag and size.',
  readOnly: false,
  schema: writeSchema,
  run: async (args, call) => {
    const result = await storeOf(call).append(
      args.key,
      bytesOf(call, args.value, args.encoding),
      conditionsOf(args),
    );
    return { key: args.key, etag: result.etag, size: result.size, created: result.created };
  },
});

const kvList = tool({
  name: 'kv_list',
  title: 'List keys',
  description:
    'Lists keys in key order, optionally only those starting with `prefix`. When `cursor` in the answer is not null, pass it back to get the next page.',
  readOnly: true,
  schema: z.strictObject({
    prefix: keysQuery.shape.prefix.describe('Optional: only keys starting with this text.'),
    limit: keysQuery.shape.limit.describe('Optional: keys per page, 1 to 5000 (default 1000).'),
    cursor: keysQuery.shape.cursor.describe('Optional: the cursor of the previous page.'),
  }),
  run: async (args, call) => {
    const page = await storeOf(call).list({
      limit: args.limit,
      ...(args.prefix === undefined ? {} : { prefix: args.prefix }),
      ...(args.cursor === undefined ? {} : { cursor: args.cursor }),
    });
    return { keys: page.keys, cursor: page.cursor };
  },
});

// ---------------------------------------------------------------------------------------------
// Coordination

const claimDeliveries = tool({
  name: 'claim_deliveries',
  title: 'Claim messages to handle',
  description:
    'Of the message ids you are about to handle in a chat, claims those no one has claimed yet: across every agent and instance, each id is claimed exactly once. Handle only the ids in `claimed`. `reason` "unresolved" or "contention" means nothing was claimed this time: try again later.',
  readOnly: false,
  schema: z.strictObject({
    chatId: chatIdRule.describe('The chat the messages belong to.'),
    candidateIds: claimCandidates.describe('The message ids (at most 500, 1-256 characters each).'),
    lastTs: rfc3339
      .nullable()
      .optional()
      .describe('Optional: the RFC 3339 timestamp of the newest candidate message.'),
  }),
  run: async (args, call) => {
    const claim = await claimDelivery(storeOf(call), args.chatId, args.candidateIds, {
      lastTs: args.lastTs ?? null,
      cache: call.services.chatCursorCache.forTenant(call.principal.tenant),
    });
    return { claimed: claim.claimed, reason: claim.reason };
  },
});

const addPromiseTool = tool({
  name: 'add_promise',
  title: 'Record a promise',
  description:
    'Records something you promised to do in a chat ("I will send the report by Friday"), so that any later run can find and keep it. Answers the promise with its id.',
  readOnly: false,
  schema: z.strictObject({
    chatId: promiseBody.shape.chatId.describe('The chat the promise was made in.'),
    description: promiseBody.shape.description.describe('What was promised.'),
    dueBy: rfc3339.nullable().optional().describe('Optional: RFC 3339 time it is due by.'),
  }),
  run: (args, call) => addPromise(storeOf(call), args),
});

const listPromisesTool = tool({
  name: 'list_promises',
  title: 'List promises',
  description: 'Lists the promises made in chats: the open ones (default) or all, resolved included.',
  readOnly: true,
  schema: z.strictObject({
    status: promisesQuery.shape.status.describe('"open" (default) or "all".'),
  }),
  run: async (args, call) => ({ promises: await listPromises(storeOf(call), args.status) }),
});

// ---------------------------------------------------------------------------------------------
// Threads (read-only)

const THREAD_ID = 'The thread id (as the agent framework named it).';

const listThreads = tool({
  name: 'list_threads',
  title: 'List threads',
  description:
    'Lists the conversation threads stored for this tenant (by LangGraph checkpointers and agent loops), in id order. Pass `cursor` back for the next page.',
  readOnly: true,
  schema: z.strictObject({
    prefix: threadListQuery.shape.prefix.describe('Optional: only thread ids starting with this text.'),
    after: threadListQuery.shape.after.describe('Optional: only thread ids after this one.'),
    cursor: threadListQuery.shape.cursor.describe('Optional: the cursor of the previous page.'),
    limit: threadListQuery.shape.limit.describe('Optional: threads per page, 1 to 1000 (default 100).'),
  }),
  run: (args, call) => call.services.threads.listThreads(call.principal.tenant, args),
});

const getCheckpoint = tool({
  name: 'get_checkpoint',
  title: 'Read a checkpoint',
  description:
    "Reads a thread's latest checkpoint (or the one named by `checkpointId`) in a checkpoint namespace, with its metadata, channel values and pending writes. Serialised values are base64 with their serializer's type tag.",
  readOnly: true,
  schema: z.strictObject({
    threadId: z.string({ error: 'is required' }).describe(THREAD_ID),
    ns: checkpointQuery.shape.ns.describe('Optional: the checkpoint namespace (default "", the root graph).'),
    checkpointId: z
      .string({ error: 'must be a string' })
      .optional()
      .describe('Optional: the checkpoint id; default the latest.'),
  }),
  run: async (args, call) =>
    tupleJson(
      await call.services.threads.getCheckpoint(
        call.principal.tenant,
        args.threadId,
        args.ns,
        args.checkpointId,
      ),
    ),
});

const listCheckpoints = tool({
  name: 'list_checkpoints',
  title: 'List checkpoints',
  description:
    "Lists a thread's checkpoints, newest first (10 by default). Pass `next` from the answer as `cursor` for older ones.",
  readOnly: true,
  schema: z.strictObject({
    threadId: z.string({ error: 'is required' }).describe(THREAD_ID),
    ns: historyQuery.shape.ns.describe('Optional: only this checkpoint namespace.'),
    before: historyQuery.shape.before.describe('Optional: only checkpoints older than this checkpoint id.'),
    cursor: historyQuery.shape.cursor.describe('Optional: `next` of the previous page.'),
    limit: historyQuery.shape.limit.describe('Optional: checkpoints per page, 1 to 100 (default 10).'),
    filter: historyQuery.shape.filter.describe(
      'Optional: JSON text of an object of metadata fields the checkpoints must have, e.g. "{\\"source\\":\\"loop\\"}".',
    ),
  }),
  run: async (args, call) => {
    const { threadId, ...query } = args;
    const page = await call.services.threads.listCheckpoints(call.principal.tenant, threadId, query);
    return { checkpoints: page.checkpoints.map((tuple) => tupleJson(tuple)), next: page.next };
  },
});

// ---------------------------------------------------------------------------------------------
// Admin

const listTenants = tool({
  name: 'list_tenants',
  title: 'List tenants (admin)',
  description: 'Admins only: lists every tenant that stored anything, with the kinds of data it holds.',
  access: 'admin',
  readOnly: true,
  schema: z.strictObject({}),
  run: async (_args, call) => {
    const found: { tenant: string; domains: string[] }[] = [];
    for await (const entry of call.services.tenants.entries()) {
      found.push({ tenant: entry.tenant, domains: [...entry.domains].sort() });
    }
    return { tenants: found };
  },
});

export const TOOLS: readonly Tool[] = [
  remember,
  recall,
  searchMemory,
  forget,
  forgetAll,
  kvGet,
  kvPut,
  kvAppend,
  kvList,
  claimDeliveries,
  addPromiseTool,
  listPromisesTool,
  listThreads,
  getCheckpoint,
  listCheckpoints,
  listTenants,
];

const BY_NAME = new Map(TOOLS.map((entry) => [entry.name, entry]));

/** Runs the named tool for the caller: unknown tools are not_found, admin tools forbidden to others. */
export async function callTool(name: string, args: unknown, call: ToolCall): Promise<unknown> {
  const found = BY_NAME.get(name);
  if (found === undefined) throw new NotFoundError(`no tool is named "${name}"`);
  if (found.access === 'admin' && !call.principal.admin) {
    throw new ForbiddenError(`the tool ${name} is for admins`);
  }
  const parsed = parseArguments(found.schema, args);
  return (found.run as (args: unknown, call: ToolCall) => Promise<unknown>)(parsed, call);
}
