import type { KnownCheckpoint, StoredCheckpoint, ThreadsClient, TypedValue } from '@cairn-state/client';
import { CairnClient, type CairnClientOptions } from '@cairn-state/client';
import { isCheckpointId } from '@cairn-state/protocol/threads';
import type { RunnableConfig } from '@langchain/core/runnables';
import {
  BaseCheckpointSaver,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointPendingWrite,
  type CheckpointTuple,
  type DeltaChannelHistory,
  getCheckpointId,
  maxChannelVersion,
  type PendingWrite,
  type SerializerProtocol,
  TASKS,
  WRITES_IDX_MAP,
} from '@langchain/langgraph-checkpoint';

import { ThreadNames } from './threadNames.js';

/**
 * A LangGraph.js checkpointer (`BaseCheckpointSaver` of `@langchain/langgraph-checkpoint` 1.2) on
 * Cairn's thread API (docs/threads.md), one HTTP request per `put`, `putWrites` and `getTuple`:
 *
 *     const checkpointer = new CairnCheckpointSaver({ url: 'http://127.0.0.1:7071/api', token });
 *     const graph = builder.compile({ checkpointer });
 *     await graph.invoke(input, { configurable: { thread_id: 'conv-42' } });
 *
 * What it stores: a `put` sends the checkpoint without its channel values and versions (serialised
 * with the saver's serde), the metadata as JSON (filterable), the channel versions, and the values
 * of the channels in `newVersions` only: every other channel keeps its parent's value, stored once
 * by the checkpoint that changed it. A `getTuple` gets the checkpoint back with every channel value
 * and its pending writes in one answer.
 *
 * Semantics follow `MemorySaver`: the latest checkpoint of a namespace is its head (the greatest id
 * while ids grow, as LangGraph's uuid6 do); returned configs hold `thread_id`, `checkpoint_ns` and
 * `checkpoint_id` (a `getTuple` by id returns the config it was given, as `MemorySaver` does);
 * pending writes come ordered by (task path, task id, index), a regular write already stored is kept
 * and a special one replaced; a checkpoint of format below 4 gets its parent's pending sends. Where
 * the service differs: a checkpoint id stored again with other content is refused (409 `conflict`)
 * instead of replaced, and a metadata filter compares objects by content. Pending writes may come
 * before their checkpoint (LangGraph sends them so with a DeltaChannel); `getDeltaChannelHistory`
 * reads the ancestors by history pages instead of one `getTuple` each.
 *
 * What travels: the saver keeps, per thread and namespace (the last `knownCheckpoints` of them,
 * least recently used dropped), the values of the checkpoint it last read or stored there. A `put`
 * sends a value that extends the value of the same channel there as a delta (the bytes kept and the
 * bytes added, with the SHA-256 of the whole; sent whole again when the service answers 409
 * `base_mismatch`), and a `getTuple` asks for the values as changes since that checkpoint (read
 * whole again when a change does not resolve to its digest). Another saver writing the thread, a
 * fork or a deleted thread only costs a whole value: every delta is checked against what the
 * service holds.
 *
 * `scope` keeps one saver's threads apart from another's in the same tenant (see threadNames.ts
 * for how thread ids become Cairn names); `list` without a thread id covers the scope's threads
 * only. `runId` binds the saver to a run that holds the thread (started with
 * `CairnClient.threads.startRun(saver.threadName(threadId), ...)`): every put and write names it,
 * and once the run is interrupted or its lease ended they fail with `CairnHttpError` 409
 * `run_fenced` and store nothing. A saver without `runId` may write only while no live run holds
 * the thread (409 `thread_busy` otherwise).
 */

export type CairnCheckpointSaverOptions = (CairnClientOptions | { readonly client: CairnClient }) & {
  /** Isolates this saver's threads from other savers' of the tenant (any non-empty string). */
  readonly scope?: string;
  /** The run whose writes these are: refused once it no longer holds the thread. */
  readonly runId?: string;
  /** Default: LangGraph's own (`JsonPlusSerializer`). */
  readonly serde?: SerializerProtocol;
  /** How many threads' (and namespaces') last checkpoint values to keep for deltas; default 32, 0: none. */
  readonly knownCheckpoints?: number;
};

/** The values of a checkpoint the saver read or stored; `complete` when they are all its channels'. */
interface Known extends KnownCheckpoint {
  readonly complete: boolean;
}

/** History pages asked for: the service's largest. */
const PAGE_SIZE = 100;

type Configurable = Record<string, unknown>;

function configurableOf(config: RunnableConfig): Configurable {
  return (config.configurable ?? {}) as Configurable;
}

function namespaceOf(value: unknown): string {
  if (value === undefined) return '';
  if (typeof value !== 'string') throw new TypeError('checkpoint_ns must be a string');
  return value;
}

/** A non-empty string id from the config, or undefined. */
function idOf(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

export class CairnCheckpointSaver extends BaseCheckpointSaver {
  private readonly threads: ThreadsClient;
  private readonly names: ThreadNames;
  private readonly runId: string | undefined;
  /** Per `name\nns`, least recently used first. */
  private readonly known = new Map<string, Known>();
  private readonly knownLimit: number;

  constructor(options: CairnCheckpointSaverOptions) {
    super(options.serde);
    this.threads = ('client' in options ? options.client : new CairnClient(options)).threads;
    this.names = new ThreadNames(options.scope);
    this.runId = options.runId;
    this.knownLimit = Math.max(0, Math.floor(options.knownCheckpoints ?? 32));
  }

  /** The Cairn thread name of a LangGraph thread id in this saver's scope (for runs, curl, ...). */
  threadName(threadId: string): string {
    return this.names.nameOf(threadId);
  }

  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const configurable = configurableOf(config);
    const threadId = configurable['thread_id'];
    if (threadId === undefined) return undefined;
    const name = this.names.nameOf(threadId);
    const ns = namespaceOf(configurable['checkpoint_ns']);
    const checkpointId = getCheckpointId(config);
    // An id Cairn cannot store was never stored.
    if (checkpointId !== '' && !isCheckpointId(checkpointId)) return undefined;
    const since = this.knownOf(name, ns);
    const stored = await this.threads.getCheckpoint(name, {
      ns,
      ...(checkpointId === '' ? {} : { checkpointId }),
      ...(since?.complete === true ? { since } : {}),
    });
    if (stored === null) return undefined;
    this.remember(name, ns, { checkpointId: stored.checkpointId, values: stored.values, complete: true });
    return this.tupleOf(threadId as string, stored, checkpointId === '' ? undefined : config);
  }

  async *list(config: RunnableConfig, options: CheckpointListOptions = {}): AsyncGenerator<CheckpointTuple> {
    const configurable = configurableOf(config);
    const ns =
      configurable['checkpoint_ns'] === undefined ? undefined : namespaceOf(configurable['checkpoint_ns']);
    const onlyId = idOf(configurable['checkpoint_id']);
    const beforeId = idOf(options.before?.configurable?.['checkpoint_id']);
    const { server: serverFilter, absent } = await this.filterOf(options.filter);
    let remaining = options.limit;
    if (onlyId !== undefined && !isCheckpointId(onlyId)) return;
    for await (const [threadId, name] of this.threadsOf(configurable['thread_id'])) {
      for await (const stored of this.candidates(name, {
        ns,
        onlyId,
        beforeId,
        filter: serverFilter,
        remaining,
      })) {
        if (beforeId !== undefined && !(stored.checkpointId < beforeId)) continue;
        if (absent.some((key) => stored.metadata[key] !== undefined)) continue;
        if (remaining !== undefined) {
          if (remaining <= 0) return;
          remaining -= 1;
        }
        yield await this.tupleOf(threadId, stored);
      }
    }
  }

  async put(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    newVersions: ChannelVersions,
  ): Promise<RunnableConfig> {
    if (config.configurable === undefined) {
      throw new Error('Failed to put checkpoint: the config has no "configurable" property');
    }
    const configurable = configurableOf(config);
    const threadId = configurable['thread_id'];
    if (threadId === undefined) {
      throw new Error(
        'Failed to put checkpoint: "thread_id" is missing from config.configurable (pass one, e.g. graph.invoke(input, { configurable: { thread_id: "conv-42" } }))',
      );
    }
    const name = this.names.nameOf(threadId);
    const ns = namespaceOf(configurable['checkpoint_ns']);
    if (!isCheckpointId(checkpoint.id)) {
      throw new TypeError(`checkpoint.id ${JSON.stringify(checkpoint.id)} is not a Cairn checkpoint id`);
    }
    await this.sendPut(
      name,
      ns,
      idOf(configurable['checkpoint_id']) ?? null,
      checkpoint,
      metadata,
      newVersions,
    );
    return { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: checkpoint.id } };
  }

  async putWrites(
    config: RunnableConfig,
    writes: PendingWrite[],
    taskId: string,
    taskPath = '',
  ): Promise<void> {
    const configurable = configurableOf(config);
    const threadId = configurable['thread_id'];
    if (threadId === undefined)
      throw new Error('Failed to put writes: "thread_id" is missing from config.configurable');
    const checkpointId = idOf(configurable['checkpoint_id']);
    if (checkpointId === undefined) {
      throw new Error('Failed to put writes: "checkpoint_id" is missing from config.configurable');
    }
    const name = this.names.nameOf(threadId);
    const ns = namespaceOf(configurable['checkpoint_ns']);
    if (writes.length === 0) return;
    const serialised = await Promise.all(
      writes.map(async ([channel, value], index) => ({
        channel,
        idx: WRITES_IDX_MAP[channel] ?? index,
        value: await this.typed(value),
      })),
    );
    // Sent at once, also while the put of their checkpoint is on its way: the service takes writes
    // for a checkpoint not stored yet (LangGraph sends them so with a DeltaChannel, before it calls
    // that put), and an instance that has that put on its way checks the writer on the thread record
    // the put commits, instead of reading it for the writes.
    await this.threads.putWrites(name, checkpointId, {
      ns,
      taskId,
      taskPath,
      writes: serialised,
      ...(this.runId === undefined ? {} : { runId: this.runId }),
    });
  }

  /** Deletes the thread with all its checkpoints and writes; a thread that is not there is no error. */
  async deleteThread(threadId: string): Promise<void> {
    const name = this.names.nameOf(threadId);
    for (const key of [...this.known.keys()]) if (key.startsWith(`${name}\n`)) this.known.delete(key);
    await this.threads.delete(name);
  }

  /**
   * The writes and starting value of each channel along the parent chain of a checkpoint, for LangGraph's
   * `DeltaChannel` (the contract is `BaseCheckpointSaver.getDeltaChannelHistory`'s; this gives the
   * same answer). The checkpoint is read as `getTuple` reads it, then its namespace's history
   * before it, page by page (100 checkpoints a page, each with its values and pending writes),
   * following the parent links: ids grow along a chain (uuid6), so each ancestor comes in the
   * listing after its child. Requests: 1 + one per 100 checkpoints of the namespace from the
   * checkpoint back to the deepest ancestor needed (abandoned branches in between count), instead of
   * one `getTuple` per ancestor. A parent the listing does not hold where it should (an id not
   * smaller than its child's) is read by id, as the default walk does.
   */
  override async getDeltaChannelHistory(options: {
    config: RunnableConfig;
    channels: string[];
  }): Promise<Record<string, DeltaChannelHistory>> {
    const { config, channels } = options;
    if (channels.length === 0) return {};
    const remaining = new Set(channels);
    // Per channel, newest first: each checkpoint's block of writes is added reversed, then the whole
    // is reversed, so the writes come oldest first and, within a checkpoint, in the service's order.
    const collected = new Map<string, CheckpointPendingWrite[]>(channels.map((channel) => [channel, []]));
    const seeds = new Map<string, unknown>();
    const answer = () => {
      const result: Record<string, DeltaChannelHistory> = {};
      for (const channel of channels) {
        const entry: DeltaChannelHistory = { writes: (collected.get(channel) ?? []).slice().reverse() };
        if (seeds.has(channel)) entry.seed = seeds.get(channel);
        Object.defineProperty(result, channel, { value: entry, enumerable: true });
      }
      return result;
    };
    const configurable = configurableOf(config);
    const threadId = configurable['thread_id'];
    if (threadId === undefined) return answer();
    const name = this.names.nameOf(threadId);
    const ns = namespaceOf(configurable['checkpoint_ns']);
    const checkpointId = getCheckpointId(config);
    if (checkpointId !== '' && !isCheckpointId(checkpointId)) return answer();
    const target = await this.threads.getCheckpoint(name, {
      ns,
      ...(checkpointId === '' ? {} : { checkpointId }),
    });
    if (target === null) return answer();
    const visit = async (stored: StoredCheckpoint) => {
      for (const channel of remaining) {
        const block = stored.pendingWrites.filter((write) => write.channel === channel);
        const into = collected.get(channel) ?? [];
        for (let index = block.length - 1; index >= 0; index -= 1) {
          const write = block[index] as (typeof block)[number];
          into.push([write.taskId, write.channel, await this.serde.loadsTyped(write.type, write.data)]);
        }
      }
      for (const channel of [...remaining]) {
        const value = Object.hasOwn(stored.values, channel) ? stored.values[channel] : undefined;
        if (value === undefined) continue;
        seeds.set(channel, await this.serde.loadsTyped(value.type, value.data));
        remaining.delete(channel);
      }
    };
    let wanted = target.parent;
    if (wanted !== null) {
      for await (const stored of this.threads.history(name, {
        ns,
        before: target.checkpointId,
        pageSize: PAGE_SIZE,
      })) {
        if (stored.checkpointId > wanted) continue;
        if (stored.checkpointId < wanted) break; // the listing passed it: read it by id below
        await visit(stored);
        wanted = stored.parent;
        if (wanted === null || remaining.size === 0) break;
      }
    }
    while (wanted !== null && remaining.size > 0) {
      const stored = await this.threads.getCheckpoint(name, { ns, checkpointId: wanted });
      if (stored === null) break;
      await visit(stored);
      wanted = stored.parent;
    }
    return answer();
  }

  private async sendPut(
    name: string,
    ns: string,
    parent: string | null,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    newVersions: ChannelVersions,
  ): Promise<void> {
    // The values and versions travel apart: only the changed values are sent and stored.
    const { channel_values: channelValues, channel_versions: channelVersions, ...body } = checkpoint;
    const values: Record<string, TypedValue | null> = {};
    await Promise.all(
      Object.keys(channelVersions).map(async (channel) => {
        let value: TypedValue | null;
        if (Object.hasOwn(newVersions, channel)) {
          const current = Object.hasOwn(channelValues, channel) ? channelValues[channel] : undefined;
          value = current === undefined ? null : await this.typed(current);
        } else if (parent === null) {
          // No parent to carry it over from: the channel has no value here.
          value = null;
        } else {
          return;
        }
        Object.defineProperty(values, channel, { value, enumerable: true });
      }),
    );
    const known = this.knownOf(name, ns);
    await this.threads.putCheckpoint(
      name,
      {
        checkpointId: checkpoint.id,
        ns,
        parent,
        v: checkpoint.v,
        checkpoint: await this.typed(body),
        metadata: await this.jsonOf(metadata, 'metadata'),
        channelVersions,
        values,
        ...(this.runId === undefined ? {} : { runId: this.runId }),
      },
      known === undefined ? {} : { known },
    );
    // The values at the stored checkpoint: those sent, and the parent's for the others when the
    // saver knows them all (else only those sent, good as bases for the next put).
    const complete = parent === null || (known?.complete === true && known.checkpointId === parent);
    const after: Record<string, TypedValue> = {};
    for (const channel of Object.keys(channelVersions)) {
      const value = Object.hasOwn(values, channel)
        ? values[channel]
        : complete && known !== undefined && Object.hasOwn(known.values, channel)
          ? known.values[channel]
          : undefined;
      if (value !== undefined && value !== null) {
        Object.defineProperty(after, channel, { value, enumerable: true });
      }
    }
    this.remember(name, ns, { checkpointId: checkpoint.id, values: after, complete });
  }

  private knownOf(name: string, ns: string): Known | undefined {
    const key = `${name}\n${ns}`;
    const known = this.known.get(key);
    if (known !== undefined) {
      this.known.delete(key);
      this.known.set(key, known);
    }
    return known;
  }

  private remember(name: string, ns: string, known: Known): void {
    if (this.knownLimit === 0) return;
    const key = `${name}\n${ns}`;
    this.known.delete(key);
    this.known.set(key, known);
    while (this.known.size > this.knownLimit) {
      const oldest = this.known.keys().next();
      if (oldest.done === true) break;
      this.known.delete(oldest.value);
    }
  }

  /** The thread ids to list and their names: the one asked for, else every one of the scope. */
  private async *threadsOf(threadId: unknown): AsyncGenerator<[string, string]> {
    if (threadId !== undefined) {
      yield [threadId as string, this.names.nameOf(threadId)];
      return;
    }
    for await (const name of this.threads.list(
      this.names.prefix === '' ? {} : { prefix: this.names.prefix },
    )) {
      const id = this.names.threadIdOf(name);
      if (id !== null) yield [id, name];
    }
  }

  /** A thread's checkpoints that may match, newest first (the caller applies the last checks). */
  private async *candidates(
    name: string,
    query: {
      ns: string | undefined;
      onlyId: string | undefined;
      beforeId: string | undefined;
      filter: Record<string, unknown> | undefined;
      remaining: number | undefined;
    },
  ): AsyncGenerator<StoredCheckpoint> {
    const matches = (stored: StoredCheckpoint) =>
      query.filter === undefined ||
      Object.entries(query.filter).every(([key, value]) => isDeepStrictJson(stored.metadata[key], value));
    if (query.onlyId !== undefined && query.ns !== undefined) {
      const stored = await this.threads.getCheckpoint(name, { ns: query.ns, checkpointId: query.onlyId });
      if (stored !== null && matches(stored)) yield stored;
      return;
    }
    const history = this.threads.history(name, {
      ...(query.ns === undefined ? {} : { ns: query.ns }),
      ...(query.beforeId !== undefined && isCheckpointId(query.beforeId) ? { before: query.beforeId } : {}),
      ...(query.filter === undefined ? {} : { filter: query.filter }),
      pageSize: Math.max(1, Math.min(PAGE_SIZE, query.remaining ?? PAGE_SIZE)),
    });
    for await (const stored of history) {
      if (query.onlyId === undefined || stored.checkpointId === query.onlyId) yield stored;
    }
  }

  /**
   * The metadata filter as the service compares it (values encoded as the metadata is), and the
   * keys whose wanted value is `undefined`: those match a checkpoint without the key, as in
   * `MemorySaver`, which the service cannot express, so they are checked here.
   */
  private async filterOf(
    filter: Record<string, unknown> | undefined,
  ): Promise<{ server: Record<string, unknown> | undefined; absent: string[] }> {
    if (filter === undefined) return { server: undefined, absent: [] };
    const absent = Object.keys(filter).filter((key) => filter[key] === undefined);
    const defined = Object.fromEntries(Object.entries(filter).filter(([, value]) => value !== undefined));
    return {
      server: Object.keys(defined).length === 0 ? undefined : await this.jsonOf(defined, 'filter'),
      absent,
    };
  }

  private async tupleOf(
    threadId: string,
    stored: StoredCheckpoint,
    config?: RunnableConfig,
  ): Promise<CheckpointTuple> {
    const channelValues: Record<string, unknown> = {};
    await Promise.all(
      Object.entries(stored.values).map(async ([channel, value]) => {
        const loaded: unknown = await this.serde.loadsTyped(value.type, value.data);
        Object.defineProperty(channelValues, channel, { value: loaded, enumerable: true, writable: true });
      }),
    );
    const channelVersions = { ...stored.channelVersions };
    if (stored.pendingSends !== undefined) {
      // Format below 4: the sends were the parent's writes to TASKS (as MemorySaver migrates them).
      channelValues[TASKS] = await Promise.all(
        stored.pendingSends.map((send) => this.serde.loadsTyped(send.type, send.data) as Promise<unknown>),
      );
      const versions = Object.values(channelVersions);
      channelVersions[TASKS] =
        versions.length > 0 ? maxChannelVersion(...versions) : this.getNextVersion(undefined);
    }
    const body = (await this.serde.loadsTyped(stored.checkpoint.type, stored.checkpoint.data)) as Omit<
      Checkpoint,
      'channel_values' | 'channel_versions'
    >;
    const pendingWrites: CheckpointPendingWrite[] = await Promise.all(
      stored.pendingWrites.map(async (write): Promise<CheckpointPendingWrite> => [
        write.taskId,
        write.channel,
        await this.serde.loadsTyped(write.type, write.data),
      ]),
    );
    const ids = { thread_id: threadId, checkpoint_ns: stored.ns };
    return {
      config: config ?? { configurable: { ...ids, checkpoint_id: stored.checkpointId } },
      checkpoint: { ...body, channel_values: channelValues, channel_versions: channelVersions },
      metadata: (await this.serde.loadsTyped('json', JSON.stringify(stored.metadata))) as CheckpointMetadata,
      ...(stored.parent === null
        ? {}
        : { parentConfig: { configurable: { ...ids, checkpoint_id: stored.parent } } }),
      pendingWrites,
    };
  }

  private async typed(value: unknown): Promise<TypedValue> {
    const [type, data] = await this.serde.dumpsTyped(value);
    return { type, data };
  }

  /**
   * A value as the JSON the serde makes of it (the service stores and filters metadata as JSON; a
   * read gives it back to the serde, so values the serde encodes in JSON, like `undefined` or a
   * `Map`, come back as they were).
   */
  private async jsonOf(value: Record<string, unknown>, what: string): Promise<Record<string, unknown>> {
    const [type, data] = await this.serde.dumpsTyped(value);
    if (type !== 'json') throw new TypeError(`${what} must serialise as JSON; the serde made "${type}"`);
    return JSON.parse(new TextDecoder().decode(data)) as Record<string, unknown>;
  }
}

/** Equality of JSON values by content, as the service compares filters (used for one-id lookups). */
function isDeepStrictJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  const keys = Object.keys(x);
  return (
    keys.length === Object.keys(y).length &&
    keys.every((key) => Object.hasOwn(y, key) && isDeepStrictJson(x[key], y[key]))
  );
}
