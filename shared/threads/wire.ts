import type { z } from 'zod';

import type { putWritesBody, startRunBody } from '../protocol/threads';
import type { PendingWrite } from './pendingWrites';
import type { TypedBytes } from './records';
import type { CheckpointPut, CheckpointTuple, RunStart, WritesPut } from './threadStore';
import { deltaAgainst, type ResolvedPutBody } from './wireDelta';

/**
 * The thread routes' JSON as the thread store takes and gives it: the request schemas are the
 * protocol's (shared/protocol/threads.ts), and these turn
 * their base64 into bytes and the store's answers back. Bytes a client serialised travel as
 * `{"type": "<serializer tag>", "data": "<base64>"}`.
 */

export function checkpointPutOf(body: ResolvedPutBody): CheckpointPut {
  const values: Record<string, TypedBytes | null> = {};
  for (const [channel, value] of Object.entries(body.values)) {
    Object.defineProperty(values, channel, {
      value:
        value === null
          ? null
          : typeof value.data === 'string'
            ? bytesOf(value as { type: string; data: string })
            : (value as TypedBytes),
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

export function runStartOf(body: z.infer<typeof startRunBody>): RunStart {
  return {
    onBusy: body.onBusy,
    busyTimeoutMs: Math.round(body.busyTimeout * 1000),
    leaseMs: Math.round(body.leaseSeconds * 1000),
  };
}

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

/**
 * A checkpoint as the routes answer it; with `since` (a checkpoint of the same thread and namespace
 * the client holds), a value may be a delta against the value of the same channel there.
 */
export function tupleJson(tuple: CheckpointTuple, since?: Pick<CheckpointTuple, 'checkpointId' | 'values'>) {
  const values: Record<
    string,
    { type: string; data: string } | { type: string; keep: number; append: string; sha256: string }
  > = {};
  for (const [channel, value] of Object.entries(tuple.values)) {
    const known =
      since !== undefined && Object.hasOwn(since.values, channel) ? since.values[channel] : undefined;
    const sent = since === undefined ? value : deltaAgainst(value, known);
    Object.defineProperty(values, channel, {
      value:
        'append' in sent
          ? { type: sent.type, keep: sent.keep, append: sent.append.toString('base64'), sha256: sent.sha256 }
          : bytesJson(sent),
      enumerable: true,
    });
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
    ...(since === undefined ? {} : { since: since.checkpointId }),
  };
}
