import { CairnClient, type HttpSender, nodeHttpSender } from '@cairn-state/client';
import { CairnCheckpointSaver } from '@cairn-state/langgraph';
import { AIMessage, type BaseMessage, HumanMessage } from '@langchain/core/messages';
import type { RunnableConfig } from '@langchain/core/runnables';
import {
  Annotation,
  type BinaryOperatorAggregate,
  DeltaChannel,
  END,
  type Messages,
  messagesDeltaReducer,
  START,
  StateGraph,
} from '@langchain/langgraph';
import { type BaseCheckpointSaver, MemorySaver } from '@langchain/langgraph-checkpoint';
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
 * A real LangGraph.js `StateGraph` whose messages channel is a `DeltaChannel` (LangGraph stores
 * only each step's writes to it, and rebuilds the value from the ancestors' writes through
 * `getDeltaChannelHistory`), checkpointed by `CairnCheckpointSaver` against the real app over HTTP
 * on both backends. In that mode LangGraph sends a step's pending writes before the put of their
 * checkpoint. The same turns also run on `MemorySaver`: Cairn must give the same states.
 */

const text = (message: BaseMessage) => `${message.getType()}: ${message.text}`;

function buildGraph(checkpointer: BaseCheckpointSaver) {
  const State = Annotation.Root({
    // A snapshot only every 1,000 updates: every turn here is rebuilt from the writes.
    // (Typed as the messages reducer's channel, which takes and gives the same.)
    messages: new DeltaChannel(messagesDeltaReducer, {
      snapshotFrequency: 1000,
    }) as unknown as BinaryOperatorAggregate<BaseMessage[], Messages>,
  });
  return new StateGraph(State)
    .addNode('assistant', (state: { messages: BaseMessage[] }) => ({
      messages: [new AIMessage(`echo ${state.messages.length}: ${state.messages.at(-1)?.text ?? ''}`)],
    }))
    .addEdge(START, 'assistant')
    .addEdge('assistant', END)
    .compile({ checkpointer });
}

type Graph = ReturnType<typeof buildGraph>;

async function messagesOf(graph: Graph, config: RunnableConfig): Promise<string[]> {
  const state = await graph.getState(config);
  return ((state.values as { messages?: BaseMessage[] }).messages ?? []).map(text);
}

/** An HTTP sender that counts the requests it sends. */
function countingSender(): { send: HttpSender; count: () => number } {
  const inner = nodeHttpSender();
  let requests = 0;
  return {
    send: (spec) => {
      requests += 1;
      return inner(spec);
    },
    count: () => requests,
  };
}

async function converse(saverOf: () => BaseCheckpointSaver, threadId: string) {
  const config = { configurable: { thread_id: threadId } };
  const first = buildGraph(saverOf());
  for (const question of ['one', 'two', 'three']) {
    await first.invoke({ messages: [new HumanMessage(question)] }, config);
  }
  // A fresh graph on a fresh saver: the conversation comes back from storage alone.
  const second = buildGraph(saverOf());
  const resumed = await messagesOf(second, config);
  await second.invoke({ messages: [new HumanMessage('four')] }, config);
  const afterFour = await messagesOf(second, config);
  // Time travel: back to the state right after the second answer, then a new branch from there.
  const history = [];
  for await (const snapshot of second.getStateHistory(config)) history.push(snapshot);
  const afterTwo = history.find(
    (snapshot) =>
      (snapshot.values as { messages?: BaseMessage[] }).messages?.length === 4 && snapshot.next.length === 0,
  );
  if (afterTwo === undefined) throw new Error('no checkpoint after the second answer');
  const past = await messagesOf(second, afterTwo.config);
  await second.invoke({ messages: [new HumanMessage('branch')] }, afterTwo.config);
  const branched = await messagesOf(second, config);
  return { resumed, afterFour, past, branched, checkpoints: history.length };
}

describe.each<Backend>(['local', 'blob'])('a DeltaChannel graph on the %s backend', (backend) => {
  const tenant = newTenant('delta');
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
    await app?.stop();
  });

  it('runs turns, resumes on a fresh graph and time-travels, as MemorySaver does', async () => {
    const memory = new MemorySaver();
    const expected = await converse(() => memory, 'delta-1');
    const got = await converse(
      () => new CairnCheckpointSaver({ client, scope: `delta-${backend}` }),
      'delta-1',
    );
    expect(expected.resumed).toEqual([
      'human: one',
      'ai: echo 1: one',
      'human: two',
      'ai: echo 3: two',
      'human: three',
      'ai: echo 5: three',
    ]);
    expect(expected.branched.slice(-2)).toEqual(['human: branch', 'ai: echo 5: branch']);
    expect(got).toEqual(expected);
  });

  it('rebuilds a long conversation in a bounded number of requests', async () => {
    const scope = `delta-count-${backend}`;
    const config = { configurable: { thread_id: 'long' } };
    const writer = buildGraph(new CairnCheckpointSaver({ client, scope }));
    for (let turn = 0; turn < 8; turn++) {
      await writer.invoke({ messages: [new HumanMessage(`q${turn}`)] }, config);
    }
    const counter = countingSender();
    const reader = new CairnCheckpointSaver({
      url: `${app.url}/api`,
      token: tenant.key,
      scope,
      send: counter.send,
    });
    const messages = await messagesOf(buildGraph(reader), config);
    expect(messages).toHaveLength(16);
    expect(messages.at(-1)).toBe('ai: echo 15: q7');
    // 8 turns are 24 checkpoints: one getTuple per ancestor would be 24 requests or more.
    expect(counter.count()).toBeLessThanOrEqual(4);
  });
});
