import path from 'node:path';

import { beforeAll, describe, expect, it } from 'vitest';

import { loadRegistrations, type Registration } from '../../dev/host/registrations';
import type { CopyBatch, MigrationReport, SourcePlan } from '../../shared/migration/migration';

/**
 * The registered migration orchestrator, run through the real durable-functions library with
 * replayed histories, exactly as the Durable Functions extension calls it: the whole history on
 * every episode, the actions it wants back.
 */
const COPY = 'migrationCopyFiles';
const LIST = 'migrationListSourcePage';

interface Action {
  actionType: number;
  functionName: string;
  input: { batch?: CopyBatch; after?: string };
  retryOptions?: { maxNumberOfAttempts: number };
  compoundActions?: Action[];
}

interface State {
  isDone: boolean;
  actions: Action[][];
  output?: MigrationReport;
  customStatus?: { total: number; done: number };
}

let orchestrator: Registration;

beforeAll(() => {
  // The orchestrator checks its input against the configuration: source roots under /data.
  process.env['CAIRN_API_KEYS'] = `ops:${'0'.repeat(64)}:admin`;
  process.env['CAIRN_MIGRATION_SOURCE_ROOTS'] = '/data';
  const registrations = loadRegistrations(path.resolve('dist/functions/migrations.js'));
  const found = registrations.find((registration) => registration.trigger.type === 'orchestrationTrigger');
  if (found === undefined) throw new Error('no orchestration registered');
  orchestrator = found;
});

const input = { tenant: 't1', sources: [{ root: '/data/agent', prefix: '' }], dryRun: false };
const at = '2026-11-29T20:00:00.000Z';
const started = () => [
  { EventType: 12, EventId: -1, Timestamp: at, IsPlayed: false },
  { EventType: 0, EventId: -1, Timestamp: at, IsPlayed: false, Name: 'migrateLocalToBlob' },
];
const scheduled = (id: number, name: string) => ({
  EventType: 4,
  EventId: id,
  Timestamp: at,
  IsPlayed: false,
  Name: name,
});
const completed = (id: number, result: unknown) => ({
  EventType: 5,
  EventId: -1,
  Timestamp: at,
  IsPlayed: false,
  TaskScheduledId: id,
  Result: JSON.stringify(result),
});
const failed = (id: number) => ({
  EventType: 6,
  EventId: -1,
  Timestamp: at,
  IsPlayed: false,
  TaskScheduledId: id,
  Reason: 'the storage is unavailable; retry later',
  Details: 'StorageUnavailableError',
});
const timer = (id: number) => [
  { EventType: 10, EventId: id, Timestamp: at, IsPlayed: false, FireAt: at },
  { EventType: 11, EventId: -1, Timestamp: at, IsPlayed: false, TimerId: id, FireAt: at },
];
const episode = () => ({ EventType: 12, EventId: -1, Timestamp: at, IsPlayed: false });

async function replay(history: object[], given: object = input): Promise<State> {
  const { DummyOrchestrationContext } = await import('durable-functions');
  const payload = { history, input: given, instanceId: 'i1', isReplaying: true, upperSchemaVersion: 3 };
  return (await orchestrator.handler(payload, new DummyOrchestrationContext())) as State;
}

function flatten(actions: Action[]): Action[] {
  return actions.flatMap((action) => (action.compoundActions ? flatten(action.compoundActions) : [action]));
}

/** A plan for `files` (names only in the test: the plan itself holds ranges and counts). */
const page = (files: string[], next: string | null = null, stored = 0): SourcePlan => {
  const batches: CopyBatch[] = [];
  for (let index = 0; index < files.length; index += 100) {
    const slice = files.slice(index, index + 100);
    batches.push({
      after: index === 0 ? '' : files[index - 1]!,
      through: slice[slice.length - 1]!,
      count: slice.length,
    });
  }
  return { exists: true, stored, batches, next };
};
const result = (copied: string[], skipped = 0): MigrationReport => ({
  copied: copied.length,
  skipped,
  bytesCopied: copied.length * 10,
  keysCopied: copied,
  errors: [],
});

describe('migration orchestrator (replayed histories)', () => {
  it('lists a page, fans out copy batches with retry options, and returns the merged report', async () => {
    const first = await replay(started());
    expect(first.isDone).toBe(false);
    const [list] = flatten(first.actions.flat());
    expect(list).toMatchObject({ actionType: 1, functionName: LIST, input: { after: '', limit: 1000 } });
    expect(list?.retryOptions?.maxNumberOfAttempts).toBe(5);

    const files = Array.from({ length: 250 }, (_, i) => `f${String(i).padStart(3, '0')}`);
    const history = [...started(), scheduled(0, LIST), episode(), completed(0, page(files))];
    const second = await replay(history);
    const copies = flatten(second.actions.flat()).filter((action) => action.functionName === COPY);
    expect(copies.map((copy) => copy.input.batch?.count)).toEqual([100, 100, 50]);
    expect(copies.map((copy) => copy.input.batch?.through)).toEqual(['f099', 'f199', 'f249']);
    expect(second.customStatus).toEqual({ total: 250, done: 0 });

    history.push(scheduled(1, COPY), scheduled(2, COPY), scheduled(3, COPY), episode());
    history.push(completed(1, result(files.slice(0, 100))), completed(3, result(files.slice(200), 0)));
    const partial = await replay(history);
    expect(partial.isDone).toBe(false);
    history.push(completed(2, result(files.slice(100, 190), 10)));
    const last = await replay(history);
    expect(last.isDone).toBe(true);
    expect(last.customStatus).toEqual({ total: 250, done: 250 });
    expect(last.output).toMatchObject({ copied: 240, skipped: 10, bytesCopied: 2400 });
    expect(last.output?.keysCopied).toHaveLength(240);
  });

  it('follows the next page until the source ends', async () => {
    const history = [...started(), scheduled(0, LIST), episode(), completed(0, page(['a'], 'a'))];
    history.push(scheduled(1, COPY), episode(), completed(1, result(['a'])));
    const next = await replay(history);
    const lists = flatten(next.actions.flat()).filter((action) => action.functionName === LIST);
    expect(lists.map((action) => action.input.after)).toEqual(['', 'a']);
    history.push(scheduled(2, LIST), episode(), completed(2, page([], null)));
    const done = await replay(history);
    expect(done.isDone).toBe(true);
    expect(done.output).toMatchObject({ copied: 1, keysCopied: ['a'] });
  });

  it('fails naming the root when a source folder does not exist, instead of an empty success', async () => {
    const history = [
      ...started(),
      scheduled(0, LIST),
      episode(),
      completed(0, { exists: false, stored: 0, batches: [], next: null }),
    ];
    const failure = await replay(history).then(
      () => undefined,
      (error: unknown) => error as Error,
    );
    expect(failure).toBeInstanceOf(Error);
    expect(failure?.message).toContain('sources.0.root');
    expect(failure?.message).toContain('/data/agent does not exist');
  });

  it('counts files the target already stores as skipped, without copying them', async () => {
    const history = [...started(), scheduled(0, LIST), episode(), completed(0, page([], null, 40))];
    const done = await replay(history);
    expect(done.isDone).toBe(true);
    expect(flatten(done.actions.flat()).map((action) => action.functionName)).toEqual([LIST]);
    expect(done.output).toMatchObject({ copied: 0, skipped: 40 });
    expect(done.customStatus).toEqual({ total: 40, done: 40 });
  });

  it('retries a failed activity after its timer and goes on when the retry succeeds', async () => {
    const history = [...started(), scheduled(0, LIST), episode(), failed(0)];
    const waiting = await replay(history);
    expect(waiting.isDone).toBe(false);
    // The retry: the timer (id 1) fires, the next attempt is task 2 and succeeds.
    history.push(...timer(1), episode(), completed(2, page(['x'])));
    const resumed = await replay(history);
    expect(resumed.isDone).toBe(false);
    expect(flatten(resumed.actions.flat()).map((action) => action.functionName)).toEqual([LIST, COPY]);
    history.push(scheduled(3, COPY), episode(), completed(3, result(['x'])));
    expect((await replay(history)).output).toMatchObject({ copied: 1, keysCopied: ['x'] });
  });

  it('fails the orchestration when an activity fails on every attempt', async () => {
    const history = [
      ...started(),
      scheduled(0, LIST),
      episode(),
      failed(0),
      ...timer(1),
      failed(2),
      ...timer(3),
    ];
    history.push(failed(4), ...timer(5), failed(6), ...timer(7));
    // Four failed attempts: the fifth is still to come.
    expect((await replay(history)).isDone).toBe(false);
    history.push(failed(8), ...timer(9));
    const failure = await replay(history).then(
      () => undefined,
      (error: unknown) => error as Error,
    );
    expect(failure).toBeInstanceOf(Error);
    expect(failure?.message).toContain('the storage is unavailable');
  });

  it("with auditing on, records its start and completion in the target tenant's trail, with ids from the instance id", async () => {
    const audited = { ...input, audit: { tenant: 't1', actor: 'ops' } };
    const AUDIT = 'auditJobEvent';
    const first = await replay(started(), audited);
    expect(flatten(first.actions.flat())).toMatchObject([
      {
        functionName: AUDIT,
        input: {
          id: 'admin.migration.started:i1',
          tenant: 't1',
          action: 'admin.migration.started',
          actor: 'ops',
          subject: 'i1',
          details: { sources: 1, dryRun: false },
        },
      },
    ]);
    const history = [...started(), scheduled(0, AUDIT), episode(), completed(0, { recorded: 'x' })];
    history.push(scheduled(1, LIST), episode(), completed(1, page([], null, 2)));
    const last = await replay(history, audited);
    expect(last.isDone).toBe(false);
    const actions = flatten(last.actions.flat());
    expect(actions.at(-1)).toMatchObject({
      functionName: AUDIT,
      input: { id: 'admin.migration.completed:i1', details: { copied: 0, skipped: 2, errors: 0 } },
    });
    history.push(scheduled(2, AUDIT), episode(), completed(2, { recorded: 'y' }));
    expect((await replay(history, audited)).output).toMatchObject({ copied: 0, skipped: 2 });
  });
});
