import { randomBytes, randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';

import { CairnClient, CairnHttpError, CairnNetworkError, CairnTimeoutError } from '@cairn-state/client';
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
import { sessionIndexSettings } from '../support/tables';

/**
 * Every route family through `CairnClient` against the real app over HTTP, on both backends, with
 * the typed errors a caller handles; then the retry rule against stub servers that never answer,
 * answer 503 or refuse connections.
 */

const temporary: string[] = [];

async function folder(files: Record<string, string | Buffer> = {}): Promise<string> {
  const root = await mkdtemp(path.join(os.tmpdir(), 'cairn-client-'));
  temporary.push(root);
  for (const [name, content] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(root, name)), { recursive: true });
    await writeFile(path.join(root, name), content);
  }
  return root;
}

afterAll(async () => {
  await Promise.all(temporary.splice(0).map((root) => rm(root, { recursive: true, force: true })));
});

/** The error a promise rejects with (fails the test when it resolves). */
async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => expect.fail('expected a rejection'),
    (error: unknown) => error,
  );
}

describe.each<Backend>(['local', 'blob'])('CairnClient on the %s backend', (backend) => {
  const agent = newTenant('agent');
  const admin = newTenant('ops', true);
  const settings = backendSettings(backend, azurite().blobEndpoint);
  let app: RunningApp;
  let cairn: CairnClient;

  beforeAll(async () => {
    app = await startApp({
      CAIRN_API_KEYS: apiKeysSetting([agent, admin]),
      // Migrations copy from the test's temporary folders only.
      CAIRN_MIGRATION_SOURCE_ROOTS: os.tmpdir(),
      ...settings,
      ...sessionIndexSettings(azurite().tableEndpoint),
      // The email poll timer would move the cursor this test claims: once a year, at new year.
      CAIRN_EMAIL_POLL_SCHEDULE: '0 0 0 1 1 *',
    });
    // With the /api suffix here; the archive test and the CLI pass the bare origin.
    cairn = new CairnClient({ url: `${app.url}/api/`, token: agent.key });
  });
  afterAll(async () => {
    await app?.stop();
    if (settings['CAIRN_DATA_DIR'] !== undefined)
      await rm(settings['CAIRN_DATA_DIR'], { recursive: true, force: true });
  });

  it('health: the backend, without a credential', async () => {
    const health = await new CairnClient({ url: app.url, token: 'not a key' }).health();
    expect(health).toMatchObject({ status: 'ok', backend });
  });

  it('kv: get, head, put, append and delete with ETags and conditions; typed 404, 412 and 400', async () => {
    const key = `notes/${randomUUID()}/to day.md`;
    expect(await cairn.kv.get(key)).toBeNull();
    expect(await cairn.kv.head(key)).toBeNull();

    const created = await cairn.kv.put(key, '# today', { ifNoneMatch: '*' });
    expect(created).toMatchObject({ key, size: 7, created: true });
    const stored = await cairn.kv.get(key);
    expect(stored?.value.toString()).toBe('# today');
    expect(stored?.etag).toBe(created.etag);
    expect(await cairn.kv.head(key)).toEqual({ etag: created.etag, size: 7 });

    const replaced = await cairn.kv.put(key, Buffer.from('# today, later'), { ifMatch: created.etag });
    expect(replaced).toMatchObject({ created: false, size: 14 });
    expect(replaced.etag).not.toBe(created.etag);

    // A stale ETag: 412 with the current one, nothing written.
    const stale = await rejection(cairn.kv.put(key, 'lost update', { ifMatch: created.etag }));
    expect(stale).toBeInstanceOf(CairnHttpError);
    expect(stale).toMatchObject({ status: 412, code: 'precondition_failed', etag: replaced.etag });
    expect((stale as CairnHttpError).isCallerError).toBe(true);
    expect((await rejection(cairn.kv.put(key, 'x', { ifNoneMatch: '*' }))) as CairnHttpError).toMatchObject({
      status: 412,
      etag: replaced.etag,
    });

    const appended = await cairn.kv.append(key, '\n- one', { ifMatch: replaced.etag });
    expect(appended).toMatchObject({ created: false, size: 20 });
    expect((await cairn.kv.append(`${key}.log`, 'a')).created).toBe(true);
    expect((await cairn.kv.get(key))?.value.toString()).toBe('# today, later\n- one');

    expect(await rejection(cairn.kv.delete(key, { ifMatch: replaced.etag }))).toMatchObject({ status: 412 });
    await cairn.kv.delete(key, { ifMatch: appended.etag });
    await cairn.kv.delete(key);
    expect(await cairn.kv.get(key)).toBeNull();

    // Another tenant's key is as absent as a missing one.
    const other = new CairnClient({ url: app.url, token: admin.key });
    expect(await other.kv.get(`${key}.log`)).toBeNull();

    const invalid = await rejection(cairn.kv.put(`${key}\u0001`, 'x'));
    expect(invalid).toMatchObject({ status: 400, code: 'invalid_argument' });
    // A dot segment would be resolved on the way (to the key `b`): refused before sending.
    await expect(cairn.kv.put('a/../b', 'x')).rejects.toThrow(TypeError);
    expect(await cairn.kv.get('b')).toBeNull();
    const unauthorized = await rejection(new CairnClient({ url: app.url, token: 'wrong' }).kv.get('a'));
    expect(unauthorized).toMatchObject({ status: 401, code: 'unauthorized' });
    expect((unauthorized as CairnHttpError).requestId).toMatch(/./);
  });

  it('kv: list pages through every key under a prefix, each once, in order', async () => {
    const prefix = `list-${randomUUID()}/`;
    const keys = Array.from({ length: 7 }, (_, n) => `${prefix}k${n}`);
    await Promise.all(keys.map((key) => cairn.kv.put(key, key)));
    await cairn.kv.put(`${prefix.slice(0, -1)}-elsewhere`, 'not listed');

    const listed: string[] = [];
    for await (const key of cairn.kv.list({ prefix, pageSize: 3 })) listed.push(key);
    expect(listed).toEqual(keys);
    const first = await cairn.kv.listPage({ prefix, pageSize: 5 });
    expect(first.keys).toEqual(keys.slice(0, 5));
    expect(await cairn.kv.listPage({ prefix, pageSize: 5, cursor: first.cursor })).toEqual({
      keys: keys.slice(5),
      cursor: null,
    });
    expect(await rejection(cairn.kv.listPage({ pageSize: 0 }))).toMatchObject({
      status: 400,
      code: 'invalid_argument',
    });
  });

  it('sessions: publish, read manifests, get and list sessions, restore; typed 404 and 403', async () => {
    const events = randomBytes(70_000);
    const dir = await folder({ 'events.jsonl': events });
    const sessionId = `s-${randomBytes(4).toString('hex')}`;
    expect(await cairn.sessions.latestCheckpointId(sessionId)).toBeNull();
    const missing = await rejection(cairn.sessions.readManifest(sessionId));
    expect(missing).toBeInstanceOf(CairnHttpError);
    expect(missing).toMatchObject({ status: 404, code: 'not_found' });
    expect(await rejection(cairn.sessions.getSession(sessionId))).toMatchObject({ code: 'not_found' });

    const published = await cairn.sessions.publishCheckpoint(dir, sessionId, { data: { turn: 1 } });
    expect(published).toMatchObject({ parent: null, files: 1, objectsUploaded: 2 });
    const manifest = await cairn.sessions.readManifest(sessionId);
    expect(manifest).toMatchObject({ checkpointId: published.checkpointId, data: { turn: 1 } });
    expect(await cairn.sessions.readManifest(sessionId, published.checkpointId)).toEqual(manifest);
    expect(await cairn.sessions.getSession(sessionId)).toMatchObject({
      id: sessionId,
      checkpointId: published.checkpointId,
      data: { turn: 1 },
    });

    const second = `${sessionId}-b`;
    await cairn.sessions.publishCheckpoint(await folder({ 'native/x.json': '{}' }), second);
    const listed = [];
    for await (const record of cairn.sessions.listSessions({ pageSize: 1 })) listed.push(record.id);
    expect(listed).toEqual(expect.arrayContaining([sessionId, second]));
    expect(listed).toEqual([...listed].sort());
    const page = await cairn.sessions.listSessionsPage({ limit: 1 });
    expect(page.sessions).toHaveLength(1);
    expect(page.next).toBe(page.sessions[0]?.id);

    const restored = path.join(await folder(), 'restored');
    expect(await cairn.sessions.restoreCheckpoint(sessionId, restored)).toMatchObject({ files: 1 });
    expect((await readFile(path.join(restored, 'events.jsonl'))).equals(events)).toBe(true);

    const intruder = new CairnClient({ url: app.url, token: admin.key });
    const refused = await rejection(intruder.sessions.publishCheckpoint(dir, sessionId));
    expect(refused).toMatchObject({ status: 403, code: 'forbidden' });
  });

  it('coordination: email cursor, watched chats, chat cursors and claims, promises, interactions', async () => {
    const coordination = cairn.coordination;

    expect(await coordination.readEmailCursor()).toMatchObject({
      outcome: 'absent',
      cursor: null,
      etag: null,
    });
    expect(await coordination.initEmailCursor({ now: '2026-11-29T21:00:00.000Z' })).toBe(true);
    expect(await coordination.initEmailCursor()).toBe(false);
    const cursor = await coordination.readEmailCursor();
    expect(cursor).toMatchObject({ outcome: 'present', cursor: '2026-11-29T21:00:00.000Z' });
    const claim = {
      newCursor: '2026-11-29T21:05:00.000Z',
      etag: cursor.etag ?? '',
      claimId: `claim-${randomUUID()}`,
    };
    expect(await coordination.claimEmailWindow(claim)).toBe('won');
    expect(await coordination.claimEmailWindow({ ...claim, claimId: `claim-${randomUUID()}` })).toBe('lost');
    expect(await coordination.settleEmailClaim(claim)).toBe(true);
    expect((await coordination.readEmailCursor()).recentClaims).toContain(claim.claimId);

    const chat = `chat-${randomUUID()}`;
    expect(await coordination.addWatchedChats([chat, chat])).toEqual({ persisted: true, added: [chat] });
    expect(await coordination.addWatchedChats([chat])).toEqual({ persisted: true, added: [] });
    expect((await coordination.getWatchedChats()).chatIds).toContain(chat);
    expect(await rejection(coordination.addWatchedChats(['has space']))).toMatchObject({
      status: 400,
      code: 'invalid_argument',
    });

    expect(await coordination.readChatCursor(chat)).toEqual({ outcome: 'absent', cursor: null });
    const claimed = await coordination.claimChatMessages(chat, { candidateIds: ['m1', 'm2'] });
    expect(claimed).toEqual({ claimed: ['m1', 'm2'], reason: null });
    expect(await coordination.claimChatMessages(chat, { candidateIds: ['m2', 'm3'] })).toEqual({
      claimed: ['m3'],
      reason: null,
    });
    expect((await coordination.readChatCursor(chat)).cursor?.seenIdsTail).toEqual(
      expect.arrayContaining(['m1', 'm2', 'm3']),
    );

    const promise = await coordination.addPromise({ chatId: chat, description: 'send the report' });
    expect(promise).toMatchObject({ chatId: chat, status: 'open', dueBy: null });
    expect((await coordination.listPromises()).map((p) => p.id)).toContain(promise.id);
    const resolved = await coordination.resolvePromise(promise.id, 'sent');
    expect(resolved).toMatchObject({ id: promise.id, status: 'resolved', resolution: 'sent' });
    expect(await coordination.resolvePromise(promise.id, 'sent again')).toEqual(resolved);
    expect((await coordination.listPromises()).map((p) => p.id)).not.toContain(promise.id);
    expect((await coordination.listPromises('all')).map((p) => p.id)).toContain(promise.id);
    expect(await rejection(coordination.resolvePromise('no-such-promise', 'x'))).toMatchObject({
      status: 404,
      code: 'not_found',
    });

    const entry = await coordination.appendInteraction({
      channel: 'teams',
      direction: 'inbound',
      sender: 'ada',
      summary: `asked for the report ${chat}`,
    });
    expect(entry).toMatchObject({ channel: 'teams', direction: 'inbound' });
    const day = entry.ts.slice(0, 10);
    expect((await coordination.readInteractions(day)).map((e) => e.id)).toContain(entry.id);
    expect(await rejection(coordination.readInteractions('yesterday'))).toMatchObject({ status: 400 });
  });

  it('migrations: start, get and wait on the blob backend; 501 not_configured on the local one; 403 without admin', async () => {
    const ops = new CairnClient({ url: app.url, token: admin.key });
    const root = await folder({ 'a.txt': 'A', 'sub/b.txt': 'B' });
    const request = { tenant: agent.tenant, sources: [{ root, prefix: `mig-${randomUUID()}` }] };
    expect(await rejection(cairn.migrations.start(request))).toMatchObject({
      status: 403,
      code: 'forbidden',
    });
    if (backend === 'local') {
      expect(await rejection(ops.migrations.start(request))).toMatchObject({
        status: 501,
        code: 'not_configured',
      });
      return;
    }
    const { id, statusUri } = await ops.migrations.start(request);
    expect(statusUri).toContain(id);
    const seen: string[] = [];
    const done = await ops.migrations.wait(id, {
      pollMs: 100,
      onProgress: (status) => seen.push(status.status),
    });
    expect(done).toMatchObject({ id, status: 'completed', report: { copied: 2, skipped: 0, errors: [] } });
    expect(seen.at(-1)).toBe('completed');
    expect(await ops.migrations.get(id)).toEqual(done);
    expect((await cairn.kv.get(`${request.sources[0]?.prefix}/sub/b.txt`))?.value.toString()).toBe('B');
    expect(await rejection(ops.migrations.get('no-such-migration'))).toMatchObject({ status: 404 });
  });
});

/** A server on a free port; `stop` closes it and every connection it holds. */
async function stubServer(handle: (request: http.IncomingMessage, response: http.ServerResponse) => void) {
  const requests: string[] = [];
  const server = http.createServer((request, response) => {
    requests.push(`${request.method} ${request.url}`);
    request.resume();
    handle(request, response);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe('the retry rule', () => {
  it('does not send a non-idempotent POST again after a timeout; retries an idempotent request', async () => {
    const silent = await stubServer(() => {
      // Accepts every request and never answers.
    });
    try {
      const cairn = new CairnClient({ url: silent.url, token: 'k', timeoutMs: 300, attempts: 3 });
      const append = await rejection(cairn.kv.append('log', 'one line'));
      expect(append).toBeInstanceOf(CairnTimeoutError);
      expect(append).toMatchObject({ attempts: 1, maybeReceived: true, timeoutMs: 300 });
      expect(silent.requests).toEqual(['POST /api/kv/log']);

      for (const call of [
        () => cairn.coordination.addPromise({ chatId: 'c', description: 'd' }),
        () => cairn.coordination.claimChatMessages('c', { candidateIds: ['m'] }),
        () =>
          cairn.coordination.appendInteraction({
            channel: 'x',
            direction: 'inbound',
            sender: 's',
            summary: 's',
          }),
      ]) {
        silent.requests.length = 0;
        expect(await rejection(call())).toMatchObject({ attempts: 1 });
        expect(silent.requests).toHaveLength(1);
      }

      silent.requests.length = 0;
      const read = await rejection(cairn.kv.get('log'));
      expect(read).toMatchObject({ name: 'CairnTimeoutError', attempts: 3 });
      expect(silent.requests).toEqual(Array(3).fill('GET /api/kv/log'));
      // Resolving a promise twice changes nothing: it is retried like a read.
      silent.requests.length = 0;
      expect(await rejection(cairn.coordination.resolvePromise('p1', 'done'))).toMatchObject({ attempts: 3 });
      expect(silent.requests).toHaveLength(3);
    } finally {
      await silent.stop();
    }
  });

  it('retries a 503 for an idempotent request only, and a 429 for any; ends with the typed error', async () => {
    let status = 503;
    const busy = await stubServer((_request, response) => {
      response.writeHead(status, { 'content-type': 'application/json', 'retry-after': '0' });
      response.end(JSON.stringify({ error: { code: 'storage_unavailable', message: 'try again' } }));
    });
    try {
      const cairn = new CairnClient({ url: busy.url, token: 'k', attempts: 3 });
      const append = await rejection(cairn.kv.append('log', 'x'));
      expect(append).toMatchObject({ status: 503, code: 'storage_unavailable', isTransient: true });
      expect(busy.requests).toHaveLength(1);
      busy.requests.length = 0;
      expect(await rejection(cairn.kv.put('log', 'x'))).toMatchObject({ status: 503 });
      expect(busy.requests).toHaveLength(3);

      status = 429;
      busy.requests.length = 0;
      expect(await rejection(cairn.kv.append('log', 'x'))).toMatchObject({ status: 429 });
      expect(busy.requests).toHaveLength(3);
    } finally {
      await busy.stop();
    }
  });

  it('retries any request that never reached the service (connection refused)', async () => {
    const gone = await stubServer(() => {});
    await gone.stop();
    const cairn = new CairnClient({ url: gone.url, token: 'k', attempts: 3 });
    const error = await rejection(cairn.kv.append('log', 'x'));
    expect(error).toBeInstanceOf(CairnNetworkError);
    expect(error).not.toBeInstanceOf(CairnTimeoutError);
    expect(error).toMatchObject({ maybeReceived: false, attempts: 3 });
  });
});

describe('error answers', () => {
  it("reads Cairn's error JSON into code, message and details, and anything else by its status alone", async () => {
    const bodies: Record<string, string> = {
      '/api/kv/cairn': JSON.stringify({
        error: { code: 'thread_busy', message: 'held by run r1', runId: 'r1', retryAfter: 7 },
      }),
      // A proxy's JSON, not the error JSON of the protocol's ErrorBody.
      '/api/kv/proxy': JSON.stringify({ error: 'Bad Gateway' }),
      '/api/kv/html': '<html>502 Bad Gateway</html>',
      '/api/kv/no-code': JSON.stringify({ error: { message: 'no code' } }),
    };
    const stub = await stubServer((request, response) => {
      response.writeHead(409, { 'content-type': 'application/json', 'x-request-id': 'req-1' });
      response.end(bodies[request.url ?? ''] ?? '');
    });
    try {
      const cairn = new CairnClient({ url: stub.url, token: 'k', attempts: 1 });
      const known = await rejection(cairn.kv.get('cairn'));
      expect(known).toBeInstanceOf(CairnHttpError);
      expect(known).toMatchObject({
        status: 409,
        code: 'thread_busy',
        message: '409 thread_busy: held by run r1',
        details: { runId: 'r1', retryAfter: 7 },
        requestId: 'req-1',
      });
      for (const key of ['proxy', 'html', 'no-code']) {
        expect(await rejection(cairn.kv.get(key))).toMatchObject({
          status: 409,
          code: 'unknown',
          message: '409 unknown: HTTP 409',
          details: {},
        });
      }
    } finally {
      await stub.stop();
    }
  });
});
