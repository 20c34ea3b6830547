import { randomUUID } from 'node:crypto';

import { CairnClient, Memory, MemoryStateError, RECALL_HEADING } from '@cairn-state/client';
import { type HttpSender, nodeHttpSender } from '@cairn-state/client';
import { CairnGraphMemory } from '@cairn-state/langgraph';
import { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { AIMessage, type BaseMessage, HumanMessage, type ToolMessage } from '@langchain/core/messages';
import type { ChatResult } from '@langchain/core/outputs';
import { Annotation, END, MessagesAnnotation, START, StateGraph } from '@langchain/langgraph';
import { createReactAgent, ToolNode } from '@langchain/langgraph/prebuilt';
import { MemorySaver } from '@langchain/langgraph-checkpoint';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { apiKeysSetting, backendSettings, newTenant, type RunningApp, startApp } from '../support/app';
import { azurite } from '../support/azurite';

/**
 * The agent-side Memory in LangGraph.js graphs against the app over HTTP: `createReactAgent` with
 * the memory's prompt and tools (a stub chat model emitting tool calls), the user from
 * `config.configurable`; and a `StateGraph` of its own with the user in the graph's state. The
 * recall reaches the model's input and never the checkpointed state.
 */

/** A chat model that answers scripted messages, one per call, and keeps the messages of each call. */
class ScriptedChatModel extends BaseChatModel {
  readonly calls: BaseMessage[][] = [];

  constructor(private readonly steps: AIMessage[]) {
    super({});
  }

  _llmType(): string {
    return 'scripted';
  }

  override bindTools(): this {
    return this;
  }

  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    this.calls.push([...messages]);
    const message = this.steps.shift();
    if (message === undefined) throw new Error('the scripted model has no step left');
    return { generations: [{ message, text: message.text }] };
  }
}

const call = (name: string, args: Record<string, unknown>) =>
  new AIMessage({ content: '', tool_calls: [{ id: `call_${name}`, name, args, type: 'tool_call' }] });

const messagesOf = (snapshot: { values: unknown }) =>
  (snapshot.values as { messages: BaseMessage[] }).messages;

const shown = (messages: readonly BaseMessage[]) => messages.map((m) => `${m.getType()}: ${m.text}`);

describe('Memory with LangGraph.js', () => {
  const tenant = newTenant('graph-memory');
  let app: RunningApp;
  let client: CairnClient;
  let requests = 0;

  beforeAll(async () => {
    app = await startApp({
      CAIRN_API_KEYS: apiKeysSetting([tenant]),
      ...backendSettings('local', azurite().blobEndpoint),
    });
    const base = nodeHttpSender();
    const counting: HttpSender = (request) => {
      requests++;
      return base(request);
    };
    client = new CairnClient({ url: app.url, token: tenant.key, send: counting });
  });
  afterAll(async () => {
    await app?.stop();
  });

  it('createReactAgent: remembers, recalls into the model input only, searches and forgets, users apart', async () => {
    const prefix = `users-${randomUUID().slice(0, 8)}`;
    const memory = new CairnGraphMemory(Memory.byState('user_id', prefix), { client });
    const checkpointer = new MemorySaver();
    const agent = (model: ScriptedChatModel) =>
      createReactAgent({
        llm: model,
        tools: memory.tools,
        prompt: memory.prompt('You are a chef.'),
        checkpointer,
      });
    const config = (thread: string, user?: string | number) => ({
      configurable: { thread_id: `${prefix}-${thread}`, ...(user === undefined ? {} : { user_id: user }) },
    });

    const first = new ScriptedChatModel([
      call('remember', { text: 'The user is vegetarian.', key: 'diet' }),
      new AIMessage('Noted.'),
    ]);
    await agent(first).invoke({ messages: [new HumanMessage('I never eat meat.')] }, config('a', '42'));
    expect((await client.memory.recall(`${prefix}/42`, 'diet'))?.value).toBe('The user is vegetarian.');

    const second = new ScriptedChatModel([new AIMessage('How about a mushroom risotto?')]);
    await agent(second).invoke({ messages: [new HumanMessage('Suggest a dinner.')] }, config('a', '42'));
    const input = shown(second.calls[0] ?? []);
    expect(input.slice(0, 3)).toEqual([
      'system: You are a chef.',
      `system: ${RECALL_HEADING}\n- diet: "The user is vegetarian."`,
      'human: I never eat meat.',
    ]);
    expect(input.at(-1)).toBe('human: Suggest a dinner.');
    // The checkpointed conversation has every turn and no recall.
    const state = shown(messagesOf(await agent(second).getState(config('a', '42'))));
    expect(state).toContain('human: Suggest a dinner.');
    expect(state).toContain('ai: How about a mushroom risotto?');
    expect(state.filter((line) => line.includes(RECALL_HEADING) || line.startsWith('system'))).toEqual([]);

    // Another user, on a new thread: no recall.
    const stranger = new ScriptedChatModel([new AIMessage('Any preferences?')]);
    await agent(stranger).invoke({ messages: [new HumanMessage('Suggest a dinner.')] }, config('b', 7));
    expect(shown(stranger.calls[0] ?? [])).toEqual(['system: You are a chef.', 'human: Suggest a dinner.']);

    // search_memory, then forget: the fact is gone and the last call recalls nothing.
    const cleanup = new ScriptedChatModel([
      call('search_memory', { query: 'vegetarian' }),
      call('forget', { key: 'diet' }),
      new AIMessage('Forgotten.'),
    ]);
    const result = await agent(cleanup).invoke(
      { messages: [new HumanMessage('Forget my diet.')] },
      config('c', 42),
    );
    const tools = result.messages.filter((m): m is ToolMessage => m.getType() === 'tool');
    expect(JSON.parse(tools[0]?.text ?? '')).toEqual({
      facts: [{ key: 'diet', value: 'The user is vegetarian.' }],
      searchedBy: 'keywords',
    });
    expect(JSON.parse(tools[1]?.text ?? '')).toEqual({ forgotten: true, key: 'diet' });
    expect(await client.memory.recall(`${prefix}/42`, 'diet')).toBeNull();
    expect(shown(cleanup.calls[2] ?? []).some((line) => line.includes(RECALL_HEADING))).toBe(false);
  });

  it('refuses an invocation without the state key before any request or model call', async () => {
    const memory = new CairnGraphMemory(Memory.byState('user_id', `users-${randomUUID().slice(0, 8)}`), {
      client,
    });
    const model = new ScriptedChatModel([new AIMessage('never asked')]);
    const agent = createReactAgent({ llm: model, tools: memory.tools, prompt: memory.prompt() });
    const before = requests;
    const failed = agent.invoke(
      { messages: [new HumanMessage('Suggest a dinner.')] },
      { configurable: { user_id: ['42'] } },
    );
    await expect(failed).rejects.toBeInstanceOf(MemoryStateError);
    await expect(failed).rejects.toMatchObject({ code: 'invalid_state', field: 'user_id' });
    expect(requests).toBe(before);
    expect(model.calls).toHaveLength(0);
  });

  it('a StateGraph of its own: the user in the graph state, modelInput in the model node, the tools in a ToolNode', async () => {
    const prefix = `people-${randomUUID().slice(0, 8)}`;
    const memory = new CairnGraphMemory(Memory.byState('user_id', prefix), { client });
    const model = new ScriptedChatModel([
      call('remember', { text: 'Prefers tea to coffee.' }),
      new AIMessage('Tea it is.'),
    ]);
    const State = Annotation.Root({ ...MessagesAnnotation.spec, user_id: Annotation<string>() });
    const graph = new StateGraph(State)
      .addNode('model', async (state, config) => ({
        messages: [await model.invoke(await memory.modelInput(state.messages, state, config))],
      }))
      .addNode('tools', new ToolNode(memory.tools))
      .addEdge(START, 'model')
      .addConditionalEdges('model', (state) =>
        ((state.messages.at(-1) as AIMessage | undefined)?.tool_calls?.length ?? 0) > 0 ? 'tools' : END,
      )
      .addEdge('tools', 'model')
      .compile({ checkpointer: new MemorySaver() });
    const config = { configurable: { thread_id: prefix } };

    await graph.invoke({ messages: [new HumanMessage('I like tea.')], user_id: 'ada' }, config);
    const { items } = await client.memory.search(`${prefix}/ada`);
    expect(items.map((fact) => fact.value)).toEqual(['Prefers tea to coffee.']);
    expect(items[0]?.key).toMatch(/^fact-[0-9a-f]{16}$/);
    expect(shown(model.calls[1] ?? [])[0]).toBe(
      `system: ${RECALL_HEADING}\n- ${items[0]?.key}: "Prefers tea to coffee."`,
    );
    const state = shown(messagesOf(await graph.getState(config)));
    expect(state.some((line) => line.includes(RECALL_HEADING))).toBe(false);
  });
});
