import { randomUUID } from 'node:crypto';

import {
  AgentMemory,
  CairnClient,
  type EmbeddingsLike,
  Memory,
  MemoryStateError,
  RECALL_HEADING,
} from '@cairn-state/client';
import { type HttpSender, nodeHttpSender } from '@cairn-state/client';
import { CairnAgentsMemory, CairnSession } from '@cairn-state/openai-agents';
import { Agent, type Model, type ModelRequest, Runner, setTracingDisabled } from '@openai/agents';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { apiKeysSetting, backendSettings, newTenant, type RunningApp, startApp } from '../support/app';
import { azurite } from '../support/azurite';
import { reply, ScriptedModel, toolCall, toolOutput } from '../support/scriptedModel';

/**
 * The agent-side Memory in the OpenAI Agents SDK's own run loop (`Runner.run` with a stub model)
 * against the app over HTTP: the remember tool saves into the run's user namespace, a later run's
 * model request carries the fact in the marked system block while the session never holds it,
 * users are apart, a run without its user is refused before any request, and semantic recall
 * finds by meaning and falls back to keywords when the embedder fails.
 */

/** The tool call's output, parsed. */
const toolResult = (request: ModelRequest, callId: string) =>
  JSON.parse(toolOutput(request, callId)) as Record<string, unknown>;

/**
 * A deterministic embedder "by meaning": words of one topic share a dimension (so `cook` is close
 * to `meat`), any other word gets a dimension of its own by hash.
 */
class TopicEmbeddings implements EmbeddingsLike {
  static readonly FOOD = new Set(['cook', 'meat', 'fish', 'vegetarian', 'meal', 'recipe', 'eat']);

  async embedQuery(text: string): Promise<number[]> {
    const vector = new Array<number>(64).fill(0);
    for (const word of text.toLowerCase().match(/[a-z]+/g) ?? []) {
      let hash = 7;
      for (const char of word) hash = (hash * 31 + char.charCodeAt(0)) % 1_000_003;
      vector[TopicEmbeddings.FOOD.has(word) ? 0 : 1 + (hash % 63)]! += 1;
    }
    return vector;
  }

  async embedDocuments(texts: string[]): Promise<number[][]> {
    return Promise.all(texts.map((text) => this.embedQuery(text)));
  }
}

class BrokenEmbeddings implements EmbeddingsLike {
  async embedQuery(): Promise<number[]> {
    throw new Error('the embedding service is down');
  }
  async embedDocuments(): Promise<number[][]> {
    throw new Error('the embedding service is down');
  }
}

describe('Memory with the OpenAI Agents SDK', () => {
  const tenant = newTenant('agents-memory');
  let app: RunningApp;
  let client: CairnClient;
  let requests = 0;

  beforeAll(async () => {
    setTracingDisabled(true);
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

  const agent = (memory: CairnAgentsMemory) =>
    new Agent({ name: 'chef', instructions: 'You are a chef.', tools: memory.tools });
  const runner = (model: Model) => new Runner({ modelProvider: { getModel: () => model } });

  it('remembers in one run, recalls in the marked system block in the next, never in the session, and keeps users apart', async () => {
    const prefix = `users-${randomUUID().slice(0, 8)}`;
    const memory = new CairnAgentsMemory(Memory.byState('user_id', prefix, { ttl: 3600 }), { client });
    const session = new CairnSession({ client, sessionId: `chat ${randomUUID()}` });
    const options = {
      context: { user_id: '42' },
      callModelInputFilter: memory.callModelInputFilter,
      session,
    };

    const first = new ScriptedModel([
      toolCall('remember', { text: 'The user is vegetarian.', key: 'diet' }),
      reply('Noted.'),
    ]);
    const saved = await runner(first).run(agent(memory), 'I never eat meat.', options);
    expect(saved.finalOutput).toBe('Noted.');
    expect(first.requests[0]?.tools.map((t) => t.name)).toEqual(['remember', 'forget', 'search_memory']);
    expect(toolResult(first.requests[1] as ModelRequest, 'call_remember')).toMatchObject({
      saved: true,
      key: 'diet',
    });
    const fact = await client.memory.recall(`${prefix}/42`, 'diet');
    expect(fact?.value).toBe('The user is vegetarian.');
    expect((fact?.expiresAt ?? 0) - (fact?.updatedAt ?? 0)).toBe(3600_000);

    const second = new ScriptedModel([reply('How about a mushroom risotto?')]);
    const answered = await runner(second).run(agent(memory), 'Suggest a dinner.', options);
    expect(answered.finalOutput).toBe('How about a mushroom risotto?');
    // The session and the run's history hold no recall (the SDK would save an input item added).
    const stored = JSON.stringify(await session.getItems());
    expect(stored).toContain('Suggest a dinner.');
    expect(stored).toContain('I never eat meat.');
    expect(stored).not.toContain(RECALL_HEADING);
    expect(JSON.stringify(answered.history)).not.toContain(RECALL_HEADING);

    const request = second.requests[0] as ModelRequest;
    expect(JSON.stringify(request.input)).not.toContain(RECALL_HEADING);
    expect(request.systemInstructions).toBe(
      `You are a chef.\n\n${RECALL_HEADING}\n- diet: "The user is vegetarian."`,
    );
    // Another user sees nothing of user 42's.
    const other = new ScriptedModel([reply('Any preferences?')]);
    await runner(other).run(agent(memory), 'Suggest a dinner.', {
      ...options,
      session: undefined,
      context: { user_id: 7 },
    });
    expect(other.requests[0]?.systemInstructions).toBe('You are a chef.');
  });

  it('refuses a run without the state key before any request to the service', async () => {
    const memory = new CairnAgentsMemory(Memory.byState('user_id', `users-${randomUUID().slice(0, 8)}`), {
      client,
    });
    const model = new ScriptedModel([reply('never asked')]);
    const before = requests;
    const failed = runner(model).run(agent(memory), 'Suggest a dinner.', {
      context: { tenant: 'acme' },
      callModelInputFilter: memory.callModelInputFilter,
    });
    await expect(failed).rejects.toBeInstanceOf(MemoryStateError);
    await expect(failed).rejects.toMatchObject({ code: 'invalid_state', field: 'user_id' });
    expect(requests).toBe(before);
    expect(model.requests).toHaveLength(0);
  });

  it('with recall 0 adds nothing but the tools work; with tools false offers none', async () => {
    const prefix = `users-${randomUUID().slice(0, 8)}`;
    await client.memory.remember(`${prefix}/1`, 'pet', 'a cat named Miso');
    const quiet = new CairnAgentsMemory(Memory.byState('user_id', prefix, { recall: 0 }), { client });
    const model = new ScriptedModel([toolCall('search_memory', { query: 'cat' }), reply('You have a cat.')]);
    await runner(model).run(agent(quiet), 'What pet do I have?', {
      context: { user_id: 1 },
      callModelInputFilter: quiet.callModelInputFilter,
    });
    expect(model.requests.map((r) => r.systemInstructions)).toEqual(['You are a chef.', 'You are a chef.']);
    expect(toolResult(model.requests[1] as ModelRequest, 'call_search_memory')).toEqual({
      facts: [{ key: 'pet', value: 'a cat named Miso' }],
      searchedBy: 'keywords',
    });

    const toolless = new CairnAgentsMemory(Memory.byState('user_id', prefix, { tools: false }), { client });
    expect(toolless.tools).toEqual([]);
    const plain = new ScriptedModel([reply('Hello.')]);
    await runner(plain).run(agent(toolless), 'Hi, my pet?', {
      context: { user_id: 1 },
      callModelInputFilter: toolless.callModelInputFilter,
    });
    expect(plain.requests[0]?.tools).toEqual([]);
    expect(plain.requests[0]?.systemInstructions).toContain('- pet: "a cat named Miso"');
  });

  it('semantic: recall finds by meaning what keywords rank below; a failing embedder falls back to keywords', async () => {
    const prefix = `users-${randomUUID().slice(0, 8)}`;
    const state = { user_id: 'ada' };
    const semantic = new CairnAgentsMemory(
      Memory.byState('user_id', prefix, { recall: 1 }).semantic(new TopicEmbeddings()),
      { client },
    );
    // Saved by the remember tool's logic: each with a vector.
    await semantic.core.remember(state, { key: 'diet', text: 'Avoids meat and fish' });
    await semantic.core.remember(state, { key: 'party', text: 'Team party tonight at eight' });
    const question = 'What should I cook tonight?';

    const byMeaning = new ScriptedModel([reply('A vegetable curry.')]);
    await runner(byMeaning).run(agent(semantic), question, {
      context: state,
      callModelInputFilter: semantic.callModelInputFilter,
    });
    expect(byMeaning.requests[0]?.systemInstructions).toBe(
      `You are a chef.\n\n${RECALL_HEADING}\n- diet: "Avoids meat and fish"`,
    );

    // The same facts by keywords: only the party shares a word with the question.
    const keywords = new CairnAgentsMemory(Memory.byState('user_id', prefix, { recall: 1 }), { client });
    const byWords = new ScriptedModel([reply('Something quick.')]);
    await runner(byWords).run(agent(keywords), question, {
      context: state,
      callModelInputFilter: keywords.callModelInputFilter,
    });
    expect(byWords.requests[0]?.systemInstructions).toContain('- party: "Team party tonight at eight"');

    const warnings: string[] = [];
    const broken = new CairnAgentsMemory(
      Memory.byState('user_id', prefix, { recall: 1 }).semantic(new BrokenEmbeddings()),
      { client },
      { onWarning: (message) => warnings.push(message) },
    );
    const fallback = new ScriptedModel([
      toolCall('search_memory', { query: 'party tonight' }),
      reply('Have fun.'),
    ]);
    const result = await runner(fallback).run(agent(broken), question, {
      context: state,
      callModelInputFilter: broken.callModelInputFilter,
    });
    expect(result.finalOutput).toBe('Have fun.');
    expect(fallback.requests[0]?.systemInstructions).toContain('- party: "Team party tonight at eight"');
    expect(toolResult(fallback.requests[1] as ModelRequest, 'call_search_memory')).toMatchObject({
      facts: [{ key: 'party', value: 'Team party tonight at eight' }],
      searchedBy: 'keywords',
      warning: 'the embedder failed: searched by keywords instead',
    });
    expect(warnings.length).toBeGreaterThanOrEqual(2);

    // A query vector the service refuses (not the tenant's 64 dimensions) falls back the same way.
    const narrow: EmbeddingsLike = {
      embedQuery: async () => [1, 0, 0],
      embedDocuments: async (texts) => texts.map(() => [1, 0, 0]),
    };
    const refused = new AgentMemory(
      Memory.byState('user_id', prefix, { recall: 1 }).semantic(narrow),
      { client },
      { onWarning: (message) => warnings.push(message) },
    );
    const recalled = await refused.recall(state, [{ role: 'user', text: question }]);
    expect(recalled.facts).toEqual([{ key: 'party', value: 'Team party tonight at eight' }]);
    expect(recalled.searchedBy).toBe('keywords');
    expect(recalled.warning).toMatch(
      /^the service refused the query's vector \(.*vector.*\): searched by keywords instead$/,
    );
    // And a fact's vector it refuses: the remember tool saves the fact without one, and says so.
    const saved = JSON.parse(await refused.remember(state, { key: 'pet', text: 'A cat named Miso' })) as {
      warning?: string;
    };
    expect(saved).toMatchObject({ saved: true, key: 'pet', created: true });
    expect(saved.warning).toMatch(
      /^the service refused the fact's vector \(.*vectors.*\): the fact is saved without one/,
    );
    expect((await client.memory.recall(`${prefix}/ada`, 'pet'))?.vectorFields).toBeUndefined();
  });
});
