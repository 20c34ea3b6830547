import { randomUUID } from 'node:crypto';
import { rm } from 'node:fs/promises';

import { CairnClient } from '@cairn-state/client';
import { type HttpSender, nodeHttpSender } from '@cairn-state/client';
import {
  CairnSession,
  encodeSessionId,
  HistoryTransactionError,
  SESSION_KEY_PREFIX,
} from '@cairn-state/openai-agents';
import {
  Agent,
  type AgentInputItem,
  type Model,
  type ModelProvider,
  type ModelRequest,
  type ModelResponse,
  OpenAIResponsesCompactionSession,
  Runner,
  setTracingDisabled,
  type StreamEvent,
  tool,
  Usage,
} from '@openai/agents';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';

import {
  apiKeysSetting,
  type Backend,
  backendSettings,
  newTenant,
  type RunningApp,
  startApp,
} from '../support/app';
import { azurite } from '../support/azurite';
import { reply, ScriptedModel, toolCall } from '../support/scriptedModel';

/**
 * `@cairn-state/openai-agents` against the real app over HTTP: the SDK's Session contract under
 * concurrency (two clients, one session), idempotent history transactions, and the SDK's own run
 * loop keeping a conversation across two runs.
 */

const user = (text: string): AgentInputItem => ({ role: 'user', content: text });
const compaction = (summary: string): AgentInputItem => ({ type: 'compaction', encrypted_content: summary });

/** The text of each message item, in order. */
function texts(items: readonly AgentInputItem[]): string[] {
  return items.map((item) => {
    if (!('role' in item)) return `<${item.type}>`;
    if (typeof item.content === 'string') return item.content;
    return item.content.map((part) => ('text' in part ? part.text : `<${part.type}>`)).join('');
  });
}

/** A model that answers with canned texts and records the input of every request. */
class CannedModel implements Model {
  readonly inputs: AgentInputItem[][] = [];

  constructor(private readonly answers: string[]) {}

  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    this.inputs.push(
      typeof request.input === 'string' ? [user(request.input)] : structuredClone(request.input),
    );
    const text = this.answers.shift();
    if (text === undefined) throw new Error('the canned model has no answer left');
    return {
      usage: new Usage(),
      output: [
        {
          type: 'message',
          id: `msg_${this.inputs.length}`,
          role: 'assistant',
          status: 'completed',
          content: [{ type: 'output_text', text }],
        },
      ],
      responseId: `resp_${this.inputs.length}`,
    };
  }

  // eslint-disable-next-line require-yield
  async *getStreamedResponse(): AsyncIterable<StreamEvent> {
    throw new Error('the canned model does not stream');
  }
}

class CannedModelProvider implements ModelProvider {
  constructor(private readonly model: Model) {}

  getModel(): Model {
    return this.model;
  }
}

describe.each<Backend>(['local', 'blob'])('CairnSession on the %s backend', (backend) => {
  const tenant = newTenant('agent');
  const settings = backendSettings(backend, azurite().blobEndpoint);
  let app: RunningApp;
  const session = (sessionId: string) => new CairnSession({ url: app.url, token: tenant.key, sessionId });
  const newId = (name: string) => `${name} ${randomUUID()}`;

  beforeAll(async () => {
    setTracingDisabled(true);
    app = await startApp({ CAIRN_API_KEYS: apiKeysSetting([tenant]), ...settings });
  });
  afterAll(async () => {
    await app?.stop();
    if (settings['CAIRN_DATA_DIR'] !== undefined)
      await rm(settings['CAIRN_DATA_DIR'], { recursive: true, force: true });
  });

  it('loses nothing when two clients run 16 addItems at once on one session', async () => {
    const id = newId('busy');
    const [a, b] = [session(id), session(id)];
    await Promise.all(
      Array.from({ length: 16 }, (_, n) => (n % 2 === 0 ? a : b).addItems([user(`${n}.0`), user(`${n}.1`)])),
    );
    const stored = texts(await b.getItems());
    expect(stored).toHaveLength(32);
    expect([...stored].sort()).toEqual(
      Array.from({ length: 16 }, (_, n) => [`${n}.0`, `${n}.1`])
        .flat()
        .sort(),
    );
    // Each call's items stay together and in order.
    for (let n = 0; n < 16; n++) expect(stored.indexOf(`${n}.1`)).toBe(stored.indexOf(`${n}.0`) + 1);
    expect(texts(await a.getItems())).toEqual(stored);
  });

  it('pops every item exactly once when two clients pop at once, newest first', async () => {
    const id = newId('pop');
    const [a, b] = [session(id), session(id)];
    await a.addItems(Array.from({ length: 10 }, (_, n) => user(`m${n}`)));
    await b.addItems(Array.from({ length: 10 }, (_, n) => user(`m${10 + n}`)));
    const popped = await Promise.all(Array.from({ length: 12 }, (_, n) => (n % 2 === 0 ? a : b).popItem()));
    const poppedTexts = texts(popped.map((item) => item ?? user('<none>')));
    expect(new Set(poppedTexts).size).toBe(12);
    expect([...poppedTexts].sort()).toEqual(Array.from({ length: 12 }, (_, n) => `m${8 + n}`).sort());
    expect(texts(await a.getItems())).toEqual(Array.from({ length: 8 }, (_, n) => `m${n}`));

    // More pops than items: each remaining item once, then undefined.
    const rest = await Promise.all(Array.from({ length: 12 }, (_, n) => (n % 2 === 0 ? a : b).popItem()));
    expect(rest.filter((item) => item === undefined)).toHaveLength(4);
    expect(texts(rest.filter((item) => item !== undefined)).sort()).toEqual(
      Array.from({ length: 8 }, (_, n) => `m${n}`).sort(),
    );
    expect(await b.getItems()).toEqual([]);
    expect(await b.popItem()).toBeUndefined();
  });

  it('getItems(limit) returns the newest limit items in order, across calls and after a pop', async () => {
    const s = session(newId('limit'));
    expect(await s.getItems()).toEqual([]);
    await s.addItems([user('a'), user('b')]);
    await s.addItems([user('c')]);
    await s.addItems([user('d'), user('e'), user('f')]);
    expect(texts(await s.getItems())).toEqual(['a', 'b', 'c', 'd', 'e', 'f']);
    expect(texts(await s.getItems(1))).toEqual(['f']);
    expect(texts(await s.getItems(4))).toEqual(['c', 'd', 'e', 'f']);
    expect(texts(await s.getItems(100))).toEqual(['a', 'b', 'c', 'd', 'e', 'f']);
    expect(await s.getItems(0)).toEqual([]);
    expect(texts([(await s.popItem()) as AgentInputItem])).toEqual(['f']);
    expect(texts(await s.getItems(3))).toEqual(['c', 'd', 'e']);
    // Items handed out are copies: changing them changes nothing stored.
    const [first] = await s.getItems(1);
    (first as { content: string }).content = 'changed';
    expect(texts(await s.getItems(1))).toEqual(['e']);
  });

  it('clearSession empties the history for every client, and the session takes items again', async () => {
    const id = newId('clear');
    const [a, b] = [session(id), session(id)];
    await a.addItems([user('one'), user('two')]);
    await b.clearSession();
    expect(await a.getItems()).toEqual([]);
    await b.clearSession();
    await a.addItems([user('three')]);
    expect(texts(await b.getItems())).toEqual(['three']);
    expect(await a.getSessionId()).toBe(id);
  });

  it('applies a history transaction once per operationId, and refuses a changed one or a stale suffix', async () => {
    const id = newId('tx');
    const [a, b] = [session(id), session(id)];
    // Four operations, each sent four times at once from two clients: each applied once, none lost.
    const batch = (op: number) => ({
      type: 'append_items' as const,
      items: [user(`q${op}`), user(`a${op}`)],
    });
    await Promise.all(
      Array.from({ length: 16 }, (_, n) =>
        (n % 2 === 0 ? a : b).applyHistoryTransaction({
          operationId: `op-${n % 4}`,
          transaction: batch(n % 4),
        }),
      ),
    );
    const applied = texts(await a.getItems());
    expect([...applied].sort()).toEqual(['a0', 'a1', 'a2', 'a3', 'q0', 'q1', 'q2', 'q3']);
    // Applied again later: nothing changes.
    await b.applyHistoryTransaction({ operationId: 'op-1', transaction: batch(1) });
    expect(texts(await a.getItems())).toEqual(applied);
    await a.clearSession();
    const append = batch(1);
    await a.applyHistoryTransaction({ operationId: 'op-1', transaction: append });
    await a.applyHistoryTransaction({ operationId: 'op-1', transaction: append });
    expect(texts(await a.getItems())).toEqual(['q1', 'a1']);

    await expect(
      b.applyHistoryTransaction({
        operationId: 'op-1',
        transaction: { type: 'append_items', items: [user('x')] },
      }),
    ).rejects.toBeInstanceOf(HistoryTransactionError);

    const replace = {
      type: 'replace_suffix' as const,
      expectedSuffix: [user('a1')],
      replacement: [user('a1, revised'), user('q2')],
    };
    await b.applyHistoryTransaction({ operationId: 'op-2', transaction: replace });
    await a.applyHistoryTransaction({ operationId: 'op-2', transaction: replace });
    expect(texts(await a.getItems())).toEqual(['q1', 'a1, revised', 'q2']);

    await expect(
      a.applyHistoryTransaction({
        operationId: 'op-3',
        transaction: { type: 'replace_suffix', expectedSuffix: [user('a1')], replacement: [] },
      }),
    ).rejects.toBeInstanceOf(HistoryTransactionError);
    await expect(
      a.applyHistoryTransaction({
        operationId: 'op-4',
        transaction: {
          type: 'replace_suffix',
          expectedSuffix: [user('q0'), ...(await a.getItems())],
          replacement: [],
        },
      }),
    ).rejects.toBeInstanceOf(HistoryTransactionError);
    await expect(
      a.addItems([{ role: 'user', content: new Uint8Array(2) } as unknown as AgentInputItem]),
    ).rejects.toThrow(TypeError);
    expect(texts(await b.getItems())).toEqual(['q1', 'a1, revised', 'q2']);

    // A refused operation id was not recorded: it can still be applied.
    await a.applyHistoryTransaction({
      operationId: 'op-3',
      transaction: { type: 'replace_suffix', expectedSuffix: [user('q2')], replacement: [] },
    });
    expect(texts(await b.getItems())).toEqual(['q1', 'a1, revised']);
  });

  it('does a write whose answer was lost once: an append is not repeated, a pop not done twice', async () => {
    for (const attempts of [5, 1]) {
      // The first PUT of the head reaches the service, then its answer is lost.
      let losing = true;
      const real = nodeHttpSender();
      const send: HttpSender = async (request) => {
        const reply = await real(request);
        if (!(losing && request.method === 'PUT' && request.url.endsWith('/head'))) return reply;
        losing = false;
        await reply.discard();
        throw new Error('socket hang up (injected after the request was carried out)');
      };
      const id = newId(`lost-${attempts}`);
      const s = new CairnSession({ url: app.url, token: tenant.key, sessionId: id, send, attempts });
      await s.addItems([user('one'), user('two')]);
      expect(texts(await s.getItems())).toEqual(['one', 'two']);
      losing = true;
      expect(texts([(await s.popItem()) as AgentInputItem])).toEqual(['two']);
      expect(texts(await s.getItems())).toEqual(['one']);
    }
  });

  it('stores under its documented keys and keeps the head short after many small writes', async () => {
    const id = newId('many');
    const s = session(id);
    for (let n = 0; n < 40; n++) await s.addItems([user(`n${n}`)]);
    await s.popItem();
    expect(texts(await s.getItems())).toEqual(Array.from({ length: 39 }, (_, n) => `n${n}`));

    const kv = new CairnClient({ url: app.url, token: tenant.key }).kv;
    const prefix = `${SESSION_KEY_PREFIX}${encodeSessionId(id)}/`;
    const head = JSON.parse((await kv.get(`${prefix}head`))?.value.toString() ?? 'null') as {
      segments: { id: string; count: number }[];
    };
    expect(head.segments.length).toBeLessThanOrEqual(33);
    expect(head.segments.reduce((sum, ref) => sum + ref.count, 0)).toBe(39);
    // Merged and popped segments are deleted: every stored segment is one the head lists.
    const stored = [];
    for await (const key of kv.list({ prefix: `${prefix}segments/` }))
      stored.push(key.slice(prefix.length + 9));
    expect(stored.sort()).toEqual(head.segments.map((ref) => ref.id).sort());
  });

  it("keeps the conversation across two runs of the SDK's own Agent/run loop", async () => {
    const id = newId('run');
    const model = new CannedModel(['Hello, Ada.', 'Your name is Ada.']);
    const runner = new Runner({ modelProvider: new CannedModelProvider(model), tracingDisabled: true });
    const agent = new Agent({ name: 'Assistant', instructions: 'Answer briefly.' });

    const first = await runner.run(agent, 'My name is Ada.', { session: session(id) });
    expect(first.finalOutput).toBe('Hello, Ada.');
    // A new session object, as a new worker would make: the history comes from Cairn.
    const second = await runner.run(agent, 'What is my name?', { session: session(id) });
    expect(second.finalOutput).toBe('Your name is Ada.');

    expect(texts(model.inputs[1] ?? [])).toEqual(['My name is Ada.', 'Hello, Ada.', 'What is my name?']);
    expect(texts(await session(id).getItems())).toEqual([
      'My name is Ada.',
      'Hello, Ada.',
      'What is my name?',
      'Your name is Ada.',
    ]);
  });

  it('replaces the history with a compaction in one write, keeps what another worker appended since, refuses after a pop', async () => {
    const id = newId('compact');
    const [a, b] = [session(id), session(id)];
    await a.addItems([user('q1'), user('a1'), user('q2'), user('a2')]);
    expect(texts(await a.getItems())).toHaveLength(4);
    // Another worker appends after `a` read the history: its items stay, after the replacement.
    await b.addItems([user('q3')]);
    await a.replaceHistoryWithCompaction([compaction('summary of 1-2'), user('a2')]);
    expect(texts(await b.getItems())).toEqual(['<compaction>', 'a2', 'q3']);
    // One head: the replacement's segment and the appended one; the replaced segment is deleted.
    const kv = new CairnClient({ url: app.url, token: tenant.key }).kv;
    const prefix = `${SESSION_KEY_PREFIX}${encodeSessionId(id)}/`;
    const head = JSON.parse((await kv.get(`${prefix}head`))?.value.toString() ?? 'null') as {
      segments: { id: string }[];
    };
    const stored = [];
    for await (const key of kv.list({ prefix: `${prefix}segments/` }))
      stored.push(key.slice(prefix.length + 9));
    expect(head.segments).toHaveLength(2);
    expect(stored.sort()).toEqual(head.segments.map((ref) => ref.id).sort());

    // `b` pops after `a` read: replacing what `a` saw would bring the popped item back. Refused.
    await a.getItems();
    await b.popItem();
    expect(texts(await b.getItems())).toEqual(['<compaction>', 'a2']);
    await expect(a.replaceHistoryWithCompaction([compaction('stale')])).rejects.toThrow(
      HistoryTransactionError,
    );
    expect(texts(await b.getItems())).toEqual(['<compaction>', 'a2']);
  });

  it("keeps the history whole under the SDK's own OpenAIResponsesCompactionSession in a run", async () => {
    const id = newId('sdk-compact');
    const requests: unknown[] = [];
    // The OpenAI API's compact call, stubbed: the only part of this test that is not the SDK's or Cairn's.
    const client = {
      responses: {
        compact: async (request: unknown) => {
          requests.push(request);
          return {
            output: [compaction('all of it')],
            usage: { input_tokens: 1, output_tokens: 1, total_tokens: 2 },
          };
        },
      },
    };
    const compacting = new OpenAIResponsesCompactionSession({
      client: client as unknown as ConstructorParameters<
        typeof OpenAIResponsesCompactionSession
      >[0]['client'],
      underlyingSession: session(id),
      compactionMode: 'input',
      shouldTriggerCompaction: ({ compactionCandidateItems }) => compactionCandidateItems.length >= 2,
    });
    const model = new CannedModel(['Hello, Ada.', 'Your name is Ada.']);
    const runner = new Runner({ modelProvider: new CannedModelProvider(model), tracingDisabled: true });
    const agent = new Agent({ name: 'Assistant', instructions: 'Answer briefly.' });
    await runner.run(agent, 'My name is Ada.', { session: compacting });
    expect(requests).toHaveLength(0); // one assistant item: below the trigger
    await runner.run(agent, 'What is my name?', { session: compacting });
    expect(requests).toHaveLength(1);
    // The history Cairn keeps, read by a new worker: the compaction the API returned, alone.
    expect(await session(id).getItems()).toEqual([compaction('all of it')]);
  });

  it("never splits a tool call from its output when a read is limited, with the SDK's own tool items", async () => {
    const id = newId('tools');
    const model = new ScriptedModel([toolCall('lookup', { name: 'Ada' }), reply('Ada is a mathematician.')]);
    const runner = new Runner({ modelProvider: new CannedModelProvider(model), tracingDisabled: true });
    const lookup = tool({
      name: 'lookup',
      description: 'Looks a person up.',
      parameters: z.object({ name: z.string() }),
      execute: ({ name }) => `${name}: mathematician`,
    });
    const agent = new Agent({ name: 'Assistant', instructions: 'Answer briefly.', tools: [lookup] });
    await runner.run(agent, 'Who is Ada?', { session: session(id) });
    const all = await session(id).getItems();
    expect(all.map((item) => item.type ?? 'message')).toEqual([
      'message',
      'function_call',
      'function_call_result',
      'message',
    ]);
    // The newest two items would be the output without its call: the output is left out with it.
    expect(texts(await session(id).getItems(2))).toEqual(['Ada is a mathematician.']);
    expect((await session(id).getItems(3)).map((item) => item.type)).toEqual([
      'function_call',
      'function_call_result',
      'message',
    ]);
  });
});
