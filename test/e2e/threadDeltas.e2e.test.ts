import { createHash } from 'node:crypto';
import { rm } from 'node:fs/promises';

import { CairnClient, type HttpSender, nodeHttpSender } from '@cairn-state/client';
import { CairnCheckpointSaver } from '@cairn-state/langgraph';
import { AIMessage, HumanMessage } from '@langchain/core/messages';
import { MessagesAnnotation, StateGraph } from '@langchain/langgraph';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import {
  apiKeysSetting,
  type Backend,
  backendSettings,
  client,
  newTenant,
  type RunningApp,
  startApp,
} from '../support/app';
import { azurite } from '../support/azurite';

/**
 * Values as deltas on the thread wire (docs/threads.md, Deltas) over real HTTP: a put's value given
 * as base + keep + append + sha256, every way such a base is refused (nothing stored, nothing of
 * the base told), reads given `since`, and the LangGraph saver's bytes per turn of a conversation.
 */

type Call = ReturnType<typeof client>;

const sha = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');
const json = (value: unknown) => Buffer.from(JSON.stringify(value));
const b64 = (bytes: Buffer) => bytes.toString('base64');

/** A value of some size: a list of `count` messages of 200 characters. */
const messages = (count: number) =>
  Array.from({ length: count }, (_, index) => `message ${index} `.padEnd(200, 'x'));

function body(
  checkpointId: string,
  parent: string | null,
  version: number,
  value: Record<string, unknown> | null,
) {
  return JSON.stringify({
    checkpointId,
    parent,
    checkpoint: { type: 'json', data: b64(json({ v: 4, id: checkpointId })) },
    channelVersions: { messages: version },
    values: { messages: value },
  });
}

/** The delta of `next` against `base`: `base` must be a prefix up to `keep`. */
function delta(baseId: string, base: Buffer, next: Buffer, overrides: Record<string, unknown> = {}) {
  let keep = 0;
  while (keep < base.length && keep < next.length && base[keep] === next[keep]) keep += 1;
  return {
    type: 'json',
    base: { checkpointId: baseId },
    keep,
    append: b64(next.subarray(keep)),
    sha256: sha(next),
    ...overrides,
  };
}

interface Tuple {
  checkpointId: string;
  since?: string;
  values: Record<string, { type: string; data?: string; keep?: number; append?: string; sha256?: string }>;
}

describe.each<Backend>(['local', 'blob'])('thread value deltas on the %s backend', (backend) => {
  const alpha = newTenant('alpha');
  const beta = newTenant('beta');
  const settings = backendSettings(backend, azurite().blobEndpoint);
  let app: RunningApp;
  let asAlpha: Call;
  let asBeta: Call;

  const put = (call: Call, thread: string, text: string) =>
    call(`/api/threads/${thread}/checkpoints`, { method: 'POST', body: text });
  const errorOf = async (response: Response) =>
    ((await response.json()) as { error: { code: string; message: string; field?: string } }).error;

  beforeAll(async () => {
    app = await startApp({ CAIRN_API_KEYS: apiKeysSetting([alpha, beta]), ...settings });
    asAlpha = client(app.url, alpha.key);
    asBeta = client(app.url, beta.key);
  });
  afterAll(async () => {
    await app.stop();
    if (settings['CAIRN_DATA_DIR'] !== undefined)
      await rm(settings['CAIRN_DATA_DIR'], { recursive: true, force: true });
  });

  it('stores a delta put as the whole value, and a retry compares the whole value', async () => {
    const v1 = json(messages(20));
    const v2 = json(messages(21));
    expect((await put(asAlpha, 'd-put', body('c1', null, 1, { type: 'json', data: b64(v1) }))).status).toBe(
      201,
    );
    const c2 = body('c2', 'c1', 2, delta('c1', v1, v2));
    const sentDelta = JSON.parse(c2) as { values: { messages: { append: string } } };
    expect(sentDelta.values.messages.append.length).toBeLessThan(400);
    expect((await put(asAlpha, 'd-put', c2)).status).toBe(201);
    // The same content again, as a delta or whole: a retry.
    expect((await put(asAlpha, 'd-put', c2)).status).toBe(200);
    expect((await put(asAlpha, 'd-put', body('c2', 'c1', 2, { type: 'json', data: b64(v2) }))).status).toBe(
      200,
    );
    // Other content under the id: a conflict, as for a whole value.
    const other = json([...messages(20), 'another']);
    const conflict = await put(asAlpha, 'd-put', body('c2', 'c1', 2, delta('c1', v1, other)));
    expect(conflict.status).toBe(409);
    expect((await errorOf(conflict)).code).toBe('conflict');

    const read = (await (await asAlpha('/api/threads/d-put/checkpoints/c2')).json()) as Tuple;
    expect(read.since).toBeUndefined();
    expect(Buffer.from(read.values['messages']?.data ?? '', 'base64').equals(v2)).toBe(true);
  });

  it('refuses a base that does not resolve with 409 base_mismatch naming the value, storing nothing', async () => {
    const v1 = json(messages(20));
    const v2 = json(messages(21));
    expect(
      (await put(asAlpha, 'd-refuse', body('c1', null, 1, { type: 'json', data: b64(v1) }))).status,
    ).toBe(201);
    // The same checkpoint id and bytes in another thread of the tenant, and in another tenant.
    expect((await put(asAlpha, 'd-other', body('c1', null, 1, { type: 'json', data: b64(v1) }))).status).toBe(
      201,
    );
    expect((await put(asBeta, 'd-refuse', body('b1', null, 1, { type: 'json', data: b64(v1) }))).status).toBe(
      201,
    );
    const refusals: [string, Record<string, unknown>][] = [
      ['a base checkpoint not stored', delta('c9', v1, v2)],
      ["another tenant's checkpoint of the same thread name", delta('b1', v1, v2)],
      ['a wrong digest', delta('c1', v1, v2, { sha256: sha(v1) })],
      ['keep past the end of the base', delta('c1', v1, v2, { keep: v1.length + 1 })],
      ['another type tag', delta('c1', v1, v2, { type: 'bytes' })],
      [
        'a channel the base has no value for',
        delta('c1', v1, v2, { base: { checkpointId: 'c1', channel: 'x' } }),
      ],
    ];
    for (const [what, value] of refusals) {
      const refused = await put(asAlpha, 'd-refuse', body('c2', 'c1', 2, value));
      expect(refused.status, what).toBe(409);
      const error = await errorOf(refused);
      expect(error, what).toMatchObject({ code: 'base_mismatch', field: 'values.messages' });
      // The answer tells nothing of the base's bytes.
      expect(error.message, what).not.toContain('message 1');
    }
    // Another thread's checkpoint as base, asked for from this thread: not stored here.
    const otherThread = await put(asAlpha, 'd-refuse2', body('c2', null, 2, delta('c1', v1, v2)));
    expect(otherThread.status).toBe(409);
    expect((await errorOf(otherThread)).code).toBe('base_mismatch');
    expect((await asAlpha('/api/threads/d-refuse/checkpoints/c2')).status).toBe(404);
    expect((await asAlpha('/api/threads/d-refuse2')).status).toBe(404);
    // Beta's thread was not used as a base for alpha, nor changed.
    const betaThread = (await (await asBeta('/api/threads/d-refuse')).json()) as {
      heads: Record<string, { checkpointId: string }>;
    };
    expect(betaThread.heads['']?.checkpointId).toBe('b1');
  });

  it('refuses a malformed delta with 400 naming the field, before any I/O', async () => {
    const v1 = json(messages(20));
    const cases: [Record<string, unknown>, string][] = [
      [delta('c1', v1, v1, { sha256: 'nothex' }), 'values.messages'],
      [delta('c1', v1, v1, { keep: -1 }), 'values.messages'],
      [delta('c1', v1, v1, { append: '***' }), 'values.messages'],
      [delta('latest', v1, v1), 'values.messages'],
    ];
    for (const [value, field] of cases) {
      const refused = await put(asAlpha, 'd-bad', body('c1', null, 1, value));
      expect(refused.status).toBe(400);
      const error = await errorOf(refused);
      expect(error.code).toBe('invalid_argument');
      expect(error.message).toContain(field);
    }
    expect((await asAlpha('/api/threads/d-bad')).status).toBe(404);
  });

  it('answers a read given since with deltas against the values there', async () => {
    const v1 = json(messages(20));
    const v2 = json(messages(22));
    const small = json('short');
    const make = (id: string, parent: string | null, version: number, value: Buffer, other: Buffer) =>
      JSON.stringify({
        checkpointId: id,
        parent,
        checkpoint: { type: 'json', data: b64(json({ v: 4, id })) },
        channelVersions: { messages: version, other: version },
        values: { messages: { type: 'json', data: b64(value) }, other: { type: 'json', data: b64(other) } },
      });
    expect((await put(asAlpha, 'd-read', make('c1', null, 1, v1, small))).status).toBe(201);
    expect((await put(asAlpha, 'd-read', make('c2', 'c1', 2, v2, json('changed')))).status).toBe(201);

    const answer = (await (await asAlpha('/api/threads/d-read/checkpoints/latest?since=c1')).json()) as Tuple;
    expect(answer.since).toBe('c1');
    const changed = answer.values['messages'];
    expect(changed?.keep).toBe(v1.length - 1); // the closing bracket is replaced
    const rebuilt = Buffer.concat([
      v1.subarray(0, changed?.keep),
      Buffer.from(changed?.append ?? '', 'base64'),
    ]);
    expect(rebuilt.equals(v2)).toBe(true);
    expect(changed?.sha256).toBe(sha(v2));
    // A small value travels whole.
    expect(Buffer.from(answer.values['other']?.data ?? '', 'base64').toString()).toBe('"changed"');

    const same = (await (await asAlpha('/api/threads/d-read/checkpoints/c2?since=c2')).json()) as Tuple;
    expect(same.values['messages']).toEqual({ type: 'json', keep: v2.length, append: '', sha256: sha(v2) });

    // A since the namespace does not store (or another tenant's): values whole, no since.
    for (const since of ['c9', 'b1']) {
      const whole = (await (
        await asAlpha(`/api/threads/d-read/checkpoints/latest?since=${since}`)
      ).json()) as Tuple;
      expect(whole.since).toBeUndefined();
      expect(Buffer.from(whole.values['messages']?.data ?? '', 'base64').equals(v2)).toBe(true);
    }
    const bad = await asAlpha('/api/threads/d-read/checkpoints/latest?since=latest');
    expect(bad.status).toBe(400);
    expect((await errorOf(bad)).message).toContain('since');
  });

  it('client: a put and a read with known values round-trip, and stale known values fall back whole', async () => {
    const cairn = new CairnClient({ url: `${app.url}/api`, token: alpha.key });
    const v1 = { type: 'json', data: json(messages(30)) };
    const v2 = { type: 'json', data: json(messages(31)) };
    const checkpoint = (id: string) => ({ type: 'json', data: json({ v: 4, id }) });
    await cairn.threads.putCheckpoint('d-client', {
      checkpointId: 'c1',
      checkpoint: checkpoint('c1'),
      channelVersions: { messages: 1 },
      values: { messages: v1 },
    });
    const known = { checkpointId: 'c1', values: { messages: v1 } };
    await cairn.threads.putCheckpoint(
      'd-client',
      {
        checkpointId: 'c2',
        parent: 'c1',
        checkpoint: checkpoint('c2'),
        channelVersions: { messages: 2 },
        values: { messages: v2 },
      },
      { known },
    );
    const read = await cairn.threads.getCheckpoint('d-client', { since: known });
    expect(Buffer.from(read?.values['messages']?.data ?? []).equals(v2.data)).toBe(true);
    // Known values that are not what the service has at c1: the put is sent whole after the
    // refusal, and the read is read whole after the digest does not match.
    const stale = { checkpointId: 'c1', values: { messages: { type: 'json', data: json(messages(29)) } } };
    const v3 = { type: 'json', data: json(messages(32)) };
    await cairn.threads.putCheckpoint(
      'd-client',
      {
        checkpointId: 'c3',
        parent: 'c2',
        checkpoint: checkpoint('c3'),
        channelVersions: { messages: 3 },
        values: { messages: v3 },
      },
      {
        known: {
          checkpointId: 'c1',
          values: { messages: { type: 'json', data: json([...messages(29), 'x'.repeat(500)]) } },
        },
      },
    );
    const again = await cairn.threads.getCheckpoint('d-client', { since: stale });
    expect(Buffer.from(again?.values['messages']?.data ?? []).equals(v3.data)).toBe(true);
  });

  it('saver: at turn 50 a turn sends and receives at most 10x what it adds', async () => {
    let sent = 0;
    let received = 0;
    const base = nodeHttpSender();
    const counting: HttpSender = async (request) => {
      sent += request.body?.length ?? 0;
      const reply = await base(request);
      const bytes = await reply.bytes();
      received += bytes.length;
      return {
        status: reply.status,
        header: (name) => reply.header(name),
        body: (async function* () {
          yield bytes;
        })(),
        bytes: async () => bytes,
        json: async () => JSON.parse(bytes.toString()) as unknown,
        discard: async () => undefined,
      };
    };
    const cairn = new CairnClient({ url: `${app.url}/api`, token: alpha.key, send: counting });
    const saver = new CairnCheckpointSaver({ client: cairn, scope: `turns-${backend}` });
    const graph = new StateGraph(MessagesAnnotation)
      .addNode('assistant', (state) => ({
        messages: [new AIMessage(`echo: ${state.messages.at(-1)?.text ?? ''} `.padEnd(1000, 'y'))],
      }))
      .addEdge('__start__', 'assistant')
      .compile({ checkpointer: saver });
    const config = { configurable: { thread_id: 'long' } };
    const turn = (index: number) =>
      graph.invoke({ messages: [new HumanMessage(`question ${index} `.padEnd(1000, 'q'))] }, config);
    for (let index = 0; index < 50; index += 1) await turn(index);
    sent = 0;
    received = 0;
    const before = (await saver.getTuple(config))?.checkpoint.channel_values['messages'] as unknown[];
    sent = 0;
    received = 0;
    await turn(50);
    const turnBytes = { sent, received };
    const state = await graph.getState(config);
    const after = (state.values as { messages: unknown[] }).messages;
    expect(after.length).toBe(before.length + 2);
    // What the turn adds: its two messages, about 1 KB each, serialised.
    const added = 2 * 1000;
    console.log(`turn 51: sent ${turnBytes.sent} B, received ${turnBytes.received} B, adds ~${added} B`);
    expect(turnBytes.sent + turnBytes.received).toBeLessThan(10 * added);
    expect(turnBytes.sent).toBeGreaterThan(added);
  });
});
