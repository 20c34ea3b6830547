import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';

import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import type { SealingCodec } from '../../shared/crypto/encryption';
import { SEAL_OVERHEAD } from '../../shared/crypto/sealedFormat';
import {
  ConflictError,
  InvalidArgumentError,
  NotFoundError,
  PayloadTooLargeError,
  PreconditionFailedError,
  RunFencedError,
  StorageUnavailableError,
  ThreadBusyError,
} from '../../shared/protocol/errors';
import type {
  ItemPage,
  KeyValueStore,
  KeyValueStoreFactory,
  ListOptions,
  ListPage,
  StoredItem,
  StoredValue,
  WriteConditions,
  WriteResult,
} from '../../shared/storage/keyValueStore';
import { FANOUT, MAX_CHUNK } from '../../shared/threads/chunks';
import { keysOf, parseDataKey, THREAD_RECORD_PREFIX, threadKey } from '../../shared/threads/layout';
import {
  decodeCheckpointRecord,
  decodeThreadRecord,
  encodeThreadRecord,
  type TypedBytes,
} from '../../shared/threads/records';
import { SealedThreadSpace } from '../../shared/threads/sealedThreadSpace';
import { type CheckpointPut, ThreadStore, type WritesPut } from '../../shared/threads/threadStore';

/**
 * The thread store's rules, on the real key/value store of each backend. Each test gets fresh,
 * uniquely named storage; `instance()` makes a thread store with its own store factory and its own
 * kept thread records, as another app instance would have.
 */
export interface ThreadStoreFixture {
  readonly name: string;
  create(): Promise<{
    factory: () => KeyValueStoreFactory;
    destroy: () => Promise<void>;
    /** Seals every value at rest (encryption keys configured); its key check has passed. */
    codec?: SealingCodec;
  }>;
}

export const MAX_VALUE_BYTES = 2 * 1024 * 1024;
const A = 'tenant-a';
const B = 'tenant-b';

/** Counts the storage requests a thread store makes (one per store call), by method and key. */
class CountingStore implements KeyValueStore {
  constructor(
    private readonly inner: KeyValueStore,
    private readonly calls: string[],
  ) {}
  read(key: string): Promise<StoredValue | null> {
    this.calls.push(`read ${key}`);
    return this.inner.read(key);
  }
  head(key: string): Promise<StoredItem | null> {
    this.calls.push(`head ${key}`);
    return this.inner.head(key);
  }
  write(key: string, value: Buffer, conditions?: WriteConditions): Promise<WriteResult> {
    this.calls.push(`write ${key}`);
    return this.inner.write(key, value, conditions);
  }
  append(key: string, bytes: Buffer, conditions?: WriteConditions): Promise<WriteResult> {
    this.calls.push(`append ${key}`);
    return this.inner.append(key, bytes, conditions);
  }
  delete(key: string, conditions?: Pick<WriteConditions, 'ifMatch'>): Promise<boolean> {
    this.calls.push(`delete ${key}`);
    return this.inner.delete(key, conditions);
  }
  list(options: ListOptions): Promise<ListPage> {
    this.calls.push(`list ${options.prefix ?? ''} limit ${options.limit ?? ''}`);
    return this.inner.list(options);
  }
  listItems(options: ListOptions): Promise<ItemPage> {
    this.calls.push(`list ${options.prefix ?? ''} limit ${options.limit ?? ''}`);
    return this.inner.listItems(options);
  }
}

const bytes = (text: string): TypedBytes => ({ type: 'json', data: Buffer.from(JSON.stringify(text)) });
/** Text of `length` characters that compression cannot shrink much (base64url of hash output). */
const noise = (seed: string, length: number) =>
  Buffer.concat(
    Array.from({ length: Math.ceil(length / 24) + 1 }, (_, i) =>
      createHash('sha256').update(`${seed}/${i}`).digest(),
    ),
  )
    .toString('base64url')
    .slice(0, length);
const text = (value: TypedBytes | undefined) =>
  value === undefined ? undefined : (JSON.parse(value.data.toString()) as string);

/** A put: `values` lists the changed channels (their versions must be in `versions`). */
function put(
  checkpointId: string,
  options: {
    parent?: string | null;
    ns?: string;
    versions?: Record<string, number | string>;
    values?: Record<string, string | null>;
    metadata?: Record<string, unknown>;
    runId?: string;
    v?: number;
  } = {},
): CheckpointPut {
  const values: Record<string, TypedBytes | null> = {};
  for (const [channel, value] of Object.entries(options.values ?? {})) {
    values[channel] = value === null ? null : bytes(value);
  }
  return {
    checkpointId,
    ns: options.ns ?? '',
    parent: options.parent ?? null,
    ...(options.runId === undefined ? {} : { runId: options.runId }),
    v: options.v ?? 4,
    checkpoint: { type: 'json', data: Buffer.from(JSON.stringify({ id: checkpointId })) },
    metadata: options.metadata ?? {},
    channelVersions: options.versions ?? {},
    values,
  };
}

/** One pending write of `taskId` to channel m of `checkpointId` (its value: the task id). */
function writesOf(checkpointId: string, taskId: string, runId?: string): WritesPut {
  return {
    ns: '',
    checkpointId,
    taskId,
    taskPath: '',
    ...(runId === undefined ? {} : { runId }),
    writes: [{ channel: 'm', idx: 0, value: bytes(taskId) }],
  };
}

/** Ids c01, c02, … c<count>, which sort as they were made. */
const chainIds = (count: number) =>
  Array.from({ length: count }, (_, i) => `c${String(i + 1).padStart(2, '0')}`);

/** Puts `ids` one after another in namespace "", each the child of the one before. */
async function putChain(threads: ThreadStore, tenant: string, ids: readonly string[]): Promise<void> {
  for (const [i, id] of ids.entries()) {
    await threads.putCheckpoint(
      tenant,
      't',
      put(id, { parent: i === 0 ? null : ids[i - 1], versions: { m: i + 1 }, values: { m: `v${i}` } }),
    );
  }
}

/** The checkpoint id of a record key (`d/<thread>/<incarnation>/c/<inverted id>/<ns>`). */
function idOf(key: string): string | undefined {
  const item = parseDataKey(key)?.item;
  return item?.kind === 'record' ? item.checkpointId : undefined;
}

async function allKeys(store: KeyValueStore, prefix = ''): Promise<string[]> {
  const keys: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await store.list({ prefix, limit: 1000, ...(cursor === undefined ? {} : { cursor }) });
    keys.push(...page.keys);
    cursor = page.cursor ?? undefined;
  } while (cursor !== undefined);
  return keys;
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}

export function describeThreadStoreContract(fixture: ThreadStoreFixture): void {
  describe(`thread store contract: ${fixture.name}`, () => {
    let factory: () => KeyValueStoreFactory;
    let destroy: () => Promise<void>;
    let codec: SealingCodec | undefined;
    let threads: ThreadStore;

    /**
     * The clock of every instance: the machine's, moved on by the tests that wait out a lease
     * (`clock.stop`, then `clock.advance`), so that no test sleeps against one.
     */
    const clock = {
      /** Stopped at this time once a test calls `stop`; the machine's clock until then. */
      at: undefined as number | undefined,
      now: (): number => clock.at ?? Date.now(),
      stop: () => (clock.at = Date.now()),
      advance: (ms: number) => (clock.at = clock.now() + ms),
    };
    /**
     * A thread store as another app instance has it; `calls` receives its storage requests. With a
     * codec, values are sealed at rest as the app seals them (same limits, less the overhead).
     */
    const instance = (calls?: string[], maxValueBytes = MAX_VALUE_BYTES) => {
      const stores = factory();
      return new ThreadStore({
        now: clock.now,
        storeOf: (tenant) => {
          const raw = stores.forSpace('threads', tenant);
          const store = calls === undefined ? raw : new CountingStore(raw, calls);
          return codec === undefined ? store : new SealedThreadSpace(store, tenant, codec);
        },
        maxValueBytes: maxValueBytes - (codec === undefined ? 0 : SEAL_OVERHEAD),
        sealed: codec !== undefined,
      });
    };
    /** The tenant's thread space, read directly. */
    const space = (tenant = A) => factory().forSpace('threads', tenant);
    const recordKeys = async (tenant = A) =>
      (await allKeys(space(tenant), 'd/')).filter((key) => key.includes('/c/'));

    beforeEach(async () => {
      ({ factory, destroy, codec } = await fixture.create());
      clock.at = undefined;
      threads = instance();
    });
    afterEach(async () => destroy());

    describe('threads', () => {
      it('creates a thread once, reads it, and lists threads ascending with prefix and paging', async () => {
        const first = await threads.createThread(A, 'beta');
        expect(first.created).toBe(true);
        expect(first.thread).toMatchObject({ threadId: 'beta', heads: {}, run: null, recentRuns: [] });
        const again = await instance().createThread(A, 'beta');
        expect(again).toEqual({ created: false, thread: first.thread });
        expect(await threads.getThread(A, 'beta')).toEqual(first.thread);
        for (const name of ['alpha', 'beta-2', 'gamma', 'b']) await threads.createThread(A, name);

        const names = (page: { threads: { threadId: string }[] }) => page.threads.map((t) => t.threadId);
        expect(names(await threads.listThreads(A, { limit: 100 }))).toEqual([
          'alpha',
          'b',
          'beta',
          'beta-2',
          'gamma',
        ]);
        expect(names(await threads.listThreads(A, { prefix: 'b', limit: 100 }))).toEqual([
          'b',
          'beta',
          'beta-2',
        ]);
        expect(names(await threads.listThreads(A, { after: 'b', limit: 100 }))).toEqual([
          'beta',
          'beta-2',
          'gamma',
        ]);
        const page1 = await threads.listThreads(A, { limit: 2 });
        expect(names(page1)).toEqual(['alpha', 'b']);
        const page2 = await threads.listThreads(A, { cursor: page1.next ?? '', limit: 2 });
        expect(names(page2)).toEqual(['beta', 'beta-2']);
        const page3 = await threads.listThreads(A, { cursor: page2.next ?? '', limit: 2 });
        expect(page3).toEqual({ threads: [{ threadId: 'gamma' }], next: null });
      });

      it('answers not_found for an absent thread on every read and write that needs one', async () => {
        await expect(threads.getThread(A, 'nope')).rejects.toBeInstanceOf(NotFoundError);
        await expect(threads.getCheckpoint(A, 'nope', '')).rejects.toBeInstanceOf(NotFoundError);
        await expect(threads.listCheckpoints(A, 'nope', { limit: 10 })).rejects.toBeInstanceOf(NotFoundError);
        await expect(threads.deleteThread(A, 'nope')).rejects.toBeInstanceOf(NotFoundError);
        await expect(threads.rewind(A, 'nope', { ns: '', checkpointId: 'c1' })).rejects.toBeInstanceOf(
          NotFoundError,
        );
        await expect(threads.getRun(A, 'nope', 'run-1')).rejects.toBeInstanceOf(NotFoundError);
        expect(await allKeys(space())).toEqual([]);
      });

      it("keeps tenants' threads apart: the same name is another thread, and a write never reaches the other", async () => {
        await threads.putCheckpoint(A, 't1', put('c1', { versions: { m: 1 }, values: { m: 'from a' } }));
        await expect(threads.getThread(B, 't1')).rejects.toBeInstanceOf(NotFoundError);
        await expect(threads.getCheckpoint(B, 't1', '', 'c1')).rejects.toBeInstanceOf(NotFoundError);
        expect((await threads.listThreads(B, { limit: 10 })).threads).toEqual([]);
        await threads.putCheckpoint(B, 't1', put('c9', { versions: { m: 1 }, values: { m: 'from b' } }));
        const a = await threads.getCheckpoint(A, 't1', '');
        expect([a.checkpointId, text(a.values['m'])]).toEqual(['c1', 'from a']);
        const b = await threads.getCheckpoint(B, 't1', '');
        expect([b.checkpointId, text(b.values['m'])]).toEqual(['c9', 'from b']);
        // And neither is reachable from the tenants' key/value spaces.
        expect(await allKeys(factory().forTenant(A))).toEqual([]);
      });

      it('deletes a thread with all its data; a thread created again under the name starts empty', async () => {
        await threads.putCheckpoint(A, 't1', put('c1', { versions: { m: 1 }, values: { m: 'a' } }));
        await threads.putWrites(A, 't1', {
          ns: '',
          checkpointId: 'c1',
          taskId: 'task',
          taskPath: '',
          writes: [{ channel: 'm', idx: 0, value: bytes('w') }],
        });
        await threads.putCheckpoint(
          A,
          't1',
          put('s1', { ns: 'sub', versions: { x: 1 }, values: { x: 'b' } }),
        );
        await threads.createThread(A, 't2');
        const { run } = await threads.startRun(A, 't1', {
          onBusy: 'reject',
          busyTimeoutMs: 0,
          leaseMs: 60_000,
        });
        await expect(threads.deleteThread(A, 't1')).rejects.toBeInstanceOf(ThreadBusyError);
        expect((await threads.getCheckpoint(A, 't1', '')).checkpointId).toBe('c1');
        await threads.finishRun(A, 't1', run.runId, 'finished');

        await instance().deleteThread(A, 't1');
        expect(await allKeys(space())).toEqual(['t/t2']);
        await expect(threads.getThread(A, 't1')).rejects.toBeInstanceOf(NotFoundError);
        await expect(threads.getCheckpoint(A, 't1', '')).rejects.toBeInstanceOf(NotFoundError);

        await threads.createThread(A, 't1');
        await expect(threads.getCheckpoint(A, 't1', '')).rejects.toBeInstanceOf(NotFoundError);
        await expect(threads.getCheckpoint(A, 't1', '', 'c1')).rejects.toBeInstanceOf(NotFoundError);
        expect(await threads.listCheckpoints(A, 't1', { limit: 10 })).toEqual({
          checkpoints: [],
          next: null,
        });
        expect((await threads.getThread(A, 't1')).recentRuns).toEqual([]);
      });
    });

    describe('checkpoints', () => {
      it('a put refused at its commit leaves values that a later put of the same id never reads', async () => {
        const reject = { onBusy: 'reject', busyTimeoutMs: 0, leaseMs: 60_000 } as const;
        await threads.putCheckpoint(A, 't', put('c1', { versions: { a: 1 }, values: { a: 'first' } }));
        const first = await threads.startRun(A, 't', reject);
        // Another instance interrupts the run; this instance still holds the record where it runs.
        const second = await instance().startRun(A, 't', { ...reject, onBusy: 'interrupt' });
        const fenced = await rejection(
          threads.putCheckpoint(
            A,
            't',
            put('c2', { parent: 'c1', versions: { a: 2 }, values: { a: 'fenced' }, runId: first.run.runId }),
          ),
        );
        expect(fenced).toBeInstanceOf(RunFencedError);
        // The same checkpoint id with other content, by the live run: its own value.
        await threads.putCheckpoint(
          A,
          't',
          put('c2', { parent: 'c1', versions: { a: 2 }, values: { a: 'kept' }, runId: second.run.runId }),
        );
        expect(text((await instance().getCheckpoint(A, 't', '', 'c2')).values['a'])).toBe('kept');
      });

      it('refuses an oversize checkpoint record before writing a value, and a reused id then keeps its own values', async () => {
        // A store whose values may be 4 KiB: metadata of 8 KiB (within its own limit, and not
        // compressible to 4 KiB) makes the checkpoint record too large.
        const small = instance(undefined, 4096);
        await small.putCheckpoint(A, 't', put('c1', { versions: { a: 1 }, values: { a: 'first' } }));
        const huge = { note: noise('huge', 8192) };
        const refused = await rejection(
          small.putCheckpoint(
            A,
            't',
            put('c2', { parent: 'c1', versions: { a: 2 }, values: { a: 'refused' }, metadata: huge }),
          ),
        );
        expect(refused).toBeInstanceOf(PayloadTooLargeError);
        // Nothing of the refused put: c1's record alone, holding its value.
        expect((await allKeys(space(), 'd/')).filter((key) => key.includes('/v/'))).toEqual([]);
        expect((await recordKeys()).map(idOf)).toEqual(['c1']);
        // The same checkpoint id, other content: its own value, never bytes an earlier attempt left.
        await threads.putCheckpoint(
          A,
          't',
          put('c2', { parent: 'c1', versions: { a: 2 }, values: { a: 'kept' } }),
        );
        expect(text((await instance().getCheckpoint(A, 't', '', 'c2')).values['a'])).toBe('kept');
      });

      it('stores only the changed channels and reads the unchanged ones from the checkpoint that stored them', async () => {
        await threads.putCheckpoint(
          A,
          't',
          put('c1', {
            versions: { a: 1, b: 1, c: 1, empty: 1 },
            values: { a: 'a1', b: 'b1', c: 'c1', empty: null },
          }),
        );
        await threads.putCheckpoint(
          A,
          't',
          put('c2', { parent: 'c1', versions: { a: 2, b: 1, c: 1, empty: 1 }, values: { a: 'a2' } }),
        );
        await threads.putCheckpoint(
          A,
          't',
          put('c3', { parent: 'c2', versions: { a: 2, b: 2, c: 1, empty: 1 }, values: { b: 'b2' } }),
        );
        // Each changed channel's value once, inline in the record of the checkpoint that changed it.
        expect((await allKeys(space(), 'd/')).filter((key) => key.includes('/v/'))).toEqual([]);
        const opened = codec === undefined ? space() : new SealedThreadSpace(space(), A, codec);
        const inline: Record<string, string[]> = {};
        for (const key of await recordKeys()) {
          const record = decodeCheckpointRecord((await opened.read(key))!.value, key);
          inline[record.id] = Object.keys(record.inline ?? {}).sort();
        }
        expect(inline).toEqual({ c1: ['a', 'b', 'c'], c2: ['a'], c3: ['b'] });

        const latest = await instance().getCheckpoint(A, 't', '');
        expect(latest).toMatchObject({ checkpointId: 'c3', parent: 'c2', ns: '', v: 4, metadata: {} });
        expect(Object.fromEntries(Object.entries(latest.values).map(([k, v]) => [k, text(v)]))).toEqual({
          a: 'a2',
          b: 'b2',
          c: 'c1',
        });
        expect(latest.channelVersions).toEqual({ a: 2, b: 2, c: 1, empty: 1 });
        expect(JSON.parse(latest.checkpoint.data.toString())).toEqual({ id: 'c3' });
        const first = await threads.getCheckpoint(A, 't', '', 'c1');
        expect(Object.keys(first.values).sort()).toEqual(['a', 'b', 'c']);
        expect(text(first.values['a'])).toBe('a1');
      });

      it('refuses, before any I/O and naming the field, a changed channel without its value and other bad puts', async () => {
        const calls: string[] = [];
        const counted = instance(calls);
        await counted.putCheckpoint(A, 't', put('c1', { versions: { m: 1 }, values: { m: 'x' } }));
        calls.length = 0;
        const refusals: [CheckpointPut, RegExp][] = [
          [put('c2', { parent: 'c1', versions: { m: 2 } }), /^values\.m:/],
          [put('c2', { versions: { m: 1 }, values: { other: 'x' } }), /^values\.other:/],
          [put('c2', { metadata: { big: 'x'.repeat(16 * 1024) } }), /^metadata:/],
          [put('latest'), /^checkpointId:/],
          [put('c2', { ns: 'bad\u0000ns' }), /^ns:/],
          [put('c2', { parent: '..' }), /^parent:/],
          [put('c2', { versions: { m: Number.NaN } }), /^channelVersions\.m:/],
          [{ ...put('c2'), checkpoint: { type: 'has space', data: Buffer.alloc(1) } }, /^checkpoint\.type:/],
        ];
        for (const [bad, field] of refusals) {
          const error = await rejection(counted.putCheckpoint(A, 't', bad));
          expect(error, String(field)).toBeInstanceOf(InvalidArgumentError);
          expect((error as Error).message).toMatch(field);
        }
        // The changed-channel rule needs the parent, which is the head here: still no I/O.
        expect(calls).toEqual([]);
        await expect(counted.putCheckpoint(A, 'bad id', put('c2'))).rejects.toThrow(/^threadId:/);
        expect(calls).toEqual([]);
      });

      it('treats a put of a stored checkpoint as a retry, refuses other content under its id, and needs a stored parent', async () => {
        const c1 = put('c1', { versions: { m: 1 }, values: { m: 'x' }, metadata: { step: 1 } });
        expect((await threads.putCheckpoint(A, 't', c1)).created).toBe(true);
        expect(await instance().putCheckpoint(A, 't', c1)).toEqual({
          created: false,
          threadId: 't',
          ns: '',
          checkpointId: 'c1',
          head: 'c1',
        });
        const other = await rejection(threads.putCheckpoint(A, 't', { ...c1, metadata: { step: 2 } }));
        expect(other).toBeInstanceOf(ConflictError);
        expect((await threads.getCheckpoint(A, 't', '', 'c1')).metadata).toEqual({ step: 1 });
        const orphan = await rejection(
          threads.putCheckpoint(A, 't', put('c2', { parent: 'c0', versions: { m: 1 }, values: { m: 'y' } })),
        );
        expect(orphan).toBeInstanceOf(ConflictError);
        expect((orphan as Error).message).toMatch(/^parent:/);
        expect(await recordKeys()).toHaveLength(1);
      });

      it('keeps a value once stored (a retry keeps the first), yet a fork reusing a version number keeps its own value', async () => {
        await threads.putCheckpoint(A, 't', put('c1', { versions: { m: 1 }, values: { m: 'a' } }));
        await threads.putCheckpoint(
          A,
          't',
          put('c2', { parent: 'c1', versions: { m: 2 }, values: { m: 'b' } }),
        );
        // LangGraph's time travel: a new checkpoint after c1, whose channel gets version 2 again.
        await threads.putCheckpoint(
          A,
          't',
          put('c3', { parent: 'c1', versions: { m: 2 }, values: { m: 'c' } }),
        );
        expect(text((await threads.getCheckpoint(A, 't', '')).values['m'])).toBe('c');
        expect(text((await threads.getCheckpoint(A, 't', '', 'c2')).values['m'])).toBe('b');
        // A retry of c3 with the same content is answered as stored and adds no value.
        const valueKeys = async () => (await allKeys(space(), 'd/')).filter((key) => key.includes('/v/'));
        const before = await valueKeys();
        const same = put('c3', { parent: 'c1', versions: { m: 2 }, values: { m: 'c' } });
        expect((await instance().putCheckpoint(A, 't', same)).created).toBe(false);
        expect(await valueKeys()).toEqual(before);
        expect(text((await threads.getCheckpoint(A, 't', '', 'c3')).values['m'])).toBe('c');
      });

      it('refuses a put of a stored checkpoint id whose values differ (bytes, type tag or null) and leaves no value of it', async () => {
        await threads.putCheckpoint(
          A,
          't',
          put('c1', { versions: { m: 1, n: 1 }, values: { m: 'a', n: 'x' } }),
        );
        const c2 = put('c2', { parent: 'c1', versions: { m: 2, n: 2 }, values: { m: 'b', n: 'y' } });
        await threads.putCheckpoint(A, 't', c2);
        const valueKeys = async () => (await allKeys(space(), 'd/')).filter((key) => key.includes('/v/'));
        const before = await valueKeys();
        const others: CheckpointPut[] = [
          put('c2', { parent: 'c1', versions: { m: 2, n: 2 }, values: { m: 'other', n: 'y' } }),
          {
            ...c2,
            values: { ...c2.values, m: { type: 'msgpack', data: (c2.values['m'] as TypedBytes).data } },
          },
          put('c2', { parent: 'c1', versions: { m: 2, n: 2 }, values: { m: 'b', n: null } }),
        ];
        for (const other of others) {
          const error = await rejection(instance().putCheckpoint(A, 't', other));
          expect(error).toBeInstanceOf(ConflictError);
          expect((error as Error).message).toMatch(/^checkpointId:/);
        }
        expect(await valueKeys()).toEqual(before);
        const stored = await instance().getCheckpoint(A, 't', '', 'c2');
        expect(text(stored.values['m'])).toBe('b');
        expect(stored.values['m']?.type).toBe('json');
        expect(text(stored.values['n'])).toBe('y');
        expect(await instance().putCheckpoint(A, 't', c2)).toMatchObject({ created: false, head: 'c2' });
      });

      it('merges pending writes by (task, index): regular first wins, special replaces; ordered by (path, task, index)', async () => {
        await threads.putCheckpoint(A, 't', put('c1', { versions: { m: 1 }, values: { m: 'x' } }));
        const write = (taskId: string, taskPath: string, writes: [string, number, string][]) =>
          threads.putWrites(A, 't', {
            ns: '',
            checkpointId: 'c1',
            taskId,
            taskPath,
            writes: writes.map(([channel, idx, value]) => ({ channel, idx, value: bytes(value) })),
          });
        await write('t2', '~b', [
          ['m', 0, 'first'],
          ['__interrupt__', -3, 'question'],
        ]);
        await write('t2', '~b', [
          ['m', 0, 'retried'],
          ['m', 1, 'more'],
        ]);
        await write('t2', '~b', [['__interrupt__', -3, 'question 2']]);
        await write('t1', '~b', [['m', 0, 't1']]);
        await write('t9', '~a', [['m', 0, 't9']]);
        const { pendingWrites } = await instance().getCheckpoint(A, 't', '');
        expect(pendingWrites.map((w) => [w.taskPath, w.taskId, w.idx, w.channel, text(w)])).toEqual([
          ['~a', 't9', 0, 'm', 't9'],
          ['~b', 't1', 0, 'm', 't1'],
          ['~b', 't2', -3, '__interrupt__', 'question 2'],
          ['~b', 't2', 0, 'm', 'first'],
          ['~b', 't2', 1, 'm', 'more'],
        ]);
      });

      it('loses no write among 16 parallel putWrites from four instances', async () => {
        await threads.putCheckpoint(A, 't', put('c1', { versions: { m: 1 }, values: { m: 'x' } }));
        const instances = [instance(), instance(), instance(), instance()];
        await Promise.all(
          Array.from({ length: 16 }, (_, task) =>
            instances[task % 4]!.putWrites(A, 't', {
              ns: '',
              checkpointId: 'c1',
              taskId: `task-${String(task).padStart(2, '0')}`,
              taskPath: '',
              writes: [
                { channel: 'm', idx: 0, value: bytes(`${task}.0`) },
                { channel: 'n', idx: 1, value: bytes(`${task}.1`) },
              ],
            }),
          ),
        );
        const { pendingWrites } = await threads.getCheckpoint(A, 't', '');
        expect(pendingWrites.map((w) => text(w))).toEqual(
          Array.from({ length: 16 }, (_, task) => [`${task}.0`, `${task}.1`]).flat(),
        );
      });

      it('takes writes before their checkpoint is stored, seen only through it once it is', async () => {
        await threads.putCheckpoint(A, 't', put('c1', { versions: { m: 1 }, values: { m: 'x' } }));
        const early = (taskId: string, value: string) =>
          threads.putWrites(A, 't', {
            ns: '',
            checkpointId: 'c2',
            taskId,
            taskPath: '',
            writes: [{ channel: 'm', idx: 0, value: bytes(value) }],
          });
        // As LangGraph sends them with a DeltaChannel: the step's writes, then the put.
        await early('task-b', 'b');
        await early('task-a', 'a');
        await early('task-a', 'a again'); // a retry of (task, index): kept as first stored
        await expect(threads.getCheckpoint(A, 't', '', 'c2')).rejects.toBeInstanceOf(NotFoundError);
        expect((await threads.getCheckpoint(A, 't', '')).pendingWrites).toEqual([]);
        const page = await threads.listCheckpoints(A, 't', { limit: 10 });
        expect(page.checkpoints.map((c) => [c.checkpointId, c.pendingWrites.length])).toEqual([['c1', 0]]);
        await threads.putCheckpoint(A, 't', put('c2', { parent: 'c1', versions: { m: 1 } }));
        const c2 = await threads.getCheckpoint(A, 't', '');
        expect(c2.checkpointId).toBe('c2');
        expect(c2.pendingWrites.map((w) => [w.taskId, text(w)])).toEqual([
          ['task-a', 'a'],
          ['task-b', 'b'],
        ]);
      });

      it('creates a new thread with its first writes, racing its first put from another instance, and loses none', async () => {
        const writes = (taskId: string) =>
          instance().putWrites(A, 'fresh', {
            ns: '',
            checkpointId: 'c1',
            taskId,
            taskPath: '',
            writes: [{ channel: 'm', idx: 0, value: bytes(taskId) }],
          });
        await Promise.all([
          writes('task-1'),
          instance().putCheckpoint(A, 'fresh', put('c1', { versions: { m: 1 }, values: { m: 'x' } })),
          writes('task-2'),
        ]);
        const c1 = await threads.getCheckpoint(A, 'fresh', '');
        expect(c1.checkpointId).toBe('c1');
        expect(c1.pendingWrites.map((w) => text(w))).toEqual(['task-1', 'task-2']);
        expect((await threads.listCheckpoints(A, 'fresh', { limit: 10 })).checkpoints).toHaveLength(1);
      });

      it('takes no early writes from a writer that may not write', async () => {
        await threads.putCheckpoint(A, 't', put('c1', { versions: { m: 1 }, values: { m: 'x' } }));
        await threads.startRun(A, 't', { onBusy: 'reject', busyTimeoutMs: 0, leaseMs: 60_000 });
        await expect(
          threads.putWrites(A, 't', {
            ns: '',
            checkpointId: 'c2',
            taskId: 'task',
            taskPath: '',
            writes: [{ channel: 'm', idx: 0, value: bytes('w') }],
          }),
        ).rejects.toBeInstanceOf(ThreadBusyError);
        await expect(
          threads.putWrites(A, 't', {
            ns: '',
            checkpointId: 'c2',
            taskId: 'task',
            taskPath: '',
            runId: 'run-other',
            writes: [{ channel: 'm', idx: 0, value: bytes('w') }],
          }),
        ).rejects.toBeInstanceOf(RunFencedError);
        expect((await allKeys(space(), 'd/')).filter((key) => key.includes('/w/'))).toEqual([]);
      });

      it("adds the parent's pending sends to a checkpoint of format below 4, not to others", async () => {
        await threads.putCheckpoint(A, 't', put('c1', { versions: { m: 1 }, values: { m: 'x' } }));
        await threads.putWrites(A, 't', {
          ns: '',
          checkpointId: 'c1',
          taskId: 'task',
          taskPath: '',
          writes: [
            { channel: '__pregel_tasks', idx: 0, value: bytes('send a') },
            { channel: 'm', idx: 1, value: bytes('not a send') },
            { channel: '__pregel_tasks', idx: 2, value: bytes('send b') },
          ],
        });
        await threads.putCheckpoint(A, 't', put('c2', { parent: 'c1', v: 3, versions: { m: 1 } }));
        const old = await threads.getCheckpoint(A, 't', '');
        expect(old.pendingSends?.map(text)).toEqual(['send a', 'send b']);
        expect((await threads.getCheckpoint(A, 't', '', 'c1')).pendingSends).toBeUndefined();
      });
    });

    describe('history', () => {
      beforeEach(async () => {
        const root = (id: string, parent: string | null, source: string) =>
          put(id, {
            parent,
            versions: { m: Number(id) },
            values: { m: `m${id}` },
            metadata: { source, step: Number(id), tag: { id } },
          });
        await threads.putCheckpoint(A, 't', root('01', null, 'input'));
        await threads.putCheckpoint(A, 't', root('02', '01', 'loop'));
        await threads.putCheckpoint(
          A,
          't',
          put('03', { ns: 'sub:1', versions: { s: 1 }, values: { s: 's1' }, metadata: { source: 'input' } }),
        );
        await threads.putCheckpoint(A, 't', root('04', '02', 'loop'));
        await threads.putCheckpoint(
          A,
          't',
          put('05', {
            ns: 'sub:1',
            parent: '03',
            versions: { s: 2 },
            values: { s: 's2' },
            metadata: { source: 'loop' },
          }),
        );
      });
      const ids = (page: { checkpoints: { checkpointId: string }[] }) =>
        page.checkpoints.map((c) => c.checkpointId);

      it('lists newest first across namespaces, or within one', async () => {
        const all = await threads.listCheckpoints(A, 't', { limit: 10 });
        expect(ids(all)).toEqual(['05', '04', '03', '02', '01']);
        expect(all.next).toBeNull();
        expect(all.checkpoints.map((c) => c.ns)).toEqual(['sub:1', '', 'sub:1', '', '']);
        expect(text(all.checkpoints[1]?.values['m'])).toBe('m04');
        expect(ids(await threads.listCheckpoints(A, 't', { ns: '', limit: 10 }))).toEqual(['04', '02', '01']);
        expect(ids(await threads.listCheckpoints(A, 't', { ns: 'sub:1', limit: 10 }))).toEqual(['05', '03']);
        expect(ids(await threads.listCheckpoints(A, 't', { ns: 'none', limit: 10 }))).toEqual([]);
      });

      it('applies before, limit, paging and an equality filter on top-level metadata keys', async () => {
        expect(ids(await threads.listCheckpoints(A, 't', { before: '04', limit: 10 }))).toEqual([
          '03',
          '02',
          '01',
        ]);
        expect(ids(await threads.listCheckpoints(A, 't', { before: '04', ns: '', limit: 10 }))).toEqual([
          '02',
          '01',
        ]);
        const pages: string[][] = [];
        let cursor: string | undefined;
        do {
          const page = await instance().listCheckpoints(A, 't', {
            limit: 2,
            ...(cursor === undefined ? {} : { cursor }),
          });
          pages.push(ids(page));
          cursor = page.next ?? undefined;
        } while (cursor !== undefined);
        expect(pages).toEqual([['05', '04'], ['03', '02'], ['01']]);
        const loop = await threads.listCheckpoints(A, 't', { filter: { source: 'loop' }, limit: 10 });
        expect(ids(loop)).toEqual(['05', '04', '02']);
        expect(
          ids(await threads.listCheckpoints(A, 't', { filter: { source: 'loop', step: 2 }, limit: 10 })),
        ).toEqual(['02']);
        expect(
          ids(await threads.listCheckpoints(A, 't', { filter: { tag: { id: '04' } }, limit: 10 })),
        ).toEqual(['04']);
        expect(ids(await threads.listCheckpoints(A, 't', { filter: { missing: null }, limit: 10 }))).toEqual(
          [],
        );
        await expect(threads.listCheckpoints(A, 't', { cursor: 'not-a-cursor', limit: 1 })).rejects.toThrow(
          /^cursor:/,
        );
      });
    });

    describe('rewind', () => {
      it('moves the head back; the next put follows it; the abandoned branch stays readable', async () => {
        await threads.putCheckpoint(A, 't', put('c1', { versions: { m: 1 }, values: { m: 'one' } }));
        await threads.putCheckpoint(
          A,
          't',
          put('c2', { parent: 'c1', versions: { m: 2 }, values: { m: 'two' } }),
        );
        await threads.putCheckpoint(
          A,
          't',
          put('c3', { parent: 'c2', versions: { m: 3 }, values: { m: 'three' } }),
        );
        const view = await instance().rewind(A, 't', { ns: '', checkpointId: 'c1' });
        expect(view.heads['']?.checkpointId).toBe('c1');
        const head = await threads.getCheckpoint(A, 't', '');
        expect([head.checkpointId, text(head.values['m'])]).toEqual(['c1', 'one']);

        await threads.putCheckpoint(
          A,
          't',
          put('c4', { parent: 'c1', versions: { m: 2 }, values: { m: 'two, again' } }),
        );
        const latest = await threads.getCheckpoint(A, 't', '');
        expect([latest.checkpointId, latest.parent, text(latest.values['m'])]).toEqual([
          'c4',
          'c1',
          'two, again',
        ]);
        const abandoned = await threads.getCheckpoint(A, 't', '', 'c3');
        expect([abandoned.parent, text(abandoned.values['m'])]).toEqual(['c2', 'three']);
        expect(
          (await threads.listCheckpoints(A, 't', { limit: 10 })).checkpoints.map((c) => c.checkpointId),
        ).toEqual(['c4', 'c3', 'c2', 'c1']);
        await expect(threads.rewind(A, 't', { ns: '', checkpointId: 'c9' })).rejects.toBeInstanceOf(
          NotFoundError,
        );
        await expect(threads.rewind(A, 't', { ns: 'sub', checkpointId: 'c1' })).rejects.toBeInstanceOf(
          NotFoundError,
        );
      });
    });

    describe('runs', () => {
      const reject = { onBusy: 'reject', busyTimeoutMs: 0, leaseMs: 60_000 } as const;

      it('lets exactly one of 16 concurrent reject starters on 16 instances run', async () => {
        const outcomes = await Promise.allSettled(
          Array.from({ length: 16 }, () => instance().startRun(A, 'race', reject)),
        );
        const started = outcomes.filter((outcome) => outcome.status === 'fulfilled');
        expect(started).toHaveLength(1);
        for (const outcome of outcomes) {
          if (outcome.status === 'rejected') expect(outcome.reason).toBeInstanceOf(ThreadBusyError);
        }
        const thread = await threads.getThread(A, 'race');
        expect(thread.run?.runId).toBe(started[0]?.value.run.runId);
        expect(thread.run?.fencingToken).toBe(1);
      });

      it('makes a wait starter run once the holder finishes, with the next fencing token', async () => {
        const holder = await threads.startRun(A, 't', reject);
        const waiting = instance().startRun(A, 't', {
          onBusy: 'wait',
          busyTimeoutMs: 30_000,
          leaseMs: 60_000,
        });
        await sleep(300);
        await threads.finishRun(A, 't', holder.run.runId, 'finished');
        const waited = await waiting;
        expect(waited.run).toMatchObject({ status: 'running', fencingToken: holder.run.fencingToken + 1 });
        expect(await threads.getRun(A, 't', holder.run.runId)).toMatchObject({ status: 'finished' });
      });

      it('answers thread_busy with the holder and when its lease ends once a wait times out', async () => {
        const holder = await threads.startRun(A, 't', reject);
        const error = await rejection(
          instance().startRun(A, 't', { onBusy: 'wait', busyTimeoutMs: 500, leaseMs: 60_000 }),
        );
        expect(error).toBeInstanceOf(ThreadBusyError);
        expect((error as ThreadBusyError).holder).toBe(holder.run.runId);
        expect((error as ThreadBusyError).retryAfterSeconds).toBeGreaterThanOrEqual(55);
        expect((await threads.getThread(A, 't')).run?.runId).toBe(holder.run.runId);
      });

      it('interrupts the holder: its checkpoints stay, its writes are fenced, the new run goes on', async () => {
        const first = await threads.startRun(A, 't', reject);
        await threads.putCheckpoint(
          A,
          't',
          put('c1', { runId: first.run.runId, versions: { m: 1 }, values: { m: 'a' } }),
        );
        const second = await instance().startRun(A, 't', { ...reject, onBusy: 'interrupt' });
        expect(second.interrupted).toBe(first.run.runId);
        expect(second.run.fencingToken).toBe(first.run.fencingToken + 1);
        expect(await threads.getRun(A, 't', first.run.runId)).toMatchObject({ status: 'interrupted' });
        const fenced = await rejection(
          threads.putCheckpoint(
            A,
            't',
            put('c2', { parent: 'c1', runId: first.run.runId, versions: { m: 2 }, values: { m: 'b' } }),
          ),
        );
        expect(fenced).toBeInstanceOf(RunFencedError);
        expect((fenced as RunFencedError).status).toBe('interrupted');
        await threads.putCheckpoint(
          A,
          't',
          put('c2', { parent: 'c1', runId: second.run.runId, versions: { m: 2 }, values: { m: 'c' } }),
        );
        const latest = await threads.getCheckpoint(A, 't', '');
        expect([latest.checkpointId, latest.runId, text(latest.values['m'])]).toEqual([
          'c2',
          second.run.runId,
          'c',
        ]);
      });

      it("refuses a fenced run's put and putWrites, storing nothing visible, also when its instance still believes it holds the thread", async () => {
        const holderInstance = instance();
        const first = await holderInstance.startRun(A, 't', reject);
        await holderInstance.putCheckpoint(
          A,
          't',
          put('c1', { runId: first.run.runId, versions: { m: 1 }, values: { m: 'a' } }),
        );
        await instance().startRun(A, 't', { ...reject, onBusy: 'interrupt' });

        // holderInstance's kept thread record still shows its run: the put reaches the commit and is refused there.
        const error = await rejection(
          holderInstance.putCheckpoint(
            A,
            't',
            put('c2', { parent: 'c1', runId: first.run.runId, versions: { m: 2 }, values: { m: 'b' } }),
          ),
        );
        expect(error).toBeInstanceOf(RunFencedError);
        expect(await recordKeys()).toHaveLength(1);
        await expect(threads.getCheckpoint(A, 't', '', 'c2')).rejects.toBeInstanceOf(NotFoundError);
        expect((await threads.getCheckpoint(A, 't', '')).checkpointId).toBe('c1');

        const writes = await rejection(
          holderInstance.putWrites(A, 't', {
            ns: '',
            checkpointId: 'c1',
            taskId: 'task',
            taskPath: '',
            runId: first.run.runId,
            writes: [{ channel: 'm', idx: 0, value: bytes('late') }],
          }),
        );
        expect(writes).toBeInstanceOf(RunFencedError);
        expect((await threads.getCheckpoint(A, 't', '')).pendingWrites).toEqual([]);
        await expect(
          holderInstance.rewind(A, 't', { ns: '', checkpointId: 'c1', runId: first.run.runId }),
        ).rejects.toBeInstanceOf(RunFencedError);
      });

      it('refuses writes without the run id while a live run holds the thread (one writer per thread)', async () => {
        await threads.putCheckpoint(A, 't', put('c1', { versions: { m: 1 }, values: { m: 'a' } }));
        const { run } = await threads.startRun(A, 't', reject);
        await expect(
          threads.putCheckpoint(A, 't', put('c2', { parent: 'c1', versions: { m: 1 } })),
        ).rejects.toBeInstanceOf(ThreadBusyError);
        await expect(
          threads.putWrites(A, 't', {
            ns: '',
            checkpointId: 'c1',
            taskId: 'task',
            taskPath: '',
            writes: [{ channel: 'm', idx: 0, value: bytes('w') }],
          }),
        ).rejects.toBeInstanceOf(ThreadBusyError);
        await expect(threads.rewind(A, 't', { ns: '', checkpointId: 'c1' })).rejects.toBeInstanceOf(
          ThreadBusyError,
        );
        expect(await recordKeys()).toHaveLength(1);
        await threads.rewind(A, 't', { ns: '', checkpointId: 'c1', runId: run.runId });
      });

      it('frees the thread when a lease expires: the next starter runs, the expired run is fenced', async () => {
        clock.stop();
        const first = await threads.startRun(A, 't', { ...reject, leaseMs: 1000 });
        clock.advance(999);
        expect((await threads.getRun(A, 't', first.run.runId)).status).toBe('running');
        await expect(instance().startRun(A, 't', reject)).rejects.toBeInstanceOf(ThreadBusyError);
        clock.advance(2);
        expect((await threads.getRun(A, 't', first.run.runId)).status).toBe('expired');
        const second = await instance().startRun(A, 't', reject);
        expect(second.interrupted).toBeNull();
        expect(await threads.getRun(A, 't', first.run.runId)).toMatchObject({
          status: 'expired',
          endedAt: first.run.leaseExpiresAt,
        });
        const heartbeat = await rejection(threads.heartbeat(A, 't', first.run.runId));
        expect(heartbeat).toBeInstanceOf(RunFencedError);
        expect((heartbeat as RunFencedError).status).toBe('expired');
        await expect(
          threads.putCheckpoint(
            A,
            't',
            put('c1', { runId: first.run.runId, versions: { m: 1 }, values: { m: 'a' } }),
          ),
        ).rejects.toBeInstanceOf(RunFencedError);
        expect(await recordKeys()).toEqual([]);
      });

      it('renews a lease by heartbeat, finishes idempotently, and fences every other ending', async () => {
        const { run } = await threads.startRun(A, 't', { ...reject, leaseMs: 5000 });
        const renewed = await instance().heartbeat(A, 't', run.runId, 120_000);
        expect(Date.parse(renewed.leaseExpiresAt ?? '')).toBeGreaterThan(
          Date.parse(run.leaseExpiresAt ?? '') + 60_000,
        );
        const finished = await threads.finishRun(A, 't', run.runId, 'failed');
        expect(finished).toMatchObject({ runId: run.runId, status: 'failed' });
        expect(await instance().finishRun(A, 't', run.runId, 'failed')).toEqual(finished);
        await expect(threads.finishRun(A, 't', run.runId, 'finished')).rejects.toBeInstanceOf(RunFencedError);
        await expect(threads.heartbeat(A, 't', run.runId)).rejects.toBeInstanceOf(RunFencedError);
        await expect(threads.heartbeat(A, 't', 'run-unknown')).rejects.toBeInstanceOf(NotFoundError);
        await expect(threads.getRun(A, 't', 'run-unknown')).rejects.toBeInstanceOf(NotFoundError);
        expect((await threads.getThread(A, 't')).recentRuns).toEqual([finished]);
        // Free again: a writer without a run may write.
        await threads.putCheckpoint(A, 't', put('c1', { versions: { m: 1 }, values: { m: 'a' } }));
      });
    });

    describe('namespaces', () => {
      it('keeps the heads of the recent namespaces inline and still finds the latest of the others', async () => {
        await threads.putCheckpoint(A, 't', put('c000', { versions: { m: 1 }, values: { m: 'root' } }));
        for (let i = 1; i <= 40; i++) {
          const id = `c${String(i).padStart(3, '0')}`;
          await threads.putCheckpoint(
            A,
            't',
            put(id, { ns: `sub:${i}`, versions: { m: 1 }, values: { m: `sub ${i}` } }),
          );
        }
        const heads = Object.keys((await threads.getThread(A, 't')).heads);
        expect(heads.length).toBeLessThanOrEqual(32);
        expect(heads).toContain('');
        expect(heads).not.toContain('sub:1');
        const evicted = await instance().getCheckpoint(A, 't', 'sub:1');
        expect([evicted.checkpointId, text(evicted.values['m'])]).toEqual(['c001', 'sub 1']);
        const calls: string[] = [];
        await expect(instance(calls).getCheckpoint(A, 't', 'never')).rejects.toBeInstanceOf(NotFoundError);
        expect(calls).toHaveLength(2);
        // The root's latest is still inline after 40 newer namespaces.
        expect((await threads.getCheckpoint(A, 't', '')).checkpointId).toBe('c000');
      });
    });

    describe('what retention relies on', () => {
      it('a put that finds its value stored already writes it again (a new version), so a collector that listed the old one cannot delete it', async () => {
        // A value stored apart: too big to go inline (beside metadata of 3,000 bytes, neither of
        // them compressible to half) in a store whose values are at most 4 KiB.
        const x = noise('x', 3000);
        const metadata = { pad: noise('pad', 3000) };
        const small = () => instance(undefined, 4096);
        await small().putCheckpoint(A, 't', put('c1', { versions: { a: 1 }, values: { a: x }, metadata }));
        const listed = async () =>
          (await space().listItems({ prefix: 'd/', limit: 100 })).items.filter((item) =>
            item.key.includes('/v/'),
          );
        const [before] = await listed();
        expect(before).toBeDefined();
        // A retry of the same put (another instance, as after a lost answer).
        expect(
          (await small().putCheckpoint(A, 't', put('c1', { versions: { a: 1 }, values: { a: x }, metadata })))
            .created,
        ).toBe(false);
        const afterRetry = await listed();
        if (codec !== undefined) {
          // Sealed values are named by random bytes: a put never finds a value stored already, so
          // the record's value is the one first listed, untouched, and whatever else the retry
          // wrote is garbage a collector may delete.
          expect(afterRetry.find((item) => item.key === before!.key)?.etag).toBe(before!.etag);
          for (const item of afterRetry.filter((entry) => entry.key !== before!.key)) {
            expect(await space().delete(item.key, { ifMatch: item.etag })).toBe(true);
          }
        } else {
          const [after] = afterRetry;
          expect(after?.key).toBe(before?.key);
          expect(after?.etag).not.toBe(before?.etag);
          await expect(space().delete(before!.key, { ifMatch: before!.etag })).rejects.toThrow();
        }
        expect(text((await threads.getCheckpoint(A, 't', '')).values['a'])).toBe(x);
      });

      it('refuses a fork whose parent record is removed after the put read it, and leaves no record of it', async () => {
        await threads.putCheckpoint(A, 't', put('c1', { versions: { a: 1 }, values: { a: 'one' } }));
        await threads.putCheckpoint(
          A,
          't',
          put('c2', { parent: 'c1', versions: { a: 2 }, values: { a: 'two' } }),
        );
        const keys = await recordKeys();
        const c1 = keys.find((key) => idOf(key) === 'c1')!;
        const stores = factory();
        let removed = false;
        const racing = new ThreadStore({
          storeOf: (tenant) => {
            const raw = stores.forSpace('threads', tenant);
            const inner = codec === undefined ? raw : new SealedThreadSpace(raw, tenant, codec);
            return {
              ...inner,
              read: (key) => inner.read(key),
              head: (key) => inner.head(key),
              append: (key, bytes, conditions) => inner.append(key, bytes, conditions),
              delete: (key, conditions) => inner.delete(key, conditions),
              list: (options) => inner.list(options),
              listItems: (options) => inner.listItems(options),
              write: async (key, value, conditions) => {
                // Retention removes c1 between the put's read of it and the put's own record.
                if (!removed && key.includes('/c/') && idOf(key) === 'c3') {
                  removed = await stores.forSpace('threads', tenant).delete(c1);
                }
                return inner.write(key, value, conditions);
              },
            };
          },
          maxValueBytes: MAX_VALUE_BYTES - (codec === undefined ? 0 : SEAL_OVERHEAD),
          sealed: codec !== undefined,
        });
        await expect(
          racing.putCheckpoint(
            A,
            't',
            put('c3', { parent: 'c1', versions: { a: 3 }, values: { a: 'three' } }),
          ),
        ).rejects.toBeInstanceOf(ConflictError);
        expect(removed).toBe(true);
        expect((await recordKeys()).map(idOf).sort()).toEqual(['c2']);
        expect((await threads.getCheckpoint(A, 't', '')).checkpointId).toBe('c2');
      });
    });

    describe('many writers and deletions', () => {
      /** A thread store on `tenant`'s space as `wrap` changes it (sealed like the others when a codec is set). */
      const wrapped = (
        wrap: (inner: KeyValueStore) => Partial<KeyValueStore>,
        options: { commitBudgetMs?: number } = {},
      ) => {
        const stores = factory();
        return new ThreadStore({
          storeOf: (tenant) => {
            const raw = stores.forSpace('threads', tenant);
            const inner = codec === undefined ? raw : new SealedThreadSpace(raw, tenant, codec);
            const changed = wrap(inner);
            return {
              read: (key) => inner.read(key),
              head: (key) => inner.head(key),
              write: (key, value, conditions) => inner.write(key, value, conditions),
              append: (key, bytes, conditions) => inner.append(key, bytes, conditions),
              delete: (key, conditions) => inner.delete(key, conditions),
              list: (listOptions) => inner.list(listOptions),
              listItems: (listOptions) => inner.listItems(listOptions),
              ...changed,
            };
          },
          maxValueBytes: MAX_VALUE_BYTES - (codec === undefined ? 0 : SEAL_OVERHEAD),
          sealed: codec !== undefined,
          ...options,
        });
      };

      it('16 instances putting at once, each to its own namespace of one thread, all commit', async () => {
        await threads.createThread(A, 't');
        const results = await Promise.all(
          Array.from({ length: 16 }, (_, index) =>
            instance().putCheckpoint(
              A,
              't',
              put(`c${index}`, { ns: `n${index}`, versions: { a: 1 }, values: { a: `v${index}` } }),
            ),
          ),
        );
        expect(results.map((result) => result.head)).toEqual(results.map((_, index) => `c${index}`));
        const thread = await threads.getThread(A, 't');
        for (let index = 0; index < 16; index++) {
          const tuple = await threads.getCheckpoint(A, 't', `n${index}`);
          expect([tuple.checkpointId, text(tuple.values['a'])]).toEqual([`c${index}`, `v${index}`]);
        }
        expect(Object.keys(thread.heads).sort()).toEqual(
          Array.from({ length: 16 }, (_, index) => `n${index}`).sort(),
        );
      });

      it('a put whose every compare-and-swap loses answers 503 and leaves no record in the history', async () => {
        await threads.putCheckpoint(A, 't', put('c1', { versions: { a: 1 }, values: { a: 'one' } }));
        const losing = wrapped(
          (inner) => ({
            write: async (key, value, conditions) => {
              // Another writer always changed the thread record first.
              if (key.startsWith(THREAD_RECORD_PREFIX) && conditions?.ifMatch !== undefined) {
                throw new PreconditionFailedError('the thread record changed');
              }
              return inner.write(key, value, conditions);
            },
          }),
          { commitBudgetMs: 200 },
        );
        await expect(
          losing.putCheckpoint(A, 't', put('c2', { parent: 'c1', versions: { a: 2 }, values: { a: 'two' } })),
        ).rejects.toBeInstanceOf(StorageUnavailableError);
        expect((await recordKeys()).map(idOf)).toEqual(['c1']);
        expect((await threads.getCheckpoint(A, 't', '')).checkpointId).toBe('c1');
      });

      it('a value found missing because the thread was deleted meanwhile answers 404, not damage', async () => {
        await threads.putCheckpoint(A, 't', put('c1', { versions: { a: 1 }, values: { a: 'one' } }));
        let deleted = false;
        const reading = wrapped((inner) => ({
          read: async (key) => {
            // The read of a value: apart, or in the record that holds it inline.
            if (!deleted && (key.includes('/v/') || key.includes('/c/'))) {
              deleted = true;
              await threads.deleteThread(A, 't');
            }
            return inner.read(key);
          },
        }));
        await expect(reading.getCheckpoint(A, 't', '')).rejects.toBeInstanceOf(NotFoundError);
        expect(deleted).toBe(true);
      });

      it('a retry whose stored values cannot be read for a storage fault answers 503, not 409, and is answered as stored once the storage is back', async () => {
        // Stored by an instance with a small value limit: the two values do not fit one record
        // with it, so they are stored apart, whole. The retry, with the full limit, stores them by
        // what they add: the two are compared by reading the stored values.
        const value = (seed: string) =>
          Buffer.concat(
            Array.from({ length: 200 }, (_, i) => createHash('sha256').update(`${seed}/${i}`).digest()),
          );
        const retried: CheckpointPut = {
          ...put('c1', { versions: { a: 1, b: 1 } }),
          values: { a: { type: 'bytes', data: value('a') }, b: { type: 'bytes', data: value('b') } },
        };
        await instance(undefined, 10 * 1024).putCheckpoint(A, 't', retried);
        expect((await allKeys(space(), 'd/')).filter((key) => key.includes('/v/'))).toHaveLength(2);
        let faults = 0;
        const faulty = wrapped((inner) => ({
          read: async (key) => {
            if (key.includes('/v/')) {
              faults += 1;
              throw new StorageUnavailableError();
            }
            return inner.read(key);
          },
        }));
        await expect(faulty.putCheckpoint(A, 't', retried)).rejects.toBeInstanceOf(StorageUnavailableError);
        expect(faults).toBeGreaterThan(0);
        expect((await instance().putCheckpoint(A, 't', retried)).created).toBe(false);
        expect((await threads.getCheckpoint(A, 't', '')).values['a']?.data.equals(value('a'))).toBe(true);
      });

      describe('a put on an instance whose kept thread record is stale is answered as on one that kept none', () => {
        const reject = { onBusy: 'reject', busyTimeoutMs: 0, leaseMs: 60_000 } as const;

        it('a retry after another instance deleted the thread (its data left by a storage fault) and created it again stores the checkpoint in the thread there is now', async () => {
          const id = 'stale-recreated';
          const c1 = put('c1', { versions: { m: 1 }, values: { m: 'one' } });
          const kept = instance();
          await kept.putCheckpoint(A, id, c1);
          // The thread record goes first, then its data, whose removal fails: the old
          // incarnation's records stay, for retention to collect.
          const faulty = wrapped((inner) => ({
            delete: async (key, conditions) => {
              if (key.startsWith('d/')) throw new StorageUnavailableError('injected fault');
              return inner.delete(key, conditions);
            },
          }));
          await expect(faulty.deleteThread(A, id)).rejects.toBeInstanceOf(StorageUnavailableError);
          await threads.createThread(A, id);

          // As an instance that kept nothing answers: stored (201), in the thread there is now.
          const stored = { created: true, threadId: id, ns: '', checkpointId: 'c1', head: 'c1' };
          expect(await kept.putCheckpoint(A, id, c1)).toEqual(stored);
          const read = await instance().getCheckpoint(A, id, '');
          expect([read.checkpointId, text(read.values['m'])]).toEqual(['c1', 'one']);
          expect(await instance().putCheckpoint(A, id, c1)).toEqual({ ...stored, created: false });
        });

        it('a put after another instance deleted the thread and created it again stores the checkpoint in the thread there is now, not a conflict', async () => {
          const id = 'stale-deleted';
          const c1 = put('c1', { versions: { m: 1 }, values: { m: 'one' } });
          const kept = instance();
          await kept.putCheckpoint(A, id, c1);
          await instance().deleteThread(A, id);
          await threads.createThread(A, id);

          expect(await kept.putCheckpoint(A, id, c1)).toEqual({
            created: true,
            threadId: id,
            ns: '',
            checkpointId: 'c1',
            head: 'c1',
          });
          expect(text((await instance().getCheckpoint(A, id, '')).values['m'])).toBe('one');
          // And after a deletion with no thread created again: the put creates it, as any put does.
          await instance().deleteThread(A, id);
          expect((await kept.putCheckpoint(A, id, c1)).created).toBe(true);
          expect((await instance().getCheckpoint(A, id, '')).checkpointId).toBe('c1');
        });

        it('a retry after another instance rewound the head to its parent moves the head back and says so', async () => {
          const id = 'stale-rewound';
          const c1 = put('c1', { parent: 'c0', versions: { m: 2 }, values: { m: 'one' } });
          const kept = instance();
          await kept.putCheckpoint(A, id, put('c0', { versions: { m: 1 }, values: { m: 'zero' } }));
          await kept.putCheckpoint(A, id, c1);
          await instance().rewind(A, id, { ns: '', checkpointId: 'c0' });

          expect(await kept.putCheckpoint(A, id, c1)).toMatchObject({ created: false, head: 'c1' });
          expect((await instance().getThread(A, id)).heads['']?.checkpointId).toBe('c1');
        });

        it('a retry of a fenced run (interrupted by another instance) is refused with run_fenced', async () => {
          const id = 'stale-fenced';
          const kept = instance();
          const { run } = await kept.startRun(A, id, reject);
          const c1 = put('c1', { runId: run.runId, versions: { m: 1 }, values: { m: 'one' } });
          await kept.putCheckpoint(A, id, c1);
          await instance().startRun(A, id, { ...reject, onBusy: 'interrupt' });

          await expect(instance().putCheckpoint(A, id, c1)).rejects.toBeInstanceOf(RunFencedError);
          await expect(kept.putCheckpoint(A, id, c1)).rejects.toBeInstanceOf(RunFencedError);
        });
      });
    });

    describe('values inline', () => {
      it('reads and extends checkpoints whose values are stored apart (the earlier layout, and values too big to go inline)', async () => {
        // A store whose values are at most 8 KiB: two values of 6,000 bytes (which compression
        // does not shrink to half) do not fit one record.
        const small = instance(undefined, 8 * 1024);
        const big = (fill: string) => noise(fill, 6000);
        await small.putCheckpoint(
          A,
          't',
          put('c1', { versions: { a: 1, b: 1, c: 1 }, values: { a: big('a'), b: big('b'), c: 'c' } }),
        );
        // Too big together for one record: every value of c1 is an object of its own, as before.
        const valueKeys = (await allKeys(space(), 'd/')).filter((key) => key.includes('/v/'));
        expect(valueKeys).toHaveLength(3);
        expect(valueKeys.every((key) => !key.includes('/~'))).toBe(true);
        await threads.putCheckpoint(
          A,
          't',
          put('c2', { parent: 'c1', versions: { a: 1, b: 1, c: 2 }, values: { c: 'c2' } }),
        );
        expect((await allKeys(space(), 'd/')).filter((key) => key.includes('/v/'))).toHaveLength(3);
        const latest = await instance().getCheckpoint(A, 't', '');
        expect([latest.checkpointId, text(latest.values['c']), text(latest.values['a'])?.length]).toEqual([
          'c2',
          'c2',
          big('a').length,
        ]);
        const page = await instance().listCheckpoints(A, 't', { limit: 10 });
        expect(
          page.checkpoints.map((c) => [c.checkpointId, text(c.values['c']), text(c.values['b'])?.length]),
        ).toEqual([
          ['c2', 'c2', big('b').length],
          ['c1', 'c', big('b').length],
        ]);
        // A retry of each is answered as stored; other content under c2 is refused.
        expect(
          (
            await instance().putCheckpoint(
              A,
              't',
              put('c2', { parent: 'c1', versions: { a: 1, b: 1, c: 2 }, values: { c: 'c2' } }),
            )
          ).created,
        ).toBe(false);
        await expect(
          instance().putCheckpoint(
            A,
            't',
            put('c2', { parent: 'c1', versions: { a: 1, b: 1, c: 2 }, values: { c: 'other' } }),
          ),
        ).rejects.toBeInstanceOf(ConflictError);
        expect((await threads.getCheckpoint(A, 't', '', 'c2')).values['c']).toEqual(bytes('c2'));
      });
    });

    describe('values stored by what they add', () => {
      /** 300 deterministic bytes of any value (a message of a binary serialiser). */
      const message = (seed: string) =>
        Buffer.concat(
          Array.from({ length: 10 }, (_, i) => createHash('sha256').update(`${seed}/${i}`).digest()),
        ).subarray(0, 300);
      const binary = (data: Buffer): TypedBytes => ({ type: 'msgpack', data });
      const putOf = (checkpointId: string, parent: string | null, version: number, data: Buffer) => ({
        ...put(checkpointId, { parent, versions: { m: version } }),
        values: { m: binary(data) },
      });
      /** Bytes of every data key of the tenant's space (records, packs, values, writes) as stored. */
      const storedBytes = async () => {
        let total = 0;
        let cursor: string | undefined;
        do {
          const page = await space().listItems({
            prefix: 'd/',
            limit: 1000,
            ...(cursor === undefined ? {} : { cursor }),
          });
          total += page.items.reduce((sum, item) => sum + item.size, 0);
          cursor = page.cursor ?? undefined;
        } while (cursor !== undefined);
        return total;
      };

      it('stores a growing value by what each put adds in 2 requests, reads the latest in a bounded number, and restores every checkpoint byte for byte', async () => {
        const calls: string[] = [];
        const counted = instance(calls);
        const values: Buffer[] = [];
        const added: number[] = [];
        let whole = 0;
        for (let i = 0; i < 100; i++) {
          const value = Buffer.concat([values.at(-1) ?? Buffer.alloc(0), message(`m${i}`)]);
          values.push(value);
          whole += value.length;
          const before = await storedBytes();
          calls.length = 0;
          const id = `c${String(i).padStart(3, '0')}`;
          const parent = i === 0 ? null : `c${String(i - 1).padStart(3, '0')}`;
          await counted.putCheckpoint(A, 't', putOf(id, parent, i + 1, value));
          if (i > 0) expect(calls, calls.join('\n')).toHaveLength(2);
          added.push((await storedBytes()) - before);
        }
        // Stored whole, the checkpoints would hold 1.5 MB; by what they add, a small part of it.
        expect(await storedBytes()).toBeLessThan(whole / 5);
        // A put that merges no tier adds its message, the list's last bytes and its record.
        expect([...added].sort((a, b) => a - b)[50]).toBeLessThan(3 * 1024);

        calls.length = 0;
        const latest = await counted.getCheckpoint(A, 't', '');
        expect(latest.values['m']?.data.equals(values.at(-1) as Buffer)).toBe(true);
        // The thread record, the pending writes, and one read per pack the value has segments in:
        // at most FANOUT - 1 per tier, 3 tiers for 100 puts.
        expect(calls.length, calls.join('\n')).toBeLessThanOrEqual(2 + 3 * (FANOUT - 1));

        const restored = new Map<string, Buffer>();
        for (let cursor: string | undefined; ;) {
          const page = await instance().listCheckpoints(A, 't', {
            limit: 40,
            ...(cursor === undefined ? {} : { cursor }),
          });
          for (const checkpoint of page.checkpoints) {
            restored.set(checkpoint.checkpointId, checkpoint.values['m']?.data as Buffer);
            expect(checkpoint.values['m']?.type).toBe('msgpack');
          }
          if (page.next === null) break;
          cursor = page.next;
        }
        expect(restored.size).toBe(100);
        values.forEach((value, i) =>
          expect(restored.get(`c${String(i).padStart(3, '0')}`)?.equals(value), `c${i}`).toBe(true),
        );
        // No stored object shows a message (records are compressed, and sealed when values are);
        // opened and decompressed, the packs hold them as sent.
        const recordKeysNow = (await allKeys(space(), 'd/')).filter((key) => key.includes('/c/'));
        const raw = await Promise.all(
          (await allKeys(space(), 'd/')).map(async (key) => (await space().read(key))!.value),
        );
        expect(raw.some((bytes) => bytes.includes(message('m50')))).toBe(false);
        const opened = codec === undefined ? space() : new SealedThreadSpace(space(), A, codec);
        const packs = await Promise.all(
          recordKeysNow.map(async (key) => decodeCheckpointRecord((await opened.read(key))!.value, key).pack),
        );
        expect(packs.some((pack) => pack?.includes(message('m50')))).toBe(true);
      });

      it('an edit or a removal in the middle of a value costs about what it changes', async () => {
        const messages = Array.from({ length: 200 }, (_, i) => message(`m${i}`));
        const first = Buffer.concat(messages);
        await threads.putCheckpoint(A, 't', putOf('c1', null, 1, first));
        messages[100] = message('edited');
        const edited = Buffer.concat(messages);
        let before = await storedBytes();
        await threads.putCheckpoint(A, 't', putOf('c2', 'c1', 2, edited));
        expect((await storedBytes()) - before).toBeLessThan(3 * MAX_CHUNK);
        messages.splice(50, 1);
        const removed = Buffer.concat(messages);
        before = await storedBytes();
        await threads.putCheckpoint(A, 't', putOf('c3', 'c2', 3, removed));
        expect((await storedBytes()) - before).toBeLessThan(3 * MAX_CHUNK);
        const read = instance();
        expect((await read.getCheckpoint(A, 't', '', 'c1')).values['m']?.data.equals(first)).toBe(true);
        expect((await read.getCheckpoint(A, 't', '', 'c2')).values['m']?.data.equals(edited)).toBe(true);
        expect((await read.getCheckpoint(A, 't', '')).values['m']?.data.equals(removed)).toBe(true);
      });

      it('answers a retry as stored and refuses other content, and forks and rewinds share what they keep and read their branch', async () => {
        const base = Buffer.concat(Array.from({ length: 40 }, (_, i) => message(`m${i}`)));
        const c2 = Buffer.concat([base, message('c2')]);
        const c3 = Buffer.concat([base, message('c3')]);
        await threads.putCheckpoint(A, 't', putOf('c1', null, 1, base));
        await threads.putCheckpoint(A, 't', putOf('c2', 'c1', 2, c2));
        const stored = await storedBytes();
        expect((await instance().putCheckpoint(A, 't', putOf('c2', 'c1', 2, c2))).created).toBe(false);
        const flipped = Buffer.from(c2);
        flipped[5000] = (flipped[5000] as number) ^ 1;
        const other = await rejection(instance().putCheckpoint(A, 't', putOf('c2', 'c1', 2, flipped)));
        expect(other).toBeInstanceOf(ConflictError);
        expect(await storedBytes()).toBe(stored);
        // A fork from c1 (its parent is not the head) names c1's bytes again, adding its own.
        await threads.putCheckpoint(A, 't', putOf('c3', 'c1', 2, c3));
        expect((await storedBytes()) - stored).toBeLessThan(base.length / 2);
        // A rewind to c2, then a put on it: the same.
        await threads.rewind(A, 't', { ns: '', checkpointId: 'c2' });
        const c4 = Buffer.concat([c2, message('c4')]);
        const beforeC4 = await storedBytes();
        await instance().putCheckpoint(A, 't', putOf('c4', 'c2', 3, c4));
        expect((await storedBytes()) - beforeC4).toBeLessThan(base.length / 2);
        const read = instance();
        for (const [id, value] of [
          ['c1', base],
          ['c2', c2],
          ['c3', c3],
          ['c4', c4],
        ] as const) {
          expect((await read.getCheckpoint(A, 't', '', id)).values['m']?.data.equals(value), id).toBe(true);
        }
        expect((await read.getCheckpoint(A, 't', '')).checkpointId).toBe('c4');
      });

      it('a value near the record limit keeps its segments within the bound: the merges that fit are made', async () => {
        // With the value limit at 48 KiB, a 30 KiB channel grows by 100 bytes a put while another
        // changes whole (20 KiB) at every put: a merge that rewrites the first channel whole no
        // longer fits one record beside the other, the merges of what it added since still do.
        const limit = 48 * 1024;
        const writer = instance(undefined, limit);
        const chunk = (seed: string, length: number) =>
          Buffer.concat(
            Array.from({ length: Math.ceil(length / 32) }, (_, i) =>
              createHash('sha256').update(`${seed}/${i}`).digest(),
            ),
          ).subarray(0, length);
        let grown = chunk('near/first', 30 * 1024);
        await writer.putCheckpoint(A, 'near', putOf('c000', null, 1, grown));
        const opened = codec === undefined ? space() : new SealedThreadSpace(space(), A, codec);
        let most = 0;
        for (let i = 1; i <= 60; i++) {
          grown = Buffer.concat([grown, chunk(`near/m${i}`, 100)]);
          const id = `c${String(i).padStart(3, '0')}`;
          await writer.putCheckpoint(A, 'near', {
            ...put(id, { parent: `c${String(i - 1).padStart(3, '0')}`, versions: { m: i + 1, s: i } }),
            values: { m: binary(grown), s: binary(chunk(`near/s${i}`, 20 * 1024)) },
          });
          const head = decodeThreadRecord((await opened.read(threadKey('near')))!.value, 'near').heads.get(
            '',
          );
          expect(head?.record.id).toBe(id);
          most = Math.max(most, head?.record.pieces?.['m']?.length ?? 0);
        }
        // Appends alone would give the value one segment a put (61); merged, a few per tier.
        expect(most).toBeLessThanOrEqual(3 * (FANOUT - 1));
        const latest = await instance(undefined, limit).getCheckpoint(A, 'near', '');
        expect(latest.values['m']?.data.equals(grown)).toBe(true);
        expect(latest.values['s']?.data.equals(chunk('near/s60', 20 * 1024))).toBe(true);
      });

      it('a record that fits with its values whole but not with their segment lists stores them apart, not 413', async () => {
        // A limit that metadata (at most 16 KiB, compressed to about three quarters) can reach.
        const limit = 11 * 1024;
        const effective = limit - (codec === undefined ? 0 : SEAL_OVERHEAD);
        const writer = instance(undefined, limit);
        const opened = codec === undefined ? space() : new SealedThreadSpace(space(), A, codec);
        // 20 channels of 1,100 bytes: together past the limit, so stored apart, whole.
        const random = (seed: string) => Buffer.from(noise(seed, 1500), 'base64url').subarray(0, 1100);
        const wide = (threadId: string, padding: number) => ({
          ...put('c1', {
            versions: Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`ch${i}`, 1])),
            metadata: { padding: noise('pad', padding) },
          }),
          values: Object.fromEntries(
            Array.from({ length: 20 }, (_, i) => [`ch${i}`, binary(random(`${threadId}${i}`))]),
          ),
        });
        const storedRecord = async (threadId: string) => {
          const [key] = (await allKeys(space(), `d/${threadId}/`)).filter((item) => item.includes('/c/'));
          return (await opened.read(key!))!.value;
        };
        // Padded to about 40 bytes under the limit (the padding found by a search: the record is
        // compressed), its segment lists (some 25 bytes a channel, compressed or not) would pass it.
        let low = 0;
        let high = 15 * 1024; // within the metadata limit
        let found = 0;
        for (let probe = 0; low <= high; probe++) {
          const padding = Math.floor((low + high) / 2);
          const threadId = `probe${probe}`;
          const size = await writer.putCheckpoint(A, threadId, wide('probe', padding)).then(
            async () => (await storedRecord(threadId)).length,
            (error: unknown) => {
              if (error instanceof PayloadTooLargeError) return Infinity;
              throw error;
            },
          );
          if (size <= effective - 40) {
            found = padding;
            low = padding + 1;
          } else high = padding - 1;
        }
        const stored = await writer.putCheckpoint(A, 'padded', wide('probe', found));
        expect(stored.created).toBe(true);
        const bytes = await storedRecord('padded');
        // (Sealed, its value digests are random: its compressed size differs by a few bytes.)
        expect(bytes.length).toBeLessThanOrEqual(effective);
        expect(bytes.length).toBeGreaterThan(effective - 100);
        expect(decodeCheckpointRecord(bytes, 'c1').pieces).toBeUndefined();
        const read = await instance(undefined, limit).getCheckpoint(A, 'padded', '');
        expect(read.values['ch7']?.data.equals(random('probe7'))).toBe(true);
      });

      it('a checkpoint id stored again after retention removed its record never reads the other pack', async () => {
        const random = (seed: string, length: number) =>
          Buffer.from(noise(seed, Math.ceil((length * 4) / 3) + 4), 'base64url').subarray(0, length);
        const first = random('reuse/first', 3000);
        const grown = Buffer.concat([first, random('reuse/more', 2000)]);
        await threads.putCheckpoint(A, 't', putOf('c1', null, 1, first));
        await threads.putCheckpoint(A, 't', putOf('c2', 'c1', 2, grown));
        // Retention removes c1 as it does: its pack apart first, then the record.
        const opened = codec === undefined ? space() : new SealedThreadSpace(space(), A, codec);
        const recordKey = (await allKeys(space(), 'd/')).find(
          (key) => key.includes('/c/') && idOf(key) === 'c1',
        )!;
        const parsed = parseDataKey(recordKey)!;
        const removed = decodeCheckpointRecord((await opened.read(recordKey))!.value, recordKey);
        expect(removed.pack).toBeDefined();
        await opened.write(keysOf(parsed).pack('', 'c1'), removed.pack!, { ifAbsent: true });
        await space().delete(recordKey);
        // Later (retention removes only what is past its age), a new root under the same id, with a
        // pack of other bytes.
        clock.stop();
        clock.advance(60_000);
        await threads.putCheckpoint(A, 't', putOf('c1', null, 1, random('reuse/other', 3000)));
        const read = await instance().getCheckpoint(A, 't', '', 'c2');
        expect(read.values['m']?.data.equals(grown)).toBe(true);
        const again = await instance().getCheckpoint(A, 't', '', 'c1');
        expect(again.values['m']?.data.equals(random('reuse/other', 3000))).toBe(true);
      });

      it('an instance that kept the values of a checkpoint id reads what the id holds once stored again after retention', async () => {
        const random = (seed: string, length: number) =>
          Buffer.from(noise(seed, Math.ceil((length * 4) / 3) + 4), 'base64url').subarray(0, length);
        const first = random('kept/first', 3000);
        const small = Buffer.from('kept/small');
        const keeper = instance();
        await keeper.putCheckpoint(A, 't', putOf('c1', null, 1, first));
        await keeper.putCheckpoint(A, 't', putOf('c2', 'c1', 2, Buffer.concat([first, small])));
        expect((await keeper.getCheckpoint(A, 't', '', 'c1')).values['m']?.data.equals(first)).toBe(true);
        // Retention removes c1 (its pack apart first, then the record); another instance stores a
        // new root under the same id, with other bytes.
        const opened = codec === undefined ? space() : new SealedThreadSpace(space(), A, codec);
        const recordKey = (await allKeys(space(), 'd/')).find(
          (key) => key.includes('/c/') && idOf(key) === 'c1',
        )!;
        const removed = decodeCheckpointRecord((await opened.read(recordKey))!.value, recordKey);
        await opened.write(keysOf(parseDataKey(recordKey)!).pack('', 'c1'), removed.pack!, {
          ifAbsent: true,
        });
        await space().delete(recordKey);
        clock.stop();
        clock.advance(60_000);
        const other = random('kept/other', 3000);
        await instance().putCheckpoint(A, 't', putOf('c1', null, 1, other));
        expect((await keeper.getCheckpoint(A, 't', '', 'c1')).values['m']?.data.equals(other)).toBe(true);
        expect((await keeper.getCheckpoint(A, 't', '')).values['m']?.data.equals(other)).toBe(true);
      });

      it('a checkpoint stored by an instance whose clock is behind is created no earlier than its parent, and reads', async () => {
        const random = (seed: string, length: number) =>
          Buffer.from(noise(seed, Math.ceil((length * 4) / 3) + 4), 'base64url').subarray(0, length);
        const first = random('behind/first', 3000);
        const grown = Buffer.concat([first, random('behind/more', 2000)]);
        clock.stop();
        await threads.putCheckpoint(A, 't', putOf('c1', null, 1, first));
        clock.advance(-5_000);
        await instance().putCheckpoint(A, 't', putOf('c2', 'c1', 2, grown));
        const [c1, c2] = await Promise.all(
          ['c1', 'c2'].map((id) => instance().getCheckpoint(A, 't', '', id)),
        );
        expect(c2!.createdAt).toBe(c1!.createdAt);
        expect(c2!.values['m']?.data.equals(grown)).toBe(true);
      });

      it('reads and extends a thread stored before values were stored by what they add', async () => {
        await threads.createThread(A, 't');
        // The thread record as it was: no chunk key.
        const opened = codec === undefined ? space() : new SealedThreadSpace(space(), A, codec);
        const record = decodeThreadRecord((await opened.read(threadKey('t')))!.value, 't');
        const old: { -readonly [K in keyof typeof record]: (typeof record)[K] } = { ...record };
        delete old.chunkKey;
        await opened.write(threadKey('t'), encodeThreadRecord(old));
        const base = Buffer.concat(Array.from({ length: 20 }, (_, i) => message(`m${i}`)));
        const next = Buffer.concat([base, message('next')]);
        const last = Buffer.concat([next, message('last')]);
        const writer = instance();
        await writer.putCheckpoint(A, 't', putOf('c1', null, 1, base));
        await writer.putCheckpoint(A, 't', putOf('c2', 'c1', 2, next));
        await writer.putCheckpoint(A, 't', putOf('c3', 'c2', 3, last));
        const pieces: Record<string, boolean> = {};
        for (const key of await recordKeys()) {
          const stored = decodeCheckpointRecord((await opened.read(key))!.value, key);
          pieces[stored.id] = stored.pieces !== undefined;
        }
        // c1 went whole, as before; its put gave the thread its chunk key, and c2 and c3 have pieces.
        expect(pieces).toEqual({ c1: false, c2: true, c3: true });
        const read = instance();
        expect((await read.getCheckpoint(A, 't', '', 'c1')).values['m']?.data.equals(base)).toBe(true);
        expect((await read.getCheckpoint(A, 't', '', 'c2')).values['m']?.data.equals(next)).toBe(true);
        expect((await read.getCheckpoint(A, 't', '')).values['m']?.data.equals(last)).toBe(true);
      });
    });

    describe('storage requests', () => {
      /** An instance whose storage requests are listed in `calls`, holding a run of thread t. */
      const countedRun = async () => {
        const calls: string[] = [];
        const counted = instance(calls);
        const { run } = await counted.startRun(A, 't', {
          onBusy: 'reject',
          busyTimeoutMs: 0,
          leaseMs: 60_000,
        });
        return { calls, counted, run };
      };

      it('a retry that leaves the head makes 3 requests: the refused create, the stored record, the thread record (read, by the instance that kept it too)', async () => {
        const c1 = put('c1', { versions: { a: 1 }, values: { a: 'a' } });
        const calls: string[] = [];
        const counted = instance(calls);
        await counted.putCheckpoint(A, 't', c1);
        // The instance that kept the thread record checks the head and the writer on the current one.
        calls.length = 0;
        expect((await counted.putCheckpoint(A, 't', c1)).created).toBe(false);
        expect(calls, calls.join('\n')).toHaveLength(3);
        expect(calls.filter((call) => call === `read ${threadKey('t')}`)).toHaveLength(1);
        // An instance that kept nothing reads it first, and no more.
        const freshCalls: string[] = [];
        expect((await instance(freshCalls).putCheckpoint(A, 't', c1)).created).toBe(false);
        expect(freshCalls, freshCalls.join('\n')).toHaveLength(3);
        expect(freshCalls[0]).toBe(`read ${threadKey('t')}`);
      });

      it('a put makes 2 requests (its record with the changed values inline, then the thread record), a getTuple of the latest 2 + one per record holding its values; a stale thread record costs a read and a retry', async () => {
        const { calls, counted, run } = await countedRun();
        await counted.putCheckpoint(
          A,
          't',
          put('c1', { runId: run.runId, versions: { a: 1, b: 1, c: 1 }, values: { a: 'a', b: 'b', c: 'c' } }),
        );

        calls.length = 0;
        await counted.putCheckpoint(
          A,
          't',
          put('c2', {
            parent: 'c1',
            runId: run.runId,
            versions: { a: 2, b: 2, c: 1 },
            values: { a: 'a2', b: 'b2' },
          }),
        );
        expect(calls, calls.join('\n')).toHaveLength(2);
        expect(calls.filter((call) => call.startsWith('write'))).toHaveLength(2);

        calls.length = 0;
        const latest = await counted.getCheckpoint(A, 't', '');
        expect(Object.keys(latest.values)).toHaveLength(3);
        // The thread record and the pending writes: this instance stored every value (a, b in c2,
        // c in c1), and keeps them.
        expect(calls, calls.join('\n')).toHaveLength(2);
        // An instance that keeps none reads c2's record (a, b) and c1's (c) too, then keeps them.
        const freshCalls: string[] = [];
        const fresh = instance(freshCalls);
        expect((await fresh.getCheckpoint(A, 't', '')).values).toEqual(latest.values);
        expect(freshCalls, freshCalls.join('\n')).toHaveLength(2 + 2);
        freshCalls.length = 0;
        expect((await fresh.getCheckpoint(A, 't', '')).values).toEqual(latest.values);
        expect(freshCalls, freshCalls.join('\n')).toHaveLength(2);

        // Another instance renews the lease: this instance's thread record is stale.
        await instance().heartbeat(A, 't', run.runId);
        calls.length = 0;
        await counted.putCheckpoint(
          A,
          't',
          put('c3', { parent: 'c2', runId: run.runId, versions: { a: 3, b: 2, c: 1 }, values: { a: 'a3' } }),
        );
        expect(calls, calls.join('\n')).toHaveLength(2 + 2);
        expect((await threads.getCheckpoint(A, 't', '')).checkpointId).toBe('c3');

        // The first put of a namespace also marks the namespace.
        calls.length = 0;
        await counted.putCheckpoint(
          A,
          't',
          put('s1', { ns: 'sub', runId: run.runId, versions: { x: 1 }, values: { x: 'x' } }),
        );
        expect(calls, calls.join('\n')).toHaveLength(1 + 2);

        // Pending writes: the thread record and the append, to any checkpoint, stored yet or not.
        for (const checkpointId of ['c3', 'c1', 'c4']) {
          calls.length = 0;
          await counted.putWrites(A, 't', {
            ns: '',
            checkpointId,
            taskId: 'task',
            taskPath: '',
            runId: run.runId,
            writes: [{ channel: 'a', idx: 0, value: bytes('w') }],
          });
          expect(calls, calls.join('\n')).toHaveLength(2);
        }

        // A read of the latest told the checkpoint the client holds (the head, most often) reads
        // the head's pending writes beside the thread record, not after it: still 2 requests.
        await threads.putWrites(A, 't', {
          ns: '',
          checkpointId: 'c1',
          taskId: 'other',
          taskPath: '',
          runId: run.runId,
          writes: [{ channel: 'b', idx: 0, value: bytes('x') }],
        });
        calls.length = 0;
        const held = await counted.getCheckpoint(A, 't', '', undefined, 'c3');
        expect(held.checkpointId).toBe('c3');
        expect(held.pendingWrites.map((write) => write.taskId)).toEqual(['task']);
        expect(calls, calls.join('\n')).toHaveLength(2);
        expect(calls[0], calls.join('\n')).toMatch(/^read d\/.*\/w\//);
        // Told a checkpoint that is no longer the head: that read is dropped, the head's made.
        calls.length = 0;
        const moved = await counted.getCheckpoint(A, 't', '', undefined, 'c1');
        expect(moved.checkpointId).toBe('c3');
        expect(moved.pendingWrites.map((write) => write.taskId)).toEqual(['task']);
        expect(calls, calls.join('\n')).toHaveLength(3);
      });

      it('pending writes sent while a put of the thread is on its way in the same instance make 1 request: the writer is checked on the thread record that put commits', async () => {
        const { calls, counted, run } = await countedRun();
        await counted.putCheckpoint(
          A,
          't',
          put('c1', { runId: run.runId, versions: { m: 1 }, values: { m: 'a' } }),
        );
        const writes = (checkpointId: string, taskId: string) =>
          counted.putWrites(A, 't', writesOf(checkpointId, taskId, run.runId));

        calls.length = 0;
        // As LangGraph does: the step's writes (to the checkpoint being put, and to the next one)
        // while the put is on its way.
        const putting = counted.putCheckpoint(
          A,
          't',
          put('c2', { parent: 'c1', runId: run.runId, versions: { m: 2 }, values: { m: 'b' } }),
        );
        await Promise.all([putting, writes('c2', 'on-c2'), writes('c3', 'on-c3')]);
        // The put's record and compare-and-swap, and one append per call: no read of the thread record.
        expect(calls, calls.join('\n')).toHaveLength(2 + 2);
        expect(calls.filter((call) => call.startsWith('append'))).toHaveLength(2);
        const read = instance();
        expect((await read.getCheckpoint(A, 't', '')).pendingWrites.map((write) => write.taskId)).toEqual([
          'on-c2',
        ]);

        // With no put on its way, the writes read the thread record first, as before.
        calls.length = 0;
        await writes('c2', 'alone');
        expect(calls, calls.join('\n')).toHaveLength(2);
        expect(calls[0], calls.join('\n')).toMatch(/^read t\//);
      });

      it('a history page lists as many checkpoint keys as it holds and one more, also continued from its cursor', async () => {
        const ids = chainIds(30);
        await putChain(threads, A, ids);
        const calls: string[] = [];
        const counted = instance(calls);
        const seen: string[] = [];
        let cursor: string | undefined;
        do {
          const page = await counted.listCheckpoints(A, 't', {
            ns: '',
            limit: 5,
            ...(cursor === undefined ? {} : { cursor }),
          });
          seen.push(...page.checkpoints.map((tuple) => tuple.checkpointId));
          cursor = page.next ?? undefined;
        } while (cursor !== undefined);
        expect(seen).toEqual([...ids].reverse());
        const listings = calls.filter((call) => /^list d\/.*\/c\//.test(call));
        expect(listings.length).toBeGreaterThan(0);
        expect(
          listings.filter((call) => !call.endsWith(' limit 6')),
          calls.join('\n'),
        ).toEqual([]);
      });

      it('a history page lists each pending writes key once, under the beginnings its ids share', async () => {
        // Ids that share "c" across the page: a listing under it for each batch of 16 would list
        // every writes key of the thread each time.
        const ids = chainIds(40);
        await putChain(threads, A, ids);
        for (const [i, id] of ids.entries()) await threads.putWrites(A, 't', writesOf(id, `w${i}`));
        const calls: string[] = [];
        const counted = instance(calls);
        const page = await counted.listCheckpoints(A, 't', { ns: '', limit: 100 });
        expect(page.checkpoints.map((tuple) => tuple.checkpointId)).toEqual([...ids].reverse());
        expect(page.checkpoints.map((tuple) => tuple.pendingWrites.map((write) => write.taskId))).toEqual(
          ids.map((_, i) => [`w${i}`]).reverse(),
        );
        const prefixes = calls
          .map((call) => /^list d\/.*\/w\/[^/]*\/(\S*) limit/.exec(call)?.[1])
          .filter((prefix): prefix is string => prefix !== undefined);
        expect(prefixes.length, calls.join('\n')).toBeGreaterThan(0);
        // Every writes key listed at most once: the listings' keys, counted, are no more than the page's.
        const listedKeys = prefixes
          .map((prefix) => ids.filter((id) => id.startsWith(prefix)).length)
          .reduce((a, b) => a + b, 0);
        expect(listedKeys, calls.join('\n')).toBeLessThanOrEqual(ids.length);
        // Every pending writes answered from the listings: none read without its listed version.
        expect(calls.filter((call) => /^read d\/.*\/w\//.test(call))).toHaveLength(ids.length);
      });

      it('a history page read again answers the records and pending writes this instance read from the listings, reading only what changed', async () => {
        const ids = chainIds(20);
        await putChain(threads, A, ids);
        const write = (checkpointId: string, taskId: string) =>
          threads.putWrites(A, 't', writesOf(checkpointId, taskId));
        await write('c05', 'w5');
        await write('c12', 'w12');
        const calls: string[] = [];
        const counted = instance(calls);
        const first = await counted.listCheckpoints(A, 't', { ns: '', limit: 100 });
        expect(first.checkpoints.map((tuple) => tuple.checkpointId)).toEqual([...ids].reverse());
        expect(first.checkpoints.find((tuple) => tuple.checkpointId === 'c12')?.pendingWrites).toHaveLength(
          1,
        );
        // The records, and only the pending writes that the listings show.
        expect(calls.filter((call) => /^read d\/.*\/w\//.test(call))).toHaveLength(2);

        calls.length = 0;
        const again = await counted.listCheckpoints(A, 't', { ns: '', limit: 100 });
        expect(again).toEqual(first);
        // The thread record and the listings: no record or pending writes read again.
        expect(
          calls.filter((call) => call.startsWith('read d/')),
          calls.join('\n'),
        ).toEqual([]);

        // Writes appended since are read (their listing shows another version), the rest are not.
        await write('c12', 'w12b');
        calls.length = 0;
        const changed = await counted.listCheckpoints(A, 't', { ns: '', limit: 100 });
        expect(
          changed.checkpoints
            .find((tuple) => tuple.checkpointId === 'c12')
            ?.pendingWrites.map((w) => w.taskId),
        ).toEqual(['w12', 'w12b']);
        expect(
          calls.filter((call) => call.startsWith('read d/')),
          calls.join('\n'),
        ).toHaveLength(1);
      });

      it('refuses pending writes of a fenced run sent while its instance has a put on its way, storing nothing visible', async () => {
        const holder = instance();
        const reject = { onBusy: 'reject', busyTimeoutMs: 0, leaseMs: 60_000 } as const;
        const first = await holder.startRun(A, 't', reject);
        await holder.putCheckpoint(
          A,
          't',
          put('c1', { runId: first.run.runId, versions: { m: 1 }, values: { m: 'a' } }),
        );
        // Another instance takes the thread: the holder's kept thread record still shows its run.
        await instance().startRun(A, 't', { ...reject, onBusy: 'interrupt' });

        const putting = rejection(
          holder.putCheckpoint(
            A,
            't',
            put('c2', { parent: 'c1', runId: first.run.runId, versions: { m: 2 }, values: { m: 'b' } }),
          ),
        );
        const writing = rejection(holder.putWrites(A, 't', writesOf('c1', 'late', first.run.runId)));
        expect(await putting).toBeInstanceOf(RunFencedError);
        expect(await writing).toBeInstanceOf(RunFencedError);
        const latest = await instance().getCheckpoint(A, 't', '');
        expect(latest.checkpointId).toBe('c1');
        expect(latest.pendingWrites).toEqual([]);
      });
    });
  });
}
