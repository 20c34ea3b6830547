import { z } from 'zod';

import { JSON_DEPTH_RULE, tooDeepPath } from '../json';
import type { PendingWrite } from './pendingWrites';
import type { TypedBytes } from './records';
import type { CheckpointPut, CheckpointTuple, RunStart, WritesPut } from './threadStore';
import {
  DEFAULT_BUSY_TIMEOUT_MS,
  DEFAULT_LEASE_MS,
  MAX_BUSY_TIMEOUT_MS,
  MAX_FILTER_KEYS,
  MAX_LEASE_MS,
  MIN_LEASE_MS,
} from './validation';

/**
 * The JSON of the thread routes: request schemas (shape only; the thread store checks names,
 * sizes and the rules between fields, before any I/O) and the answers. Bytes a client serialised
 * travel as `{"type": "<serializer tag>", "data": "<base64>"}`.
 */

/** Request bodies up to these sizes are read; larger ones are 413 before anything else. */
export const MAX_PUT_BODY_BYTES = 16 * 1024 * 1024;
export const MAX_WRITES_BODY_BYTES = 4 * 1024 * 1024;
export const MAX_SMALL_BODY_BYTES = 16 * 1024;

const typedBytes = z.strictObject({
  type: z.string({ error: 'must be a string' }),
  data: z.base64({ error: 'must be base64' }),
});

/** A JSON object, kept as sent (own keys, `__proto__` included). */
const jsonObject = z.custom<Record<string, unknown>>(
  (value) => typeof value === 'object' && value !== null && !Array.isArray(value),
  { error: 'must be a JSON object' },
);

/** A map keyed by channel names; `__proto__` is refused (a record would silently drop it). */
function channelMap<T extends z.ZodType>(values: T) {
  return z
    .custom<Record<string, unknown>>(
      (value) =>
        typeof value === 'object' &&
        value !== null &&
        !Array.isArray(value) &&
        !Object.hasOwn(value, '__proto__'),
      { error: 'must be a JSON object of channels (not "__proto__")' },
    )
    .pipe(z.record(z.string(), values));
}

const id = z.string({ error: 'must be a string' });

export const putCheckpointBody = z.strictObject({
  checkpointId: id,
  ns: z.string({ error: 'must be a string' }).default(''),
  parent: id.nullable().default(null),
  runId: id.optional(),
  v: z.number({ error: 'must be a number' }).int('must be a whole number').min(0).default(4),
  checkpoint: typedBytes,
  metadata: jsonObject.default({}),
  channelVersions: channelMap(z.union([z.number(), z.string()], { error: 'must be a number or a string' })),
  values: channelMap(typedBytes.nullable()).default({}),
});

export function checkpointPutOf(body: z.infer<typeof putCheckpointBody>): CheckpointPut {
  const values: Record<string, TypedBytes | null> = {};
  for (const [channel, value] of Object.entries(body.values)) {
    Object.defineProperty(values, channel, {
      value: value === null ? null : bytesOf(value),
      enumerable: true,
    });
  }
  return {
    checkpointId: body.checkpointId,
    ns: body.ns,
    parent: body.parent,
    ...(body.runId === undefined ? {} : { runId: body.runId }),
    v: body.v,
    checkpoint: bytesOf(body.checkpoint),
    metadata: body.metadata,
    channelVersions: body.channelVersions,
    values,
  };
}

export const putWritesBody = z.strictObject({
  ns: z.string({ error: 'must be a string' }).default(''),
  taskId: z.string({ error: 'must be a string' }),
  taskPath: z.string({ error: 'must be a string' }).default(''),
  runId: id.optional(),
  writes: z.array(
    z.strictObject({
      channel: z.string({ error: 'must be a string' }),
      idx: z.number({ error: 'must be a number' }).int('must be a whole number'),
      type: z.string({ error: 'must be a string' }),
      data: z.base64({ error: 'must be base64' }),
    }),
    { error: 'must be an array' },
  ),
});

export function writesPutOf(checkpointId: string, body: z.infer<typeof putWritesBody>): WritesPut {
  return {
    ns: body.ns,
    checkpointId,
    taskId: body.taskId,
    taskPath: body.taskPath,
    ...(body.runId === undefined ? {} : { runId: body.runId }),
    writes: body.writes.map((write) => ({
      channel: write.channel,
      idx: write.idx,
      value: bytesOf(write),
    })),
  };
}

export const rewindBody = z.strictObject({
  ns: z.string({ error: 'must be a string' }).default(''),
  checkpointId: id,
  runId: id.optional(),
});

const seconds = (min: number, max: number) =>
  z
    .number({ error: 'must be a number of seconds' })
    .min(min, `must be from ${min} to ${max} seconds`)
    .max(max, `must be from ${min} to ${max} seconds`);

export const startRunBody = z.strictObject({
  onBusy: z
    .enum(['reject', 'wait', 'interrupt'], { error: 'must be reject, wait or interrupt' })
    .default('wait'),
  busyTimeout: seconds(0, MAX_BUSY_TIMEOUT_MS / 1000).default(DEFAULT_BUSY_TIMEOUT_MS / 1000),
  leaseSeconds: seconds(MIN_LEASE_MS / 1000, MAX_LEASE_MS / 1000).default(DEFAULT_LEASE_MS / 1000),
});

export function runStartOf(body: z.infer<typeof startRunBody>): RunStart {
  return {
    onBusy: body.onBusy,
    busyTimeoutMs: Math.round(body.busyTimeout * 1000),
    leaseMs: Math.round(body.leaseSeconds * 1000),
  };
}

export const heartbeatBody = z.strictObject({
  leaseSeconds: seconds(MIN_LEASE_MS / 1000, MAX_LEASE_MS / 1000).optional(),
});

export const finishRunBody = z.strictObject({
  status: z.enum(['finished', 'failed'], { error: 'must be finished or failed' }),
});

const limit = (max: number, fallback: number) => {
  const rule = `must be a whole number from 1 to ${max}`;
  return z.coerce.number({ error: rule }).int(rule).min(1, rule).max(max, rule).default(fallback);
};

export const threadListQuery = z.object({
  prefix: z.string().optional(),
  after: z.string().optional(),
  cursor: z.string().min(1, 'must not be empty').optional(),
  limit: limit(1000, 100),
});

export const checkpointQuery = z.object({ ns: z.string().default('') });

const FILTER_RULE = `must be a JSON object of at most ${MAX_FILTER_KEYS} metadata keys`;

export const historyQuery = z.object({
  ns: z.string().optional(),
  before: z.string().optional(),
  cursor: z.string().min(1, 'must not be empty').optional(),
  limit: limit(100, 10),
  filter: z
    .string()
    .max(4096, 'must be at most 4096 characters')
    .transform((text, context) => {
      try {
        const value = JSON.parse(text) as unknown;
        if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
          // Bounded like a body: history filters compare it with stored metadata recursively.
          if (tooDeepPath(value) !== null) {
            context.addIssue({ code: 'custom', message: JSON_DEPTH_RULE });
            return z.NEVER;
          }
          if (Object.keys(value).length <= MAX_FILTER_KEYS) return value as Record<string, unknown>;
        }
      } catch {
        // reported below
      }
      context.addIssue({ code: 'custom', message: FILTER_RULE });
      return z.NEVER;
    })
    .optional(),
});

function bytesOf(value: { type: string; data: string }): TypedBytes {
  return { type: value.type, data: Buffer.from(value.data, 'base64') };
}

function bytesJson(value: TypedBytes) {
  return { type: value.type, data: value.data.toString('base64') };
}

function writeJson(write: PendingWrite) {
  return {
    taskId: write.taskId,
    taskPath: write.taskPath,
    channel: write.channel,
    idx: write.idx,
    ...bytesJson(write),
  };
}

export function tupleJson(tuple: CheckpointTuple) {
  const values: Record<string, { type: string; data: string }> = {};
  for (const [channel, value] of Object.entries(tuple.values)) {
    Object.defineProperty(values, channel, { value: bytesJson(value), enumerable: true });
  }
  return {
    threadId: tuple.threadId,
    ns: tuple.ns,
    checkpointId: tuple.checkpointId,
    parent: tuple.parent,
    createdAt: tuple.createdAt,
    v: tuple.v,
    checkpoint: bytesJson(tuple.checkpoint),
    metadata: tuple.metadata,
    channelVersions: tuple.channelVersions,
    values,
    pendingWrites: tuple.pendingWrites.map(writeJson),
    ...(tuple.pendingSends === undefined ? {} : { pendingSends: tuple.pendingSends.map(bytesJson) }),
    ...(tuple.runId === undefined ? {} : { runId: tuple.runId }),
  };
}
