import path from 'node:path';

import { beforeAll, describe, expect, it } from 'vitest';

import { loadRegistrations, type Registration } from '../../dev/host/registrations';
import type { RewrapPage } from '../../shared/crypto/rewrap';

/**
 * The registered rewrap orchestrator, run through the real durable-functions library with replayed
 * histories, as the Durable Functions extension calls it (see migrationOrchestrator.test.ts).
 */
const LIST = 'rewrapListTenants';
const PAGE = 'rewrapPage';

interface Action {
  actionType: number;
  functionName: string;
  input: {
    tenant?: string;
    target?: string;
    cursor?: string | null;
    after?: string | null;
    firstKeyId?: string;
  };
  compoundActions?: Action[];
}

interface State {
  isDone: boolean;
  actions: Action[][];
  output?: Record<string, unknown>;
  customStatus?: { tenants: number; examined: number; resealed: number };
}

let orchestrator: Registration;

beforeAll(() => {
  const registrations = loadRegistrations(path.resolve('dist/functions/rewrap.js'));
  const found = registrations.find((registration) => registration.trigger.type === 'orchestrationTrigger');
  if (found === undefined) throw new Error('no orchestration registered');
  orchestrator = found;
});

const input = { firstKeyId: 'k2', keyIds: ['k2', 'k1', 'k0'], targets: ['threads', 'kv'] };
const at = '2026-11-30T20:00:00.000Z';
const started = () => [
  { EventType: 12, EventId: -1, Timestamp: at, IsPlayed: false },
  { EventType: 0, EventId: -1, Timestamp: at, IsPlayed: false, Name: 'rewrapSealedValues' },
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
const episode = () => ({ EventType: 12, EventId: -1, Timestamp: at, IsPlayed: false });

async function replay(history: object[]): Promise<State> {
  const { DummyOrchestrationContext } = await import('durable-functions');
  const payload = { history, input, instanceId: 'r1', isReplaying: true, upperSchemaVersion: 3 };
  return (await orchestrator.handler(payload, new DummyOrchestrationContext())) as State;
}

function flatten(actions: Action[]): Action[] {
  return actions.flatMap((action) => (action.compoundActions ? flatten(action.compoundActions) : [action]));
}

const page = (next: string | null, k1: number, resealed = k1): RewrapPage => ({
  examined: k1 + 1,
  resealed,
  sealedWith: { k1, k2: 1 },
  remaining: resealed < k1 ? { k1: k1 - resealed } : {},
  errors: resealed < k1 ? [['thread.value d/x', 'does not open']] : [],
  next,
});

describe('rewrap orchestrator (replayed histories)', () => {
  it('pages through every tenant and target, re-sealing with the first key, and reports what remains per key id', async () => {
    const history: object[] = [...started()];
    const first = await replay(history);
    expect(flatten(first.actions.flat())).toMatchObject([{ functionName: LIST, input: { after: null } }]);
    history.push(scheduled(0, LIST), episode(), completed(0, { tenants: ['a', 'b'], next: null }));

    const round1 = await replay(history);
    const pages = flatten(round1.actions.flat()).filter((action) => action.functionName === PAGE);
    expect(pages.map((action) => [action.input.tenant, action.input.target, action.input.cursor])).toEqual([
      ['a', 'threads', null],
      ['a', 'kv', null],
      ['b', 'threads', null],
      ['b', 'kv', null],
    ]);
    expect(pages.every((action) => action.input.firstKeyId === 'k2')).toBe(true);
    history.push(scheduled(1, PAGE), scheduled(2, PAGE), scheduled(3, PAGE), scheduled(4, PAGE), episode());
    history.push(
      completed(1, page('cursor-a', 3)),
      completed(2, page(null, 1)),
      completed(3, page(null, 2, 1)),
      completed(4, page(null, 0)),
    );

    const round2 = await replay(history);
    expect(round2.isDone).toBe(false);
    const next = flatten(round2.actions.flat())
      .filter((action) => action.functionName === PAGE)
      .slice(4);
    expect(next.map((action) => [action.input.tenant, action.input.target, action.input.cursor])).toEqual([
      ['a', 'threads', 'cursor-a'],
    ]);
    expect(round2.customStatus).toEqual({ tenants: 0, examined: 10, resealed: 5 });
    history.push(scheduled(5, PAGE), episode(), completed(5, page(null, 4)));

    const done = await replay(history);
    expect(done.isDone).toBe(true);
    expect(done.customStatus).toEqual({ tenants: 2, examined: 15, resealed: 9 });
    expect(done.output).toEqual({
      firstKeyId: 'k2',
      tenants: 2,
      examined: 15,
      resealed: 9,
      sealedWith: { k1: 10, k2: 5 },
      // Every configured key but the first is listed, 0 when nothing is left sealed with it.
      remaining: { k1: 1, k0: 0 },
      errors: [['thread.value d/x', 'does not open']],
    });
  });

  it('follows the tenant registry page by page', async () => {
    const history: object[] = [
      ...started(),
      scheduled(0, LIST),
      episode(),
      completed(0, { tenants: [], next: 'm' }),
    ];
    const next = await replay(history);
    expect(flatten(next.actions.flat()).map((action) => action.input.after)).toEqual([null, 'm']);
    history.push(scheduled(1, LIST), episode(), completed(1, { tenants: [], next: null }));
    const done = await replay(history);
    expect(done.isDone).toBe(true);
    expect(done.output).toMatchObject({ tenants: 0, examined: 0, remaining: { k1: 0, k0: 0 } });
  });
});
