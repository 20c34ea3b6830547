import { setTimeout as sleep } from 'node:timers/promises';

import { CairnClient, CairnHttpError, type HttpSender, nodeHttpSender } from '@cairn-state/client';
import { CairnCheckpointSaver, decodeName, encodeName } from '@cairn-state/langgraph';
import { AIMessage, type BaseMessage, HumanMessage } from '@langchain/core/messages';
import type { RunnableConfig } from '@langchain/core/runnables';
import { MessagesAnnotation, START, StateGraph } from '@langchain/langgraph';
import { type Checkpoint, emptyCheckpoint, uuid6 } from '@langchain/langgraph-checkpoint';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import {
  apiKeysSetting,
  type Backend,
  backendSettings,
  newTenant,
  type RunningApp,
  startApp,
} from '../support/app';
import { azurite } from '../support/azurite';

/**
 * `CairnCheckpointSaver` beyond LangGraph's conformance suite, against the real app over HTTP on
 * both backends: how thread ids become Cairn names, scopes kept apart, a put that sends only the
 * changed channels, and a saver bound to a run that lost its thread being refused with nothing
 * stored.
 */

function checkpointWith(values: Record<string, unknown>, versions: Record<string, number>): Checkpoint {
  return { ...emptyCheckpoint(), id: uuid6(0), channel_values: values, channel_versions: versions };
}

const meta = { source: 'loop' as const, step: 0, parents: {} };

async function rejection(promise: Promise<unknown>): Promise<CairnHttpError> {
  const error = await promise.then(
    () => new Error('expected a refusal'),
    (reason: unknown) => reason,
  );
  expect(error).toBeInstanceOf(CairnHttpError);
  return error as CairnHttpError;
}

describe('thread names', () => {
  it('encode any thread id reversibly in [A-Za-z0-9_-], without a dot', () => {
    for (const id of ['conv-42', 'user.42/ü', '_41', 'a b\u0000c', '😀', '..', 'x'.repeat(40)]) {
      const encoded = encodeName(id);
      expect(encoded).toMatch(/^[A-Za-z0-9_-]*$/);
      expect(decodeName(encoded)).toBe(id);
    }
    expect(encodeName('user.42')).toBe('user_2E42');
    // Only the canonical encoding decodes: no two names stand for one thread id.
    expect(decodeName('_41')).toBeNull();
    expect(decodeName('a.b')).toBeNull();
    expect(decodeName('_2e')).toBeNull();
  });
});

describe.each<Backend>(['local', 'blob'])('CairnCheckpointSaver on the %s backend', (backend) => {
  const tenant = newTenant('saver');
  let app: RunningApp;
  let client: CairnClient;

  beforeAll(async () => {
    app = await startApp({
      CAIRN_API_KEYS: apiKeysSetting([tenant]),
      ...backendSettings(backend, azurite().blobEndpoint),
    });
    client = new CairnClient({ url: `${app.url}/api`, token: tenant.key });
  });
  afterAll(async () => {
    await app.stop();
  });

  it('keeps scopes apart: the same thread id is a different thread in each, and list covers its own', async () => {
    const alpha = new CairnCheckpointSaver({ client, scope: 'alpha' });
    const beta = new CairnCheckpointSaver({ client, scope: 'alpha.beta' });
    const plain = new CairnCheckpointSaver({ client });
    const threadIds = ['shared', 'user.42/ü'];
    for (const [saver, word] of [
      [alpha, 'a'],
      [beta, 'b'],
      [plain, 'p'],
    ] as const) {
      for (const threadId of threadIds) {
        await saver.put(
          { configurable: { thread_id: threadId } },
          checkpointWith({ word }, { word: 1 }),
          meta,
          {
            word: 1,
          },
        );
      }
    }
    expect(alpha.threadName('user.42/ü')).toBe('alpha.user_2E42_2F_C3_BC');
    expect(beta.threadName('shared')).toBe('alpha_2Ebeta.shared');
    expect(plain.threadName('shared')).toBe('shared');

    for (const [saver, word] of [
      [alpha, 'a'],
      [beta, 'b'],
      [plain, 'p'],
    ] as const) {
      for (const threadId of threadIds) {
        const tuple = await saver.getTuple({ configurable: { thread_id: threadId } });
        expect(tuple?.checkpoint.channel_values).toEqual({ word });
        expect(tuple?.config.configurable).toMatchObject({ thread_id: threadId, checkpoint_ns: '' });
      }
      const listed = [];
      for await (const tuple of saver.list({})) listed.push(tuple);
      // Thread ids come back decoded, and only this scope's.
      expect(listed.map((tuple) => tuple.config.configurable?.['thread_id'] as string).sort()).toEqual(
        threadIds,
      );
      expect(listed.map((tuple) => tuple.checkpoint.channel_values)).toEqual([{ word }, { word }]);
    }

    await alpha.deleteThread('shared');
    expect(await alpha.getTuple({ configurable: { thread_id: 'shared' } })).toBeUndefined();
    expect(await beta.getTuple({ configurable: { thread_id: 'shared' } })).toBeDefined();
    expect(await plain.getTuple({ configurable: { thread_id: 'shared' } })).toBeDefined();
    // Deleting a thread that is not there is no error.
    await alpha.deleteThread('shared');
  });

  it('refuses, before sending anything, a thread id that has no Cairn name', async () => {
    const saver = new CairnCheckpointSaver({ client, scope: 'long' });
    const tooLong = 'é'.repeat(30); // 30 × "_C3_A9" = 180 characters
    await expect(
      saver.put({ configurable: { thread_id: tooLong } }, checkpointWith({}, {}), meta, {}),
    ).rejects.toThrow(TypeError);
    await expect(saver.getTuple({ configurable: { thread_id: 42 } })).rejects.toThrow(TypeError);
    expect(await client.threads.listPage({ prefix: 'long.' })).toEqual({ threads: [], next: null });
  });

  it('stores only the channels in newVersions: an unchanged channel keeps the value stored before', async () => {
    // The puts as sent: which channels carry a value.
    const sentValues: string[][] = [];
    const http = nodeHttpSender();
    const send: HttpSender = async (request) => {
      if (request.method === 'POST' && /\/checkpoints$/.test(new URL(request.url).pathname)) {
        const body = JSON.parse(request.body!.toString()) as { values: Record<string, unknown> };
        sentValues.push(Object.keys(body.values).sort());
      }
      return http(request);
    };
    const saver = new CairnCheckpointSaver({
      url: `${app.url}/api`,
      token: tenant.key,
      send,
      scope: 'delta',
    });
    const first = checkpointWith({ big: 'x'.repeat(1000), small: 1 }, { big: 1, small: 1 });
    const config = await saver.put({ configurable: { thread_id: 't' } }, first, meta, { big: 1, small: 1 });
    const second = checkpointWith({ big: 'x'.repeat(1000), small: 2 }, { big: 1, small: 2 });
    await saver.put(config, second, { ...meta, step: 1 }, { small: 2 });
    expect(sentValues).toEqual([['big', 'small'], ['small']]);

    const stored = await client.threads.getCheckpoint(saver.threadName('t'));
    expect(stored?.values['small']).toBeDefined();
    // The latest checkpoint reads `big` from the first one: it was sent and stored once.
    const history = [];
    for await (const checkpoint of client.threads.history(saver.threadName('t'))) history.push(checkpoint);
    expect(history.map((checkpoint) => checkpoint.checkpointId)).toEqual([second.id, first.id]);
    const tuple = await saver.getTuple({ configurable: { thread_id: 't' } });
    expect(tuple?.checkpoint.channel_values).toEqual({ big: 'x'.repeat(1000), small: 2 });
    expect(tuple?.parentConfig?.configurable?.['checkpoint_id']).toBe(first.id);
  });

  it('refuses the writes of a saver whose run was interrupted (409 run_fenced) and stores nothing', async () => {
    const threadId = 'fenced';
    const scope = 'runs';
    const name = new CairnCheckpointSaver({ client, scope }).threadName(threadId);
    const first = await client.threads.startRun(name, { onBusy: 'reject' });
    const bound = new CairnCheckpointSaver({ client, scope, runId: first.runId });
    const config = await bound.put(
      { configurable: { thread_id: threadId } },
      checkpointWith({ n: 1 }, { n: 1 }),
      meta,
      {
        n: 1,
      },
    );
    await bound.putWrites(config, [['n', 2]], 'task-1', '~step');
    // Without the run, no one else may write while it holds the thread.
    const unbound = new CairnCheckpointSaver({ client, scope });
    const busy = await rejection(
      unbound.put(config, checkpointWith({ n: 3 }, { n: 2 }), { ...meta, step: 1 }, { n: 2 }),
    );
    expect([busy.status, busy.code]).toEqual([409, 'thread_busy']);

    const second = await client.threads.startRun(name, { onBusy: 'interrupt' });
    expect(second.interrupted).toBe(first.runId);
    const fencedPut = await rejection(
      bound.put(config, checkpointWith({ n: 3 }, { n: 2 }), { ...meta, step: 1 }, { n: 2 }),
    );
    expect([fencedPut.status, fencedPut.code, fencedPut.details['status']]).toEqual([
      409,
      'run_fenced',
      'interrupted',
    ]);
    const fencedWrites = await rejection(bound.putWrites(config, [['n', 9]], 'task-2'));
    expect([fencedWrites.status, fencedWrites.code]).toEqual([409, 'run_fenced']);

    // Nothing of the fenced run is visible: the head and its writes are as before.
    const latest = await unbound.getTuple({ configurable: { thread_id: threadId } });
    expect(latest?.config.configurable?.['checkpoint_id']).toBe(config.configurable?.['checkpoint_id']);
    expect(latest?.pendingWrites).toEqual([['task-1', 'n', 2]]);
    let count = 0;
    for await (const tuple of unbound.list({ configurable: { thread_id: threadId } })) count += tuple ? 1 : 0;
    expect(count).toBe(1);

    // The run that holds the thread writes on, and after it finishes anyone may.
    const holder = new CairnCheckpointSaver({ client, scope, runId: second.runId });
    await holder.put(config, checkpointWith({ n: 3 }, { n: 2 }), { ...meta, step: 1 }, { n: 2 });
    await client.threads.finishRun(name, second.runId, 'finished');
    await unbound.deleteThread(threadId);
  });

  it("loses no write of a step whose checkpoint's put is slow, and sends writes at once, also while their checkpoint's put is on its way", async () => {
    // Every checkpoint put is answered 300 ms late; LangGraph (durability "async") asks for the
    // step's writes meanwhile. The service takes writes before their checkpoint is stored, and the
    // saver sends them without waiting for the put of their checkpoint.
    const events: string[] = [];
    const http = nodeHttpSender();
    const send: HttpSender = async (request) => {
      const put = /\/checkpoints$/.test(new URL(request.url).pathname) && request.method === 'POST';
      const id = put
        ? (JSON.parse(request.body!.toString()) as { checkpointId: string }).checkpointId
        : undefined;
      const writes = /\/checkpoints\/([^/]+)\/writes$/.exec(new URL(request.url).pathname)?.[1];
      if (writes !== undefined) events.push(`writes sent ${writes}`);
      if (id !== undefined) events.push(`put sent ${id}`);
      const reply = await http(request);
      if (id !== undefined) {
        await sleep(300);
        events.push(`put answered ${id}`);
      }
      return reply;
    };
    const saver = new CairnCheckpointSaver({ url: `${app.url}/api`, token: tenant.key, send, scope: 'slow' });
    const putWrites = saver.putWrites.bind(saver);
    saver.putWrites = (config, writes, taskId, taskPath) => {
      events.push(`writes asked ${String(config.configurable?.['checkpoint_id'])}`);
      return putWrites(config, writes, taskId, taskPath);
    };
    const graph = new StateGraph(MessagesAnnotation)
      .addNode('assistant', (state) => ({
        messages: [new AIMessage(`echo: ${state.messages.at(-1)?.text ?? ''}`)],
      }))
      .addEdge(START, 'assistant')
      .compile({ checkpointer: saver });
    const config = { configurable: { thread_id: 'slow' } };
    await graph.invoke({ messages: [new HumanMessage('one')] }, config);
    const answer = await graph.invoke({ messages: [new HumanMessage('two')] }, config);
    expect(answer.messages.map((message) => message.text)).toEqual(['one', 'echo: one', 'two', 'echo: two']);

    const asked = events.filter((event) => event.startsWith('writes asked'));
    expect(asked.length).toBeGreaterThan(0);
    // LangGraph asked before the put was answered at least once; every write asked was sent.
    expect(
      asked.some((event) => {
        const id = event.slice('writes asked '.length);
        return events.indexOf(event) < events.indexOf(`put answered ${id}`);
      }),
    ).toBe(true);
    expect(events.filter((event) => event.startsWith('writes sent'))).toHaveLength(asked.length);
    // Writes to a checkpoint whose put was on its way went before that put was answered.
    expect(
      events.some((event) => {
        if (!event.startsWith('writes sent ')) return false;
        const id = event.slice('writes sent '.length);
        const at = events.indexOf(event);
        return events.indexOf(`put sent ${id}`) < at && at < events.indexOf(`put answered ${id}`);
      }),
      events.join('\n'),
    ).toBe(true);
    // A saver that never saw these puts reads the whole conversation back.
    const fresh = new StateGraph(MessagesAnnotation)
      .addNode('assistant', () => ({ messages: [] }))
      .addEdge(START, 'assistant')
      .compile({ checkpointer: new CairnCheckpointSaver({ client, scope: 'slow' }) });
    const state = await fresh.getState(config);
    expect((state.values as { messages: BaseMessage[] }).messages.map((message) => message.text)).toEqual([
      'one',
      'echo: one',
      'two',
      'echo: two',
    ]);
  });

  it('runs a graph through a saver bound to a run, and fails it once the run is interrupted', async () => {
    const scope = 'graph-runs';
    const name = new CairnCheckpointSaver({ client, scope }).threadName('chat');
    const run = await client.threads.startRun(name, { onBusy: 'reject', leaseSeconds: 60 });
    const saver = new CairnCheckpointSaver({ client, scope, runId: run.runId });
    const graph = new StateGraph(MessagesAnnotation)
      .addNode('assistant', (state) => ({
        messages: [new AIMessage(`echo: ${state.messages.at(-1)?.text ?? ''}`)],
      }))
      .addEdge(START, 'assistant')
      .compile({ checkpointer: saver });
    const config: RunnableConfig = { configurable: { thread_id: 'chat' } };
    const answer = await graph.invoke({ messages: [new HumanMessage('hi')] }, config);
    expect(answer.messages.map((message) => message.content)).toEqual(['hi', 'echo: hi']);

    await client.threads.startRun(name, { onBusy: 'interrupt' });
    const failed = await rejection(graph.invoke({ messages: [new HumanMessage('again')] }, config));
    expect([failed.status, failed.code]).toEqual([409, 'run_fenced']);
    const state = await graph.getState(config);
    const messages = (state.values as { messages: BaseMessage[] }).messages;
    expect(messages.map((message) => message.content)).toEqual(['hi', 'echo: hi']);
  });
});
