import { readFileSync } from 'node:fs';
import path from 'node:path';

import { CairnClient } from '@cairn-state/client';
import { CairnCheckpointSaver } from '@cairn-state/langgraph';
import { AIMessage, type BaseMessage, HumanMessage } from '@langchain/core/messages';
import type { RunnableConfig } from '@langchain/core/runnables';
import {
  Command,
  END,
  interrupt,
  MessagesAnnotation,
  START,
  StateGraph,
  type StateSnapshot,
} from '@langchain/langgraph';
import type { BaseCheckpointSaver } from '@langchain/langgraph-checkpoint';
import { MemorySaver } from '@langchain/langgraph-checkpoint';
import { afterEach, describe, expect, it } from 'vitest';

import { tempDir } from '../support/cleanup';
import { startNpmStart, stopNpmStarts } from '../support/npmStart';

/**
 * A real LangGraph.js `StateGraph` (messages reducer, an `interrupt()` resumed with `Command`, a
 * time-travel fork with `updateState`) checkpointed by `CairnCheckpointSaver` against `npm start`,
 * on both backends `npm start` offers. The same conversation also runs on LangGraph's `MemorySaver`:
 * Cairn must give the same states, pending interrupts and history (checkpoint by checkpoint).
 */
afterEach(stopNpmStarts);

const text = (message: BaseMessage) => `${message.getType()}: ${message.text}`;

/** A stub assistant (no model) that echoes the last message, then a human review of its draft. */
function buildGraph(checkpointer: BaseCheckpointSaver) {
  return new StateGraph(MessagesAnnotation)
    .addNode('assistant', (state) => ({
      messages: [new AIMessage(`echo: ${state.messages.at(-1)?.text ?? ''}`)],
    }))
    .addNode('review', (state) => {
      const draft = state.messages.at(-1)?.text ?? '';
      const verdict = interrupt<{ draft: string }, string>({ draft });
      return { messages: [new AIMessage(`${verdict}: ${draft}`)] };
    })
    .addEdge(START, 'assistant')
    .addEdge('assistant', 'review')
    .addEdge('review', END)
    .compile({ checkpointer });
}

/** What a state shows, without the random parts (checkpoint and message ids, times). */
function shape(snapshot: StateSnapshot, ids: readonly (string | undefined)[]) {
  const parentId = snapshot.parentConfig?.configurable?.['checkpoint_id'] as string | undefined;
  return {
    source: snapshot.metadata?.source,
    step: snapshot.metadata?.step,
    next: snapshot.next,
    messages: ((snapshot.values as { messages?: BaseMessage[] }).messages ?? []).map(text),
    interrupts: snapshot.tasks.flatMap((task) => task.interrupts.map((pending) => pending.value as unknown)),
    // The parent by its place in the history (ids differ between savers).
    parent: parentId === undefined ? null : ids.indexOf(parentId),
  };
}

async function historyOf(
  graph: ReturnType<typeof buildGraph>,
  config: RunnableConfig,
): Promise<StateSnapshot[]> {
  const history: StateSnapshot[] = [];
  for await (const snapshot of graph.getStateHistory(config)) history.push(snapshot);
  return history;
}

/** Two turns, each interrupted for review and resumed, then a fork that edits the second question. */
async function converse(checkpointer: BaseCheckpointSaver) {
  const graph = buildGraph(checkpointer);
  const config = { configurable: { thread_id: 'conv-1' } };

  const first = await graph.invoke({ messages: [new HumanMessage('hello')] }, config);
  const waiting = await graph.getState(config);
  await graph.invoke(new Command({ resume: 'approved' }), config);
  await graph.invoke({ messages: [new HumanMessage('how are you?')] }, config);
  const secondDone = await graph.invoke(new Command({ resume: 'approved' }), config);
  const oldTip = await graph.getState(config);

  // Time travel: back to the moment before the assistant answered the second question, edit that
  // question (same message id: the reducer replaces it), and run on from there.
  const before = (await historyOf(graph, config)).find(
    (snapshot) =>
      snapshot.next.join() === 'assistant' &&
      (snapshot.values as { messages: BaseMessage[] }).messages.at(-1)?.content === 'how are you?',
  );
  if (before === undefined) throw new Error('no checkpoint before the second answer');
  const question = (before.values as { messages: BaseMessage[] }).messages.at(-1)!;
  const forkConfig = await graph.updateState(before.config, {
    messages: [new HumanMessage({ content: 'tell me a joke', id: question.id! })],
  });
  const forked = await graph.invoke(null, forkConfig);
  const final = await graph.invoke(new Command({ resume: 'rejected' }), config);

  const history = await historyOf(graph, config);
  const ids = history.map(
    (snapshot) => snapshot.config.configurable?.['checkpoint_id'] as string | undefined,
  );
  const oldTipId = oldTip.config.configurable?.['checkpoint_id'] as string;
  const oldBranch = await graph.getState({ configurable: { thread_id: 'conv-1', checkpoint_id: oldTipId } });
  return {
    firstInterrupt: (first as { __interrupt__?: { value: unknown }[] }).__interrupt__?.map((i) => i.value),
    waiting: shape(waiting, ids),
    secondDone: secondDone.messages.map(text),
    forkInterrupt: (forked as { __interrupt__?: { value: unknown }[] }).__interrupt__?.map((i) => i.value),
    final: final.messages.map(text),
    latest: shape(await graph.getState(config), ids),
    oldBranch: shape(oldBranch, ids),
    history: history.map((snapshot) => shape(snapshot, ids)),
  };
}

describe.each([
  ['embedded defaults (local backend)', {}],
  ['only CAIRN_BLOB_CONTAINER set (Blob backend)', { CAIRN_BLOB_CONTAINER: 'cairn' }],
] as const)('a LangGraph StateGraph under npm start with %s', (_name, env) => {
  it('keeps messages, interrupts, resumes and a time-travel fork as MemorySaver does', async () => {
    const cwd = tempDir('langgraph');
    const { url } = await startNpmStart(cwd, env);
    const token = readFileSync(path.join(cwd, '.cairn', 'dev-api-key'), 'utf8').trim();
    const saver = new CairnCheckpointSaver({ url: `${url}/api`, token, scope: 'graph-test' });

    const cairn = await converse(saver);
    const memory = await converse(new MemorySaver());

    expect(cairn.firstInterrupt).toEqual([{ draft: 'echo: hello' }]);
    expect(cairn.waiting).toMatchObject({
      next: ['review'],
      messages: ['human: hello', 'ai: echo: hello'],
      interrupts: [{ draft: 'echo: hello' }],
    });
    expect(cairn.secondDone).toEqual([
      'human: hello',
      'ai: echo: hello',
      'ai: approved: echo: hello',
      'human: how are you?',
      'ai: echo: how are you?',
      'ai: approved: echo: how are you?',
    ]);
    expect(cairn.forkInterrupt).toEqual([{ draft: 'echo: tell me a joke' }]);
    const forkedMessages = [
      'human: hello',
      'ai: echo: hello',
      'ai: approved: echo: hello',
      'human: tell me a joke',
      'ai: echo: tell me a joke',
      'ai: rejected: echo: tell me a joke',
    ];
    expect(cairn.final).toEqual(forkedMessages);
    expect(cairn.latest).toMatchObject({ next: [], messages: forkedMessages, interrupts: [] });
    // The abandoned branch stays readable as it was.
    expect(cairn.oldBranch.messages).toEqual(cairn.secondDone);
    // Both branches are in the history; the fork's first checkpoint names its parent before the edit.
    const updates = cairn.history.filter((snapshot) => snapshot.source === 'update');
    expect(updates).toHaveLength(1);
    expect(cairn.history[updates[0]!.parent!]).toMatchObject({
      source: 'loop',
      next: ['assistant'],
      messages: [...cairn.secondDone.slice(0, 3), 'human: how are you?'],
    });
    expect(cairn.history.length).toBeGreaterThan(10);
    expect(cairn).toEqual(memory);

    // Stored in Cairn, under the scope's name for the thread.
    const client = new CairnClient({ url: `${url}/api`, token });
    expect(await client.threads.listPage({ prefix: 'graph-test.' })).toEqual({
      threads: ['graph-test.conv-1'],
      next: null,
    });
  });
});
