import type { QueueClient } from '@azure/storage-queue';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import type { EmailWindowMessage } from '../../shared/coordination/emailWindowQueue';
import {
  apiKeysSetting,
  type Backend,
  backendSettings,
  client,
  newTenant,
  type RunningApp,
  runTimer,
  startApp,
} from '../support/app';
import { azurite } from '../support/azurite';
import { drainQueue, freshQueue } from '../support/coordinationSupport';

/** Fleet coordination over real HTTP, against the app in the local runtime, on both backends. */

type Call = ReturnType<typeof client>;
type Json = Record<string, unknown>;

const CHAT = '19:c@thread.v2';
const chatPath = (chat: string) => `/api/chats/${encodeURIComponent(chat)}`;
const ids = (count: number, from = 0) =>
  Array.from({ length: count }, (_, i) => String(1_764_450_000_000 + from + i));

function post(call: Call, path: string, body: unknown): Promise<Response> {
  return call(path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

async function ok(response: Response, status = 200): Promise<Json> {
  const text = await response.text();
  expect(response.status, text).toBe(status);
  expect(response.headers.get('content-type')).toContain('application/json');
  return JSON.parse(text) as Json;
}

async function error(response: Response, status: number): Promise<{ code: string; message: string }> {
  const text = await response.text();
  expect(response.status, text).toBe(status);
  const body = JSON.parse(text) as { error: { code: string; message: string } };
  expect(typeof body.error.message).toBe('string');
  return body.error;
}

/** Waits (up to 30 s, polling) for the queue to hold at least `count` messages; returns them all. */
async function messagesOn(queue: QueueClient, count: number): Promise<EmailWindowMessage[]> {
  const found: EmailWindowMessage[] = [];
  const deadline = Date.now() + 30_000;
  while (found.length < count && Date.now() < deadline) {
    found.push(...(await drainQueue(queue)));
    if (found.length < count) await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return found;
}

describe.each<Backend>(['local', 'blob'])('fleet coordination API on the %s backend', (backend) => {
  const alpha = newTenant('alpha');
  const beta = newTenant('beta');
  const gamma = newTenant('gamma');
  let app: RunningApp;
  let queue: QueueClient;
  let asAlpha: Call;
  let asBeta: Call;
  let asGamma: Call;

  beforeAll(async () => {
    queue = await freshQueue();
    app = await startApp({
      CAIRN_API_KEYS: apiKeysSetting([alpha, beta, gamma]),
      ...backendSettings(backend, azurite().blobEndpoint),
      CAIRN_QUEUE_ENDPOINT: azurite().queueEndpoint,
      CAIRN_STORAGE_ACCOUNT_KEY: AZURITE_ACCOUNT_KEY,
      CAIRN_EMAIL_WINDOW_QUEUE: queue.name,
      // Yearly: the test runs the timer itself, through the admin endpoint.
      CAIRN_EMAIL_POLL_SCHEDULE: '0 0 0 1 1 *',
    });
    asAlpha = client(app.url, alpha.key);
    asBeta = client(app.url, beta.key);
    asGamma = client(app.url, gamma.key);
  });
  afterAll(async () => app.stop());

  it('answers 401 with WWW-Authenticate on every §5 route without a valid credential', async () => {
    const anonymous = client(app.url);
    const routes: [string, string][] = [
      ['GET', '/api/poll/email-cursor'],
      ['POST', '/api/poll/email-cursor/init'],
      ['POST', '/api/poll/email-cursor/claim'],
      ['POST', '/api/poll/email-cursor/settle'],
      ['GET', '/api/poll/watched-chats'],
      ['POST', '/api/poll/watched-chats'],
      ['GET', `${chatPath(CHAT)}/cursor`],
      ['POST', `${chatPath(CHAT)}/claims`],
      ['GET', '/api/promises'],
      ['POST', '/api/promises'],
      ['POST', '/api/promises/abc/resolve'],
      ['POST', '/api/interactions'],
      ['GET', '/api/interactions/2026-11-29'],
    ];
    for (const [method, path] of routes) {
      for (const authorization of [undefined, 'Bearer wrong', `Bearer ${alpha.key}x`]) {
        const response = await anonymous(path, {
          method,
          headers: authorization === undefined ? {} : { authorization },
          ...(method === 'POST' ? { body: '{}' } : {}),
        });
        expect((await error(response, 401)).code, `${method} ${path}`).toBe('unauthorized');
        expect(response.headers.get('www-authenticate')).toBe('Bearer');
      }
    }
  });

  it('serves the email cursor: absent, create-only init, claim won/lost, settle, unresolved on corrupt values', async () => {
    expect(await ok(await asAlpha('/api/poll/email-cursor'))).toStrictEqual({
      outcome: 'absent',
      cursor: null,
      etag: null,
      recentClaims: [],
    });
    const start = '2026-11-29T21:00:00.000Z';
    expect(await ok(await post(asAlpha, '/api/poll/email-cursor/init', { now: start }))).toStrictEqual({
      initialized: true,
    });
    expect(await ok(await asAlpha('/api/poll/email-cursor/init', { method: 'POST' }))).toStrictEqual({
      initialized: false,
    });
    const read = await ok(await asAlpha('/api/poll/email-cursor'));
    expect(read).toStrictEqual({
      outcome: 'present',
      cursor: start,
      etag: expect.stringMatching(/^".+"$/) as string,
      recentClaims: [],
    });

    const request = {
      newCursor: '2026-11-29T21:01:00.000Z',
      etag: read['etag'],
      claimId: 'claim-1',
      priorClaims: [],
    };
    expect(await ok(await post(asAlpha, '/api/poll/email-cursor/claim', request))).toStrictEqual({
      result: 'won',
    });
    expect(
      await ok(await post(asAlpha, '/api/poll/email-cursor/claim', { ...request, claimId: 'claim-2' })),
    ).toStrictEqual({ result: 'lost' });
    expect(await ok(await post(asAlpha, '/api/poll/email-cursor/settle', request))).toStrictEqual({
      result: true,
    });
    expect(
      await ok(await post(asAlpha, '/api/poll/email-cursor/settle', { ...request, claimId: 'claim-2' })),
    ).toStrictEqual({ result: false });
    const after = await ok(await asAlpha('/api/poll/email-cursor'));
    expect(after).toMatchObject({ outcome: 'present', cursor: request.newCursor, recentClaims: ['claim-1'] });

    // The cursor never moves back: a claim on the current version ending before it is 400, writes
    // nothing, and settles as false.
    const backwards = {
      newCursor: start,
      etag: after['etag'],
      claimId: 'claim-back',
      priorClaims: ['claim-1'],
    };
    const refused = await error(await post(asAlpha, '/api/poll/email-cursor/claim', backwards), 400);
    expect(refused.code).toBe('invalid_argument');
    expect(refused.message).toMatch(/^newCursor: /);
    expect(await ok(await post(asAlpha, '/api/poll/email-cursor/settle', backwards))).toStrictEqual({
      result: false,
    });
    expect(await ok(await asAlpha('/api/poll/email-cursor'))).toStrictEqual(after);

    // Readable with the key/value API, cursor first.
    const raw = await asAlpha('/api/kv/poll_state/email_cursor.txt');
    expect(JSON.parse(await raw.text())).toMatchObject({
      cursor: request.newCursor,
      recentClaims: ['claim-1'],
    });

    // A value that is not a timestamp is unresolved, never absent; a claim on it fails and writes nothing.
    expect(
      (await asAlpha('/api/kv/poll_state/email_cursor.txt', { method: 'PUT', body: 'soon' })).status,
    ).toBe(200);
    const corrupt = await asAlpha('/api/kv/poll_state/email_cursor.txt');
    const corruptEtag = corrupt.headers.get('etag') ?? '';
    expect(await ok(await asAlpha('/api/poll/email-cursor'))).toStrictEqual({
      outcome: 'unresolved',
      cursor: null,
      etag: null,
      recentClaims: [],
    });
    expect(
      await ok(
        await post(asAlpha, '/api/poll/email-cursor/claim', { ...request, etag: corruptEtag, claimId: 'c3' }),
      ),
    ).toStrictEqual({ result: 'failed' });
    expect(
      await ok(
        await post(asAlpha, '/api/poll/email-cursor/settle', {
          ...request,
          etag: corruptEtag,
          claimId: 'c3',
        }),
      ),
    ).toStrictEqual({ result: null });
    expect(
      await ok(await asAlpha('/api/poll/email-cursor/init', { method: 'POST', body: '' })),
    ).toStrictEqual({
      initialized: false,
    });
    const unchanged = await asAlpha('/api/kv/poll_state/email_cursor.txt');
    expect(await unchanged.text()).toBe('soon');
    expect(unchanged.headers.get('etag')).toBe(corruptEtag);
  });

  it('merges watched chats, reports what was added, and refuses ids that cannot be chat ids', async () => {
    expect(await ok(await asAlpha('/api/poll/watched-chats'))).toStrictEqual({
      outcome: 'absent',
      chatIds: [],
      etag: null,
    });
    expect(
      await ok(await post(asAlpha, '/api/poll/watched-chats', { chatIds: [CHAT, '19:d@thread.v2'] })),
    ).toStrictEqual({ persisted: true, added: [CHAT, '19:d@thread.v2'] });
    expect(
      await ok(
        await post(asAlpha, '/api/poll/watched-chats', { chatIds: ['19:d@thread.v2', '19:e@thread.v2'] }),
      ),
    ).toStrictEqual({ persisted: true, added: ['19:e@thread.v2'] });
    const listed = await ok(await asAlpha('/api/poll/watched-chats'));
    expect(listed).toStrictEqual({
      outcome: 'present',
      chatIds: [CHAT, '19:d@thread.v2', '19:e@thread.v2'],
      etag: expect.stringMatching(/^".+"$/) as string,
    });
    for (const bad of ['has space', 'a/b', 'a\\b', 'what?', 'x#y', '50%', 'bell\u0007', '', 7]) {
      const failure = await error(
        await post(asAlpha, '/api/poll/watched-chats', { chatIds: ['19:f@thread.v2', bad] }),
        400,
      );
      expect(failure.code).toBe('invalid_argument');
      expect(failure.message).toMatch(/^chatIds\.1: /);
    }
    expect(await ok(await asAlpha('/api/poll/watched-chats'))).toStrictEqual(listed);
  });

  it('claims deliveries on a chat cursor and reads the cursor back in the stored shape', async () => {
    expect(await ok(await asAlpha(`${chatPath(CHAT)}/cursor`))).toStrictEqual({
      outcome: 'absent',
      cursor: null,
    });
    expect(
      await ok(
        await post(asAlpha, `${chatPath(CHAT)}/claims`, {
          candidateIds: ['m2', 'm1'],
          lastTs: '2026-11-29T21:00:00Z',
        }),
      ),
    ).toStrictEqual({ claimed: ['m2', 'm1'], reason: null });
    expect(
      await ok(await post(asAlpha, `${chatPath(CHAT)}/claims`, { candidateIds: ['m1', 'm3'] })),
    ).toStrictEqual({
      claimed: ['m3'],
      reason: null,
    });
    expect(await ok(await post(asAlpha, `${chatPath(CHAT)}/claims`, { candidateIds: [] }))).toStrictEqual({
      claimed: [],
      reason: null,
    });
    const cursor = await ok(await asAlpha(`${chatPath(CHAT)}/cursor`));
    expect(cursor).toStrictEqual({
      outcome: 'present',
      cursor: {
        lastTs: '2026-11-29T21:00:00Z',
        seenIdsTail: ['m1', 'm2', 'm3'],
        bootstrapped: true,
        lastWrittenAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/) as string,
      },
    });
    // Stored at chat_cursors/<percent-encoded id>.json, readable with the key/value API.
    const raw = await asAlpha('/api/kv/chat_cursors/19%253Ac%2540thread.v2.json');
    expect(JSON.parse(await raw.text())).toMatchObject({
      seen_ids_tail: ['m1', 'm2', 'm3'],
      bootstrapped: true,
    });

    // A corrupt cursor claims nothing, says unresolved, and stays as it is.
    const broken = '19:broken@thread.v2';
    const key = '/api/kv/chat_cursors/19%253Abroken%2540thread.v2.json';
    expect((await asAlpha(key, { method: 'PUT', body: '[1,2,3]' })).status).toBe(201);
    expect(await ok(await asAlpha(`${chatPath(broken)}/cursor`))).toStrictEqual({
      outcome: 'unresolved',
      cursor: null,
    });
    expect(
      await ok(await post(asAlpha, `${chatPath(broken)}/claims`, { candidateIds: ['m1'] })),
    ).toStrictEqual({
      claimed: [],
      reason: 'unresolved',
    });
    expect(await (await asAlpha(key)).text()).toBe('[1,2,3]');
  });

  it('hands each of 40 ids to exactly one of 16 concurrent claimers on an absent cursor', async () => {
    const chat = '19:race@thread.v2';
    const offered = ids(40);
    const claimed: string[][] = await Promise.all(
      Array.from({ length: 16 }, async (_, claimer) => {
        // The same 40 ids, each claimer in its own order; after contention a poller claims again.
        const mine = [...offered.slice(claimer), ...offered.slice(0, claimer)];
        const got: string[] = [];
        for (let round = 0; round < 10; round++) {
          const answer = (await ok(
            await post(asAlpha, `${chatPath(chat)}/claims`, { candidateIds: mine }),
          )) as {
            claimed: string[];
            reason: string | null;
          };
          expect(answer.reason === null || answer.reason === 'contention').toBe(true);
          got.push(...answer.claimed);
          if (answer.reason === null) break;
        }
        return got;
      }),
    );
    expect(claimed.flat().sort()).toEqual(offered);
  });

  it('records, lists and resolves promises; resolving twice changes nothing', async () => {
    const created = await ok(
      await post(asAlpha, '/api/promises', {
        chatId: CHAT,
        description: ' send the report ',
        dueBy: '2026-12-01T09:00:00Z',
      }),
      201,
    );
    expect(created).toStrictEqual({
      id: expect.stringMatching(/^[0-9a-f]{32}$/) as string,
      createdAt: expect.stringMatching(/Z$/) as string,
      chatId: CHAT,
      description: 'send the report',
      dueBy: '2026-12-01T09:00:00Z',
      status: 'open',
    });
    const other = await ok(
      await post(asAlpha, '/api/promises', { chatId: CHAT, description: 'call back' }),
      201,
    );
    expect(other['dueBy']).toBeNull();
    expect(await ok(await asAlpha('/api/promises'))).toStrictEqual({ promises: [created, other] });
    const id = String(created['id']);
    const resolved = await ok(await post(asAlpha, `/api/promises/${id}/resolve`, { resolution: 'sent' }));
    expect(resolved).toStrictEqual({
      ...created,
      status: 'resolved',
      resolvedAt: expect.stringMatching(/Z$/) as string,
      resolution: 'sent',
    });
    const etag = (await asAlpha('/api/kv/promises.jsonl')).headers.get('etag');
    expect(
      await ok(await post(asAlpha, `/api/promises/${id}/resolve`, { resolution: 'again' })),
    ).toStrictEqual(resolved);
    expect((await asAlpha('/api/kv/promises.jsonl')).headers.get('etag')).toBe(etag);
    expect(await ok(await asAlpha('/api/promises?status=open'))).toStrictEqual({ promises: [other] });
    expect(await ok(await asAlpha('/api/promises?status=all'))).toStrictEqual({
      promises: [resolved, other],
    });
    expect(
      (
        await error(
          await post(asAlpha, '/api/promises/0123456789abcdef0123456789abcdef/resolve', { resolution: 'x' }),
          404,
        )
      ).code,
    ).toBe('not_found');
  });

  it('appends interactions to the UTC day and reads a day back', async () => {
    const entry = await ok(
      await post(asAlpha, '/api/interactions', {
        channel: 'teams',
        direction: 'inbound',
        sender: 'ada@contoso.com',
        summary: ' asked for the report ',
        contentRef: 'msg/1',
        metadata: { chatId: CHAT },
      }),
      201,
    );
    expect(entry).toStrictEqual({
      id: expect.any(String) as string,
      ts: expect.stringMatching(/Z$/) as string,
      channel: 'teams',
      direction: 'inbound',
      sender: 'ada@contoso.com',
      summary: 'asked for the report',
      contentRef: 'msg/1',
      metadata: { chatId: CHAT },
    });
    const day = String(entry['ts']).slice(0, 10);
    expect(await ok(await asAlpha(`/api/interactions/${day}`))).toStrictEqual({ entries: [entry] });
    expect(
      (await asAlpha(`/api/kv/interactions/${day}.jsonl`, { method: 'POST', body: 'corrupt\n' })).status,
    ).toBe(200);
    expect(await ok(await asAlpha(`/api/interactions/${day}`))).toStrictEqual({ entries: [entry] });
    expect(await ok(await asAlpha('/api/interactions/2001-01-01'))).toStrictEqual({ entries: [] });
  });

  it('answers bad input on every §5 route with 4xx and the error JSON naming the field, writing nothing', async () => {
    const big = JSON.stringify({ chatIds: ['x'.repeat(300 * 1024)] });
    const cases: [string, string, unknown, number, RegExp][] = [
      ['POST', '/api/poll/email-cursor/init', { now: 'yesterday' }, 400, /^now: /],
      ['POST', '/api/poll/email-cursor/init', { now: '2026-11-29T21:00:00Z', extra: 1 }, 400, /^extra: /],
      ['POST', '/api/poll/email-cursor/init', big, 413, /limit/],
      ['POST', '/api/poll/email-cursor/claim', '{not json', 400, /^body: /],
      [
        'POST',
        '/api/poll/email-cursor/claim',
        { newCursor: 'x', etag: '"a"', claimId: 'c' },
        400,
        /^newCursor: /,
      ],
      [
        'POST',
        '/api/poll/email-cursor/claim',
        { newCursor: '2026-11-29T21:00:00Z', etag: '*', claimId: 'c' },
        400,
        /^etag: /,
      ],
      [
        'POST',
        '/api/poll/email-cursor/claim',
        { newCursor: '2026-11-29T21:00:00Z', etag: '"a"', claimId: 'c d' },
        400,
        /^claimId: /,
      ],
      ['POST', '/api/poll/email-cursor/claim', big, 413, /limit/],
      [
        'POST',
        '/api/poll/email-cursor/settle',
        { newCursor: '2026-11-29T21:00:00Z', etag: '"a"', claimId: 'c', priorClaims: [1] },
        400,
        /^priorClaims\.0: /,
      ],
      ['POST', '/api/poll/email-cursor/settle', [], 400, /^body: /],
      ['POST', '/api/poll/email-cursor/settle', big, 413, /limit/],
      ['POST', '/api/poll/watched-chats', { chatIds: 'x' }, 400, /^chatIds: /],
      ['POST', '/api/poll/watched-chats', {}, 400, /^chatIds: /],
      [
        'POST',
        '/api/poll/watched-chats',
        JSON.stringify({ chatIds: ['x'.repeat(400 * 1024)] }),
        413,
        /limit/,
      ],
      ['GET', `${chatPath('bad id')}/cursor`, undefined, 400, /^chatId: /],
      ['GET', `${chatPath('50%')}/cursor`, undefined, 400, /^chatId: /],
      ['POST', `${chatPath('bad id')}/claims`, { candidateIds: ['m1'] }, 400, /^chatId: /],
      ['POST', `${chatPath(CHAT)}/claims`, { candidateIds: ['ok', ''] }, 400, /^candidateIds\.1: /],
      ['POST', `${chatPath(CHAT)}/claims`, { candidateIds: ['m1'], lastTs: 'now' }, 400, /^lastTs: /],
      ['POST', `${chatPath(CHAT)}/claims`, { ids: ['m1'] }, 400, /^(candidateIds|ids): /],
      // 413 first, even with a bad chat id in the path.
      ['POST', `${chatPath('bad id')}/claims`, big, 413, /limit/],
      ['GET', '/api/promises?status=closed', undefined, 400, /^status: /],
      ['POST', '/api/promises', { chatId: CHAT, description: '   ' }, 400, /^description: /],
      ['POST', '/api/promises', { chatId: '', description: 'x' }, 400, /^chatId: /],
      ['POST', '/api/promises', { chatId: CHAT, description: 'x', dueBy: 'friday' }, 400, /^dueBy: /],
      ['POST', '/api/promises', big, 413, /limit/],
      ['POST', '/api/promises/abc/resolve', { resolution: ' ' }, 400, /^resolution: /],
      ['POST', '/api/promises/abc/resolve', {}, 400, /^resolution: /],
      ['POST', '/api/promises/abc/resolve', big, 413, /limit/],
      [
        'POST',
        '/api/interactions',
        { channel: 'c', direction: 'up', sender: 's', summary: 'x' },
        400,
        /^direction: /,
      ],
      [
        'POST',
        '/api/interactions',
        { channel: ' ', direction: 'inbound', sender: 's', summary: 'x' },
        400,
        /^channel: /,
      ],
      [
        'POST',
        '/api/interactions',
        { channel: 'c', direction: 'inbound', sender: 's', summary: '' },
        400,
        /^summary: /,
      ],
      [
        'POST',
        '/api/interactions',
        { channel: 'c', direction: 'inbound', sender: 's', summary: 'x', metadata: [] },
        400,
        /^metadata: /,
      ],
      ['POST', '/api/interactions', big, 413, /limit/],
      ['GET', '/api/interactions/2026-02-30', undefined, 400, /^day: /],
      ['GET', '/api/interactions/today', undefined, 400, /^day: /],
    ];
    const before = await ok(await asGamma('/api/keys'));
    for (const [method, path, body, status, message] of cases) {
      const response = await asGamma(path, {
        method,
        ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
      });
      const failure = await error(response, status);
      expect(failure.message, `${method} ${path}`).toMatch(message);
      expect(failure.code).toBe(status === 413 ? 'payload_too_large' : 'invalid_argument');
    }
    // Wrong methods are 405 with Allow.
    for (const [method, path] of [
      ['DELETE', '/api/poll/email-cursor'],
      ['GET', '/api/poll/email-cursor/claim'],
      ['PUT', '/api/poll/watched-chats'],
      ['POST', `${chatPath(CHAT)}/cursor`],
      ['GET', `${chatPath(CHAT)}/claims`],
      ['DELETE', '/api/promises'],
      ['GET', '/api/promises/abc/resolve'],
      ['GET', '/api/interactions'],
    ] as const) {
      const response = await asGamma(path, { method });
      expect((await error(response, 405)).code, `${method} ${path}`).toBe('method_not_allowed');
      expect(response.headers.get('allow')).toBeTruthy();
    }
    expect(await ok(await asGamma('/api/keys'))).toStrictEqual(before);
  });

  it("keeps every tenant's coordination state to itself on every §5 route", async () => {
    // alpha has an (unresolved) email cursor, watched chats, chat cursors, promises and interactions.
    expect(await ok(await asBeta('/api/poll/email-cursor'))).toStrictEqual({
      outcome: 'absent',
      cursor: null,
      etag: null,
      recentClaims: [],
    });
    const alphaRequest = { newCursor: '2026-11-29T22:00:00Z', etag: '"x"', claimId: 'claim-1' };
    expect(await ok(await post(asBeta, '/api/poll/email-cursor/claim', alphaRequest))).toStrictEqual({
      result: 'lost',
    });
    expect(await ok(await post(asBeta, '/api/poll/email-cursor/settle', alphaRequest))).toStrictEqual({
      result: null,
    });
    expect(await ok(await asBeta('/api/poll/watched-chats'))).toStrictEqual({
      outcome: 'absent',
      chatIds: [],
      etag: null,
    });
    expect(await ok(await asBeta(`${chatPath(CHAT)}/cursor`))).toStrictEqual({
      outcome: 'absent',
      cursor: null,
    });
    // beta's cursor of the same chat is its own: alpha's deliveries do not count for it.
    expect(
      await ok(await post(asBeta, `${chatPath(CHAT)}/claims`, { candidateIds: ['m1', 'm3'] })),
    ).toStrictEqual({
      claimed: ['m1', 'm3'],
      reason: null,
    });
    expect((await ok(await asAlpha(`${chatPath(CHAT)}/cursor`)))['cursor']).toMatchObject({
      seenIdsTail: ['m1', 'm2', 'm3'],
    });
    expect(await ok(await asBeta('/api/promises?status=all'))).toStrictEqual({ promises: [] });
    const alphaPromise = ((await ok(await asAlpha('/api/promises?status=all')))['promises'] as Json[])[0];
    expect(
      (
        await error(
          await post(asBeta, `/api/promises/${String(alphaPromise?.['id'])}/resolve`, { resolution: 'x' }),
          404,
        )
      ).code,
    ).toBe('not_found');
    const today = new Date().toISOString().slice(0, 10);
    expect(
      ((await ok(await asAlpha(`/api/interactions/${today}`)))['entries'] as unknown[]).length,
    ).toBeGreaterThan(0);
    expect(await ok(await asBeta(`/api/interactions/${today}`))).toStrictEqual({ entries: [] });
    expect(await ok(await post(asBeta, '/api/poll/email-cursor/init', {}))).toStrictEqual({
      initialized: true,
    });
    expect((await ok(await asAlpha('/api/poll/email-cursor')))['outcome']).toBe('unresolved');
  });

  it("runs the emailWindowPoll timer: each initialised tenant's window is enqueued, corrupt cursors are left alone", async () => {
    // alpha's cursor is corrupt (above), beta's is at "now"; gamma starts an hour ago.
    const start = new Date(Date.now() - 3_600_000).toISOString();
    expect(await ok(await post(asGamma, '/api/poll/email-cursor/init', { now: start }))).toStrictEqual({
      initialized: true,
    });
    await drainQueue(queue);
    expect((await runTimer(app, 'emailWindowPoll')).status).toBe(202);
    const messages = await messagesOn(queue, 2);
    const gammaWindows = messages.filter((m) => m.tenant === gamma.tenant);
    expect(gammaWindows).toStrictEqual([
      {
        tenant: gamma.tenant,
        from: start,
        to: expect.stringMatching(/Z$/) as string,
        claimId: expect.any(String) as string,
      },
    ]);
    expect(messages.filter((m) => m.tenant === alpha.tenant)).toEqual([]);
    expect(messages.map((m) => m.tenant).sort()).toEqual([beta.tenant, gamma.tenant].sort());
    const cursor = await ok(await asGamma('/api/poll/email-cursor'));
    expect(cursor).toMatchObject({
      outcome: 'present',
      cursor: gammaWindows[0]?.to,
      recentClaims: [gammaWindows[0]?.claimId],
    });
    expect(await (await asAlpha('/api/kv/poll_state/email_cursor.txt')).text()).toBe('soon');
    expect(app.output()).toContain('cursor_unresolved');
  });
});
