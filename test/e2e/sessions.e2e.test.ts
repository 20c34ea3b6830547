import { randomBytes } from 'node:crypto';
import { rm, writeFile } from 'node:fs/promises';
import path from 'node:path';

import { BlobServiceClient, StorageSharedKeyCredential } from '@azure/storage-blob';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import { BLOCK_BYTES } from '../../shared/protocol/archive/identifiers';
import {
  apiKeysSetting,
  type Backend,
  backendSettings,
  client,
  newTenant,
  rawRequest,
  type RunningApp,
  startApp,
} from '../support/app';
import { sha256, splitFile } from '../support/archiveTestKit';
import { azurite } from '../support/azurite';
import { sessionIndexSettings } from '../support/tables';

/** Session archives over real HTTP, against the app served by the local runtime, on both backends. */

type Caller = ReturnType<typeof client>;

interface ErrorBody {
  code: string;
  message: string;
  [detail: string]: unknown;
}

async function errorOf(response: Response): Promise<ErrorBody> {
  expect(response.headers.get('content-type')).toContain('application/json');
  return ((await response.json()) as { error: ErrorBody }).error;
}

const uniqueSession = (name: string) => `${name}-${randomBytes(4).toString('hex')}`;

function putObject(as: Caller, sessionId: string, key: string, bytes: Buffer) {
  return as(`/api/sessions/${sessionId}/objects/${key}`, { method: 'PUT', body: bytes });
}

function publish(as: Caller, sessionId: string, body: unknown) {
  return as(`/api/sessions/${sessionId}/checkpoints`, {
    method: 'POST',
    body: typeof body === 'string' ? body : JSON.stringify(body),
    headers: { 'content-type': 'application/json' },
  });
}

/** Uploads a file's objects (8 at a time) and returns its manifest entry. */
async function uploadFile(
  as: Caller,
  sessionId: string,
  checkpointId: string,
  filePath: string,
  bytes: Buffer,
  generation: string,
) {
  const { objects, file } = splitFile(filePath, bytes, generation, checkpointId);
  for (let start = 0; start < objects.length; start += 8) {
    const statuses = await Promise.all(
      objects
        .slice(start, start + 8)
        .map(async ([key, object]) => (await putObject(as, sessionId, key, object)).status),
    );
    for (const status of statuses) expect([200, 201]).toContain(status);
  }
  return file;
}

describe.each<Backend>(['local', 'blob'])('session archive API on the %s backend', (backend) => {
  const alpha = newTenant('alpha');
  const beta = newTenant('beta');
  let app: RunningApp;
  let settings: Record<string, string>;
  let asAlpha: Caller;
  let asBeta: Caller;
  let anonymous: Caller;

  beforeAll(async () => {
    settings = {
      CAIRN_API_KEYS: apiKeysSetting([alpha, beta]),
      ...backendSettings(backend, azurite().blobEndpoint),
      ...sessionIndexSettings(azurite().tableEndpoint),
    };
    app = await startApp(settings);
    asAlpha = client(app.url, alpha.key);
    asBeta = client(app.url, beta.key);
    anonymous = client(app.url);
  });
  afterAll(async () => app.stop());

  /** Replaces stored archive bytes behind the app's back. */
  async function tamper(key: string, bytes: Buffer): Promise<void> {
    if (backend === 'local') {
      const file = path.join(settings['CAIRN_DATA_DIR'] ?? '', 'sessions', key);
      await rm(file);
      await writeFile(file, bytes);
      return;
    }
    const service = new BlobServiceClient(
      azurite().blobEndpoint,
      new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY),
    );
    const container = service.getContainerClient(settings['CAIRN_BLOB_CONTAINER'] ?? '');
    await container.getBlockBlobClient(`sessions/${key}`).upload(bytes, bytes.length);
  }

  it('stores objects, publishes, and serves manifests, files and the index', async () => {
    const sid = uniqueSession('flow');
    const events = randomBytes(2 * BLOCK_BYTES + 300);
    const block0 = events.subarray(0, BLOCK_BYTES);
    const first = await putObject(asAlpha, sid, 'blocks/g1/0', block0);
    expect(first.status).toBe(201);
    expect(await first.json()).toEqual({ key: 'blocks/g1/0', size: BLOCK_BYTES });
    expect((await putObject(asAlpha, sid, 'blocks/g1/0', block0)).status).toBe(200);
    const clash = await putObject(asAlpha, sid, 'blocks/g1/0', randomBytes(BLOCK_BYTES));
    expect(clash.status).toBe(409);
    expect((await errorOf(clash)).code).toBe('conflict');
    const read = await asAlpha(`/api/sessions/${sid}/objects/blocks/g1/0`);
    expect(read.status).toBe(200);
    expect(read.headers.get('content-type')).toBe('application/octet-stream');
    expect(Buffer.from(await read.arrayBuffer()).equals(block0)).toBe(true);
    expect((await asAlpha(`/api/sessions/${sid}/objects/blocks/g1/9`)).status).toBe(404);

    const file = await uploadFile(asAlpha, sid, 'c1', 'events.jsonl', events, 'g1');
    const note = Buffer.from('{"native": true}\n');
    const native = await uploadFile(asAlpha, sid, 'c1', 'native/pi/session.json', note, 'g2');
    expect(await asAlpha(`/api/sessions/${sid}`).then((r) => r.status)).toBe(404);
    const published = await publish(asAlpha, sid, {
      checkpointId: 'c1',
      parent: null,
      files: [file, native],
      data: { title: 'first run' },
    });
    expect(published.status).toBe(201);
    expect(await published.json()).toEqual({ checkpointId: 'c1', latest: 'c1' });

    const latest = await asAlpha(`/api/sessions/${sid}/checkpoints/latest`);
    expect(latest.status).toBe(200);
    const manifest = (await latest.json()) as Record<string, unknown>;
    expect(manifest).toEqual({
      checkpointId: 'c1',
      parent: null,
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/) as string,
      files: [file, native],
      data: { title: 'first run' },
    });
    expect(await (await asAlpha(`/api/sessions/${sid}/checkpoints/c1`)).json()).toEqual(manifest);
    expect((await asAlpha(`/api/sessions/${sid}/checkpoints/c2`)).status).toBe(404);

    const bytes = await asAlpha(`/api/sessions/${sid}/checkpoints/c1/files/events.jsonl`);
    expect(bytes.status).toBe(200);
    expect(bytes.headers.get('content-length')).toBe(String(events.length));
    expect(Buffer.from(await bytes.arrayBuffer()).equals(events)).toBe(true);
    const nested = await asAlpha(`/api/sessions/${sid}/checkpoints/latest/files/native/pi/session.json`);
    expect(Buffer.from(await nested.arrayBuffer()).equals(note)).toBe(true);
    expect((await asAlpha(`/api/sessions/${sid}/checkpoints/c1/files/native/other`)).status).toBe(404);

    const record = await asAlpha(`/api/sessions/${sid}`);
    expect(record.status).toBe(200);
    const shown = (await record.json()) as Record<string, unknown>;
    expect(shown).toEqual({
      id: sid,
      checkpointId: 'c1',
      updatedAt: expect.stringMatching(/Z$/) as string,
      data: { title: 'first run' },
    });
    const list = (await (await asAlpha('/api/sessions')).json()) as { sessions: unknown[]; next: unknown };
    expect(list.sessions).toContainEqual(shown);
  });

  it('streams a large file byte for byte', async () => {
    const sid = uniqueSession('large');
    const events = randomBytes(48 * BLOCK_BYTES + 12_345);
    const file = await uploadFile(asAlpha, sid, 'c1', 'events.jsonl', events, 'g1');
    expect((await publish(asAlpha, sid, { checkpointId: 'c1', parent: null, files: [file] })).status).toBe(
      201,
    );
    const response = await asAlpha(`/api/sessions/${sid}/checkpoints/c1/files/events.jsonl`);
    expect(response.status).toBe(200);
    expect(response.headers.get('repr-digest')).toBe(
      `sha-256=:${Buffer.from(file.sha256, 'hex').toString('base64')}:`,
    );
    expect(sha256(Buffer.from(await response.arrayBuffer()))).toBe(file.sha256);
  });

  it('names missing objects, tells a stale publisher the latest, and answers retries alike', async () => {
    const sid = uniqueSession('publish');
    const v1 = randomBytes(BLOCK_BYTES + 10);
    const f1 = await uploadFile(asAlpha, sid, 'c1', 'events.jsonl', v1, 'g1');
    const missing = await publish(asAlpha, sid, {
      checkpointId: 'c1',
      parent: null,
      files: [f1, { path: 'native/x', generation: 'g2', size: 5, sha256: sha256(Buffer.from('12345')) }],
    });
    expect(missing.status).toBe(422);
    const missingError = await errorOf(missing);
    expect(missingError.code).toBe('missing_objects');
    expect(missingError['missing']).toEqual(['tails/c1/g2']);
    expect((await asAlpha(`/api/sessions/${sid}/checkpoints/latest`)).status).toBe(404);

    const body = { checkpointId: 'c1', parent: null, files: [f1], data: { n: 1 } };
    const created = await publish(asAlpha, sid, body);
    expect(created.status).toBe(201);
    const retried = await publish(asAlpha, sid, body);
    expect(retried.status).toBe(201);
    expect(await retried.json()).toEqual({ checkpointId: 'c1', latest: 'c1' });
    const different = await publish(asAlpha, sid, { ...body, data: { n: 2 } });
    expect(different.status).toBe(409);
    expect((await errorOf(different)).code).toBe('conflict');

    const v2 = Buffer.concat([v1, randomBytes(70)]);
    const f2 = await uploadFile(asAlpha, sid, 'c2', 'events.jsonl', v2, 'g1');
    const stale = await publish(asAlpha, sid, { checkpointId: 'c2', parent: null, files: [f2] });
    expect(stale.status).toBe(409);
    const staleError = await errorOf(stale);
    expect(staleError).toMatchObject({ code: 'conflict', latest: 'c1' });
    expect((await publish(asAlpha, sid, { checkpointId: 'c2', parent: 'c1', files: [f2] })).status).toBe(201);
    const restored = await asAlpha(`/api/sessions/${sid}/checkpoints/latest/files/events.jsonl`);
    expect(Buffer.from(await restored.arrayBuffer()).equals(v2)).toBe(true);
    expect(
      ((await (await asAlpha(`/api/sessions/${sid}`)).json()) as { checkpointId: string }).checkpointId,
    ).toBe('c2');
  });

  it('of 10 concurrent publishers on one parent exactly one wins, the others get 409 with latest', async () => {
    const sid = uniqueSession('race');
    const base = await uploadFile(asAlpha, sid, 'c0', 'events.jsonl', randomBytes(100), 'g0');
    expect((await publish(asAlpha, sid, { checkpointId: 'c0', parent: null, files: [base] })).status).toBe(
      201,
    );
    const bodies = await Promise.all(
      Array.from({ length: 10 }, async (_, i) => ({
        checkpointId: `c${i + 1}`,
        parent: 'c0',
        files: [await uploadFile(asAlpha, sid, `c${i + 1}`, 'events.jsonl', randomBytes(200), `g${i + 1}`)],
      })),
    );
    const responses = await Promise.all(bodies.map((body) => publish(asAlpha, sid, body)));
    const winners = responses.flatMap((response, i) => (response.status === 201 ? [`c${i + 1}`] : []));
    expect(winners).toHaveLength(1);
    for (const response of responses) {
      if (response.status === 201) continue;
      expect(response.status).toBe(409);
      expect(await errorOf(response)).toMatchObject({ code: 'conflict', latest: winners[0] });
    }
    const latest = (await (await asAlpha(`/api/sessions/${sid}/checkpoints/latest`)).json()) as {
      checkpointId: string;
    };
    expect(latest.checkpointId).toBe(winners[0]);
  });

  it('gives a new session to exactly one of many concurrent first writers from two tenants', async () => {
    const sid = uniqueSession('contested');
    const callers = Array.from({ length: 12 }, (_, i) => (i % 2 === 0 ? asAlpha : asBeta));
    const responses = await Promise.all(
      callers.map((as, i) => putObject(as, sid, `blocks/g${i}/0`, randomBytes(BLOCK_BYTES))),
    );
    const alphaWon = responses[0]?.status === 201;
    for (const [i, response] of responses.entries()) {
      const mine = (i % 2 === 0) === alphaWon;
      expect(response.status, `writer ${i}`).toBe(mine ? 201 : 403);
      if (!mine)
        expect(await errorOf(response)).toMatchObject({ code: 'forbidden', message: 'tenant mismatch' });
    }
  });

  it("isolates tenants on every route: another tenant's write is 403 tenant mismatch, its read 404", async () => {
    const sid = uniqueSession('private');
    const events = randomBytes(BLOCK_BYTES + 5);
    const file = await uploadFile(asAlpha, sid, 'c1', 'events.jsonl', events, 'g1');
    expect((await publish(asAlpha, sid, { checkpointId: 'c1', parent: null, files: [file] })).status).toBe(
      201,
    );

    const writes = [
      await putObject(asBeta, sid, 'blocks/g9/0', randomBytes(BLOCK_BYTES)),
      await putObject(asBeta, sid, 'blocks/g1/0', events.subarray(0, BLOCK_BYTES)),
      await publish(asBeta, sid, { checkpointId: 'c2', parent: 'c1', files: [file] }),
    ];
    for (const response of writes) {
      expect(response.status).toBe(403);
      expect(await errorOf(response)).toMatchObject({ code: 'forbidden', message: 'tenant mismatch' });
    }
    for (const route of [
      `/api/sessions/${sid}`,
      `/api/sessions/${sid}/objects/blocks/g1/0`,
      `/api/sessions/${sid}/checkpoints/latest`,
      `/api/sessions/${sid}/checkpoints/c1`,
      `/api/sessions/${sid}/checkpoints/c1/files/events.jsonl`,
      `/api/sessions/${sid}/checkpoints/latest/files/events.jsonl`,
    ]) {
      const response = await asBeta(route);
      expect(response.status, route).toBe(404);
      expect((await errorOf(response)).code).toBe('not_found');
      // Exactly as for a session nobody has.
      expect((await asBeta(route.replace(sid, uniqueSession('nobody')))).status, route).toBe(404);
    }
    const list = (await (await asBeta('/api/sessions?limit=1000')).json()) as { sessions: { id: string }[] };
    expect(list.sessions.map((s) => s.id)).not.toContain(sid);
    // Nothing of beta's landed: alpha's session is as it was.
    expect((await asAlpha(`/api/sessions/${sid}/objects/blocks/g9/0`)).status).toBe(404);
    const latest = (await (await asAlpha(`/api/sessions/${sid}/checkpoints/latest`)).json()) as {
      checkpointId: string;
    };
    expect(latest.checkpointId).toBe('c1');

    for (const [route, method] of [
      ['/api/sessions', 'GET'],
      [`/api/sessions/${sid}`, 'GET'],
      [`/api/sessions/${sid}/objects/blocks/g1/0`, 'GET'],
      [`/api/sessions/${sid}/objects/blocks/g1/0`, 'PUT'],
      [`/api/sessions/${sid}/checkpoints`, 'POST'],
      [`/api/sessions/${sid}/checkpoints/latest`, 'GET'],
      [`/api/sessions/${sid}/checkpoints/c1/files/events.jsonl`, 'GET'],
    ] as const) {
      const response = await anonymous(route, { method, ...(method === 'GET' ? {} : { body: 'x' }) });
      expect(response.status, `${method} ${route}`).toBe(401);
      expect(response.headers.get('www-authenticate')).toBe('Bearer');
    }
  });

  it('lists the caller’s sessions ascending by id with after, limit and next', async () => {
    const prefix = `list-${randomBytes(3).toString('hex')}`;
    const ids = Array.from({ length: 5 }, (_, i) => `${prefix}-${i}`);
    for (const sid of [...ids].reverse()) {
      const file = await uploadFile(asBeta, sid, 'c1', 'events.jsonl', Buffer.from(sid), 'g1');
      expect(
        (await publish(asBeta, sid, { checkpointId: 'c1', parent: null, files: [file], data: { sid } }))
          .status,
      ).toBe(201);
    }
    const page1 = (await (await asBeta(`/api/sessions?after=${prefix}&limit=2`)).json()) as {
      sessions: { id: string; data: unknown }[];
      next: string | null;
    };
    expect(page1.sessions.map((s) => s.id)).toEqual(ids.slice(0, 2));
    expect(page1.sessions[0]?.data).toEqual({ sid: ids[0] });
    expect(page1.next).toBe(ids[1]);
    const page2 = (await (await asBeta(`/api/sessions?after=${page1.next ?? ''}&limit=1000`)).json()) as {
      sessions: { id: string }[];
      next: string | null;
    };
    expect(page2.sessions.map((s) => s.id)).toEqual(ids.slice(2));
    expect(page2.next).toBeNull();
  });

  it('refuses bad input with 4xx naming the field, and writes nothing', async () => {
    const sid = uniqueSession('bad');
    const block = randomBytes(BLOCK_BYTES);
    const expectError = async (response: Response | Promise<Response>, status: number, field?: string) => {
      const answered = await response;
      expect(answered.status).toBe(status);
      const error = await errorOf(answered);
      if (field !== undefined) expect(error.message.startsWith(`${field}:`), error.message).toBe(true);
      return error;
    };
    await expectError(putObject(asAlpha, sid, 'blocks/g1/01', block), 400, 'objectKey');
    await expectError(putObject(asAlpha, sid, 'blocks/g1', block), 400, 'objectKey');
    await expectError(putObject(asAlpha, sid, 'other/g1/0', block), 400, 'objectKey');
    await expectError(putObject(asAlpha, sid, 'blocks/g1/0', block.subarray(1)), 400, 'body');
    await expectError(putObject(asAlpha, sid, 'tails/c1/g1', block), 400, 'body');
    await expectError(putObject(asAlpha, sid, 'tails/c1/g1', Buffer.alloc(0)), 400, 'body');
    await expectError(putObject(asAlpha, 'bad%20id', 'blocks/g1/0', block), 400, 'sessionId');
    const traversal = await rawRequest(app.url, `/api/sessions/%2E%2E/objects/blocks/g1/0`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${alpha.key}` },
      body: block,
    });
    expect(traversal.status).toBe(400);
    const tooLarge = await expectError(putObject(asAlpha, sid, 'bad key', Buffer.alloc(2_097_153)), 413);
    expect(tooLarge.code).toBe('payload_too_large');

    const good = {
      path: 'events.jsonl',
      generation: 'g1',
      size: 10,
      sha256: sha256(Buffer.from('0123456789')),
    };
    const cases: [unknown, string][] = [
      ['{not json', 'body'],
      [[], 'body'],
      [{ checkpointId: 'c1', parent: null, files: [good], extra: 1 }, 'extra'],
      [{ checkpointId: 'latest', parent: null, files: [good] }, 'checkpointId'],
      [{ checkpointId: '..', parent: null, files: [good] }, 'checkpointId'],
      [{ checkpointId: 'c1', parent: 'bad id', files: [good] }, 'parent'],
      [{ checkpointId: 'c1', parent: null }, 'files'],
      [{ checkpointId: 'c1', parent: null, files: [{ ...good, path: '../x' }] }, 'files.0.path'],
      [{ checkpointId: 'c1', parent: null, files: [{ ...good, size: -1 }] }, 'files.0.size'],
      [{ checkpointId: 'c1', parent: null, files: [{ ...good, size: 1.5 }] }, 'files.0.size'],
      [{ checkpointId: 'c1', parent: null, files: [{ ...good, sha256: 'abc' }] }, 'files.0.sha256'],
      [{ checkpointId: 'c1', parent: null, files: [{ ...good, generation: '' }] }, 'files.0.generation'],
      [{ checkpointId: 'c1', parent: null, files: [good, { ...good, generation: 'g2' }] }, 'files.1.path'],
      [{ checkpointId: 'c1', parent: null, files: [good, { ...good, path: 'b' }] }, 'files.1.generation'],
      [
        {
          checkpointId: 'c1',
          parent: null,
          files: Array.from({ length: 129 }, (_, i) => ({ ...good, path: `f${i}`, generation: `g${i}` })),
        },
        'files',
      ],
      [{ checkpointId: 'c1', parent: null, files: [good], data: 'text' }, 'data'],
      [{ checkpointId: 'c1', parent: null, files: [good], data: { big: 'x'.repeat(16 * 1024) } }, 'data'],
    ];
    for (const [body, field] of cases) {
      const error = await expectError(publish(asAlpha, sid, body), 400, field);
      expect(error.code).toBe('invalid_argument');
    }
    for (const query of ['limit=0', 'limit=1001', 'limit=abc', 'after=bad%20id']) {
      await expectError(asAlpha(`/api/sessions?${query}`), 400, query.split('=')[0]);
    }
    // Nothing was written: the session has no owner, object, checkpoint or index record.
    expect((await asAlpha(`/api/sessions/${sid}`)).status).toBe(404);
    expect((await asAlpha(`/api/sessions/${sid}/checkpoints/latest`)).status).toBe(404);
    expect((await putObject(asBeta, sid, 'blocks/g1/0', block)).status).toBe(201);
  });

  it('answers 500 integrity_error for damaged bytes; a large damaged file never arrives complete', async () => {
    const sid = uniqueSession('damaged');
    const small = randomBytes(BLOCK_BYTES + 10);
    const large = randomBytes(20 * BLOCK_BYTES);
    const files = [
      await uploadFile(asAlpha, sid, 'c1', 'events.jsonl', small, 'g1'),
      await uploadFile(asAlpha, sid, 'c1', 'native/big', large, 'g2'),
    ];
    expect((await publish(asAlpha, sid, { checkpointId: 'c1', parent: null, files })).status).toBe(201);
    const flip = (bytes: Buffer) => {
      const copy = Buffer.from(bytes);
      copy[7] = (copy[7] ?? 0) ^ 1;
      return copy;
    };
    await tamper(`${sid}/blocks/g1/0`, flip(small.subarray(0, BLOCK_BYTES)));
    const response = await asAlpha(`/api/sessions/${sid}/checkpoints/c1/files/events.jsonl`);
    expect(response.status).toBe(500);
    expect((await errorOf(response)).code).toBe('integrity_error');

    await tamper(`${sid}/blocks/g2/19`, flip(large.subarray(19 * BLOCK_BYTES)));
    const streamed = await asAlpha(`/api/sessions/${sid}/checkpoints/c1/files/native/big`);
    expect(streamed.status).toBe(200);
    await expect(streamed.arrayBuffer()).rejects.toThrow();
  });
});
