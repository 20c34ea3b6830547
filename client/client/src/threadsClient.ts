import { createHash } from 'node:crypto';

import type {
  FinishRunStatus,
  LiveRunJson,
  PendingWriteJson,
  PutCheckpointBody,
  PutWritesBody,
  RewindBody,
  RunJson,
  StartedRunJson,
  StartRunBody,
  ThreadCheckpointJson,
  ThreadCheckpointPageJson,
  ThreadCheckpointStoredJson,
  ThreadHeadJson,
  ThreadJson,
  ThreadPageJson,
  ThreadWritesStoredJson,
  TypedBytesJson,
  ValueDeltaJson,
} from '@cairn-state/protocol/threads';

import { CairnHttpError } from './errors.js';
import { failure, readJson, segment, type Transport } from './transport.js';
import type { Wire } from './wire.js';

/**
 * Threads, checkpoints, pending writes, rewinds and runs (`/api/threads`, docs/threads.md): a
 * thread is a named chain of checkpoints stored as deltas, and a run holds a thread with a lease so
 * that one worker at a time writes it.
 *
 * Absence is an answer where a caller asks "is it there?": `get`, `getCheckpoint`, `getRun` resolve
 * null for a missing thread, checkpoint or run, `delete` false. Refusals are thrown as
 * `CairnHttpError`; the ones to expect are `thread_busy` (409: a live run holds the thread;
 * `details.runId` is the holder, `details.retryAfter` the seconds until its lease ends), `run_fenced`
 * (409: the named run no longer holds the thread and nothing was stored; `details.status` says
 * why) and `conflict` (409: a checkpoint id stored with other content, or an absent parent).
 *
 * Retries: checkpoint puts, pending writes, rewinds, heartbeats and finishes are repeatable (the
 * service answers a repeat as the first time), so the transport resends them after an ambiguous
 * failure. Starting a run is not: it is never sent twice.
 */

/** Bytes the client serialised, with the serializer's tag (LangGraph's `json`, `bytes`, ...). */
export interface TypedValue {
  readonly type: string;
  readonly data: Uint8Array;
}

export type ChannelVersion = number | string;

/** The wire types are the protocol's (@cairn-state/protocol/threads). */
export type RunStatus = RunJson['status'];

/** A run: one that holds (or held until its lease ended) the thread, or one that ended. */
export type RunInfo = RunJson;

/** A run just started, with the run it interrupted (`onBusy: 'interrupt'`) or null. */
export type StartedRun = StartedRunJson;

export type ThreadHead = ThreadHeadJson;

/** A thread: its heads by namespace, the run that holds or last held it, its last ended runs. */
export type ThreadInfo = ThreadJson;

/** A page of thread names (the answer's `threads[].threadId`). */
export interface ThreadPage extends Omit<Wire<ThreadPageJson>, 'threads'> {
  readonly threads: readonly string[];
}

export interface ThreadListOptions {
  /** Names starting with this string (1-128 of `[A-Za-z0-9._-]`). */
  readonly prefix?: string;
  /** Names per request, 1-1000 (default 100). */
  readonly pageSize?: number;
}

export interface CheckpointPut {
  readonly checkpointId: string;
  /** Default `""` (the root namespace). */
  readonly ns?: string;
  /** A stored checkpoint of the namespace, or null (default) for one without a parent. */
  readonly parent?: string | null;
  /** The run sending it; required while a live run holds the thread. */
  readonly runId?: string;
  /** The client's checkpoint format version (default 4); below 4 reads add `pendingSends`. */
  readonly v?: number;
  /** The serialised checkpoint without its channel values (at most 256 KiB). */
  readonly checkpoint: TypedValue;
  /** A JSON object of at most 16 KiB; its top-level keys filter the history. */
  readonly metadata?: Readonly<Record<string, unknown>>;
  /** Every channel of the checkpoint and its version. */
  readonly channelVersions: Readonly<Record<string, ChannelVersion>>;
  /**
   * Only the channels whose version is new here: the value, or null when the channel has none.
   * Every other channel must have its parent's version (its value is the parent's).
   */
  readonly values?: Readonly<Record<string, TypedValue | null>>;
}

/** Where the checkpoint is stored and the namespace's head after the put. */
export type PutCheckpointResult = Wire<ThreadCheckpointStoredJson> & {
  /** False when the checkpoint was already stored with this content (a retry: 200, not 201). */
  readonly created: boolean;
};

/** A pending write as read, its bytes decoded. */
export type StoredWrite = Omit<Wire<PendingWriteJson>, 'type' | 'data'> & TypedValue;

/**
 * A checkpoint as read (the protocol's `ThreadCheckpoint`), its bytes decoded: `values` holds every
 * channel that has a value at this checkpoint (stored with it or before it), `pendingWrites` are in
 * (task path, task id, index) order, `pendingSends` is there for a checkpoint of format below 4 with
 * a parent (the parent's writes to `__pregel_tasks`).
 */
export type StoredCheckpoint = Omit<
  Wire<ThreadCheckpointJson>,
  'checkpoint' | 'metadata' | 'channelVersions' | 'values' | 'pendingWrites' | 'pendingSends'
> & {
  readonly checkpoint: TypedValue;
  readonly metadata: Record<string, unknown>;
  readonly channelVersions: Record<string, ChannelVersion>;
  readonly values: Record<string, TypedValue>;
  readonly pendingWrites: readonly StoredWrite[];
  readonly pendingSends?: readonly TypedValue[];
};

export interface HistoryOptions {
  /** One namespace (`""` is the root); undefined: every namespace. */
  readonly ns?: string;
  /** Only checkpoints with a smaller id. */
  readonly before?: string;
  /** Top-level metadata keys that must equal these JSON values. */
  readonly filter?: Readonly<Record<string, unknown>>;
  /** Checkpoints per request, 1-100 (default 10). */
  readonly pageSize?: number;
}

/** A page of the history; `next` is passed as `cursor` for the next page, null after the last one. */
export interface CheckpointPage extends Omit<Wire<ThreadCheckpointPageJson>, 'checkpoints'> {
  readonly checkpoints: readonly StoredCheckpoint[];
}

export interface WritesPut {
  /** Default `""`. */
  readonly ns?: string;
  readonly taskId: string;
  /** Orders writes (LangGraph's task path); default `""`. */
  readonly taskPath?: string;
  readonly runId?: string;
  /** 1-1000 writes: `idx` ≥ 0 regular (the first stored is kept), below 0 special (replaces). */
  readonly writes: readonly { readonly channel: string; readonly idx: number; readonly value: TypedValue }[];
}

export interface RunStartOptions {
  /** `reject`: 409 at once; `wait` (default): up to `busyTimeout` s; `interrupt`: end the holder. */
  readonly onBusy?: 'reject' | 'wait' | 'interrupt';
  /** Seconds `wait` waits, 0-60 (default 30). */
  readonly busyTimeout?: number;
  /** The lease, 1-600 s (default 60). */
  readonly leaseSeconds?: number;
}

/**
 * The values of a checkpoint the caller holds (as read or as stored): a put sends a value that
 * extends the value of the same channel there as a delta, and a read given them as `since` is
 * answered with deltas against them (docs/threads.md, Deltas).
 */
export interface KnownCheckpoint {
  readonly checkpointId: string;
  /** The channels' values at that checkpoint; a channel left out is sent and read whole. */
  readonly values: Readonly<Record<string, TypedValue>>;
}

/** Values below this many bytes always travel whole: a delta's head costs about 100 bytes. */
const DELTA_MIN_BYTES = 256;

type WireValue = TypedBytesJson;
type WireCheckpoint = ThreadCheckpointJson;

const toWire = (value: TypedValue): WireValue => ({
  type: value.type,
  data: Buffer.from(value.data.buffer, value.data.byteOffset, value.data.byteLength).toString('base64'),
});

const fromWire = (value: WireValue): TypedValue => ({
  type: value.type,
  data: Buffer.from(value.data, 'base64'),
});

const sha256Hex = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

function commonPrefix(a: Uint8Array, b: Uint8Array): number {
  const length = Math.min(a.length, b.length);
  let index = 0;
  while (index < length && a[index] === b[index]) index += 1;
  return index;
}

/** The put's wire value: a delta against `known`'s value of the channel when that is smaller. */
function putValueWire(channel: string, value: TypedValue, known: KnownCheckpoint | undefined) {
  const base =
    known !== undefined && Object.hasOwn(known.values, channel) ? known.values[channel] : undefined;
  if (base === undefined || base.type !== value.type || value.data.length < DELTA_MIN_BYTES)
    return toWire(value);
  const keep = commonPrefix(base.data, value.data);
  if (keep < DELTA_MIN_BYTES / 2) return toWire(value);
  const append = value.data.subarray(keep);
  return {
    type: value.type,
    base: { checkpointId: known!.checkpointId },
    keep,
    append: Buffer.from(append.buffer, append.byteOffset, append.byteLength).toString('base64'),
    sha256: sha256Hex(value.data),
  };
}

/** Thrown inside a read when a delta does not resolve against the caller's values: read whole. */
class StaleKnownValues extends Error {}

function valueOf(
  channel: string,
  value: WireValue | ValueDeltaJson,
  since: KnownCheckpoint | undefined,
): TypedValue {
  if (!('keep' in value)) return fromWire(value);
  const base =
    since !== undefined && Object.hasOwn(since.values, channel) ? since.values[channel] : undefined;
  if (base === undefined || base.type !== value.type || base.data.length < value.keep)
    throw new StaleKnownValues();
  const data = Buffer.concat([base.data.subarray(0, value.keep), Buffer.from(value.append, 'base64')]);
  if (sha256Hex(data) !== value.sha256) throw new StaleKnownValues();
  return { type: value.type, data };
}

function checkpointOf(wire: WireCheckpoint, since?: KnownCheckpoint): StoredCheckpoint {
  const { checkpoint, values, pendingWrites, pendingSends, since: answeredSince, ...rest } = wire;
  const known = answeredSince !== undefined && answeredSince === since?.checkpointId ? since : undefined;
  const decoded: Record<string, TypedValue> = {};
  for (const [channel, value] of Object.entries(values)) {
    Object.defineProperty(decoded, channel, {
      value: valueOf(channel, value, known),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return {
    ...rest,
    checkpoint: fromWire(checkpoint),
    values: decoded,
    pendingWrites: pendingWrites.map((write) => ({ ...write, data: Buffer.from(write.data, 'base64') })),
    ...(pendingSends === undefined ? {} : { pendingSends: pendingSends.map(fromWire) }),
  };
}

const threadPath = (threadId: string) => `/threads/${segment(threadId)}`;

export class ThreadsClient {
  constructor(private readonly transport: Transport) {}

  /** Creates the thread; idempotent (`created` false when it existed). */
  async create(threadId: string): Promise<{ created: boolean; thread: ThreadInfo }> {
    const reply = await this.transport.call('PUT', threadPath(threadId));
    const thread = await readJson<ThreadJson>(reply, 200, 201);
    return { created: reply.status === 201, thread };
  }

  /** The thread, or null when there is none of that name (also another tenant's). */
  async get(threadId: string): Promise<ThreadInfo | null> {
    const reply = await this.transport.call('GET', threadPath(threadId));
    if (reply.status === 404) return null;
    return readJson(reply, 200);
  }

  /**
   * Deletes the thread with its checkpoints, values and writes: true, or false when there was no
   * such thread. Refused (409 `thread_busy`) while a live run holds it.
   */
  async delete(threadId: string): Promise<boolean> {
    const reply = await this.transport.call('DELETE', threadPath(threadId));
    if (reply.status === 404) return false;
    if (reply.status !== 204) throw await failure(reply);
    return true;
  }

  /** One page of thread names in ascending order. */
  async listPage(options: ThreadListOptions & { readonly cursor?: string | null } = {}): Promise<ThreadPage> {
    const reply = await this.transport.call('GET', '/threads', {
      query: { prefix: options.prefix, limit: options.pageSize, cursor: options.cursor ?? undefined },
    });
    const page = await readJson<ThreadPageJson>(reply, 200);
    return { threads: page.threads.map((thread) => thread.threadId), next: page.next };
  }

  /** Every thread name (with the prefix) in ascending order, a page at a time. */
  async *list(options: ThreadListOptions = {}): AsyncGenerator<string, void, undefined> {
    let cursor: string | null = null;
    do {
      const page: ThreadPage = await this.listPage({ ...options, cursor });
      yield* page.threads;
      cursor = page.next;
    } while (cursor !== null);
  }

  /** Stores a checkpoint and makes it the head of its namespace (creating the thread if needed). */
  async putCheckpoint(
    threadId: string,
    put: CheckpointPut,
    options: { readonly known?: KnownCheckpoint } = {},
  ): Promise<PutCheckpointResult> {
    const send = async (known: KnownCheckpoint | undefined) => {
      const values: Record<string, PutCheckpointBody['values'] extends infer V ? V[keyof V] : never> = {};
      for (const [channel, value] of Object.entries(put.values ?? {})) {
        Object.defineProperty(values, channel, {
          value: value === null ? null : putValueWire(channel, value, known),
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
      const reply = await this.transport.call('POST', `${threadPath(threadId)}/checkpoints`, {
        json: { ...put, checkpoint: toWire(put.checkpoint), values } satisfies PutCheckpointBody,
        idempotent: true,
      });
      const body = await readJson<ThreadCheckpointStoredJson>(reply, 200, 201);
      return { ...body, created: reply.status === 201 };
    };
    if (options.known === undefined) return send(undefined);
    try {
      return await send(options.known);
    } catch (error) {
      // The base is not (or no longer) what the thread holds: send every value whole.
      if (error instanceof CairnHttpError && error.code === 'base_mismatch') return send(undefined);
      throw error;
    }
  }

  /**
   * The checkpoint `checkpointId` of the namespace, or its head when no id is given; null when the
   * thread or such a checkpoint does not exist.
   */
  async getCheckpoint(
    threadId: string,
    options: { readonly ns?: string; readonly checkpointId?: string; readonly since?: KnownCheckpoint } = {},
  ): Promise<StoredCheckpoint | null> {
    // `latest` names the head in the path; no stored checkpoint can have that id.
    if (options.checkpointId === 'latest') throw new TypeError('a checkpoint id cannot be "latest"');
    const which = options.checkpointId === undefined ? 'latest' : segment(options.checkpointId);
    const read = async (since: KnownCheckpoint | undefined) => {
      const reply = await this.transport.call('GET', `${threadPath(threadId)}/checkpoints/${which}`, {
        query: { ns: options.ns ?? '', since: since?.checkpointId },
      });
      if (reply.status === 404) return null;
      return checkpointOf(await readJson<WireCheckpoint>(reply, 200), since);
    };
    if (options.since === undefined) return read(undefined);
    try {
      return await read(options.since);
    } catch (error) {
      // The values the caller holds are not the ones the service has at `since`: read whole.
      if (error instanceof StaleKnownValues) return read(undefined);
      throw error;
    }
  }

  /** One page of the history, newest first; null when the thread does not exist. */
  async historyPage(
    threadId: string,
    options: HistoryOptions & { readonly cursor?: string | null } = {},
  ): Promise<CheckpointPage | null> {
    const cursor = options.cursor ?? undefined;
    const reply = await this.transport.call('GET', `${threadPath(threadId)}/checkpoints`, {
      query: {
        ns: options.ns,
        // The service takes `before` or a cursor, which already continues after it.
        before: cursor === undefined ? options.before : undefined,
        cursor,
        limit: options.pageSize,
        filter: options.filter === undefined ? undefined : JSON.stringify(options.filter),
      },
    });
    if (reply.status === 404) return null;
    const page = await readJson<ThreadCheckpointPageJson>(reply, 200);
    return { checkpoints: page.checkpoints.map((wire) => checkpointOf(wire)), next: page.next };
  }

  /** The whole history (as filtered), newest first, a page at a time; nothing for a missing thread. */
  async *history(
    threadId: string,
    options: HistoryOptions = {},
  ): AsyncGenerator<StoredCheckpoint, void, undefined> {
    let cursor: string | null = null;
    do {
      const page: CheckpointPage | null = await this.historyPage(threadId, { ...options, cursor });
      if (page === null) return;
      yield* page.checkpoints;
      cursor = page.next;
    } while (cursor !== null);
  }

  /** Stores the writes of one task against a stored checkpoint; answers how many were sent. */
  async putWrites(threadId: string, checkpointId: string, put: WritesPut): Promise<number> {
    const reply = await this.transport.call(
      'POST',
      `${threadPath(threadId)}/checkpoints/${segment(checkpointId)}/writes`,
      {
        json: {
          ...put,
          writes: put.writes.map((write) => ({
            channel: write.channel,
            idx: write.idx,
            ...toWire(write.value),
          })),
        } satisfies PutWritesBody,
        idempotent: true,
      },
    );
    return (await readJson<ThreadWritesStoredJson>(reply, 200)).writes;
  }

  /** Moves the head of a namespace to a stored checkpoint; the later ones stay readable. */
  async rewind(
    threadId: string,
    target: { readonly checkpointId: string; readonly ns?: string; readonly runId?: string },
  ): Promise<ThreadInfo> {
    const reply = await this.transport.call('POST', `${threadPath(threadId)}/rewind`, {
      json: target satisfies RewindBody,
      idempotent: true,
    });
    return readJson<ThreadJson>(reply, 200);
  }

  /** Starts a run holding the thread (creating the thread if needed). Never sent twice. */
  async startRun(threadId: string, options: RunStartOptions = {}): Promise<StartedRun> {
    const reply = await this.transport.call('POST', `${threadPath(threadId)}/runs`, {
      json: options satisfies StartRunBody,
    });
    return readJson<StartedRunJson>(reply, 201);
  }

  /** The run, or null when the thread does not know it. */
  async getRun(threadId: string, runId: string): Promise<RunInfo | null> {
    const reply = await this.transport.call('GET', `${threadPath(threadId)}/runs/${segment(runId)}`);
    if (reply.status === 404) return null;
    return readJson<RunJson>(reply, 200);
  }

  /** Renews the run's lease from now (its own lease length unless `leaseSeconds` is given). */
  async heartbeat(threadId: string, runId: string, leaseSeconds?: number): Promise<RunInfo> {
    const reply = await this.transport.call(
      'POST',
      `${threadPath(threadId)}/runs/${segment(runId)}/heartbeat`,
      {
        json: leaseSeconds === undefined ? {} : { leaseSeconds },
        idempotent: true,
      },
    );
    return readJson<LiveRunJson>(reply, 200);
  }

  /** Ends the run and frees the thread; finishing again with the same status answers the same. */
  async finishRun(threadId: string, runId: string, status: FinishRunStatus): Promise<RunInfo> {
    const reply = await this.transport.call('POST', `${threadPath(threadId)}/runs/${segment(runId)}/finish`, {
      json: { status },
      idempotent: true,
    });
    return readJson(reply, 200);
  }
}
