import { readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

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
import { azurite } from '../support/azurite';
import { tempDir } from '../support/cleanup';

/** The common rules and key/value over real HTTP, against the app served by the local runtime, on both backends. */

const MAX = 2 * 1024 * 1024;

async function errorOf(response: Response): Promise<{ code: string; message: string }> {
  expect(response.headers.get('content-type')).toContain('application/json');
  const body = (await response.json()) as { error: { code: string; message: string } };
  expect(typeof body.error.message).toBe('string');
  return body.error;
}

describe.each<Backend>(['local', 'blob'])('key/value API on the %s backend', (backend) => {
  const alpha = newTenant('alpha');
  const beta = newTenant('beta');
  let app: RunningApp;
  let asAlpha: ReturnType<typeof client>;
  let asBeta: ReturnType<typeof client>;
  let anonymous: ReturnType<typeof client>;
  const settings = backendSettings(backend, azurite().blobEndpoint);

  beforeAll(async () => {
    app = await startApp({
      CAIRN_API_KEYS: apiKeysSetting([alpha, beta]),
      ...settings,
    });
    asAlpha = client(app.url, alpha.key);
    asBeta = client(app.url, beta.key);
    anonymous = client(app.url);
  });
  afterAll(async () => app.stop());

  it('answers health without credentials and reveals no endpoint or path', async () => {
    const response = await anonymous('/api/health');
    expect(response.status).toBe(200);
    const body = (await response.json()) as Record<string, string>;
    expect(body).toEqual({
      status: 'ok',
      backend,
      version: expect.stringMatching(/^\d+\.\d+\.\d+/) as string,
    });
    expect(JSON.stringify(body)).not.toMatch(/127\.0\.0\.1|devstoreaccount|tmp|cairn-test/);
  });

  it('answers 401 with WWW-Authenticate on every other route without a valid credential', async () => {
    const requests: [string, RequestInit][] = [
      ['/api/kv/a', { method: 'GET' }],
      ['/api/kv/a', { method: 'HEAD' }],
      ['/api/kv/a', { method: 'PUT', body: 'x' }],
      ['/api/kv/a', { method: 'POST', body: 'x' }],
      ['/api/kv/a', { method: 'DELETE' }],
      ['/api/keys', { method: 'GET' }],
    ];
    for (const [path, init] of requests) {
      for (const authorization of [undefined, 'Bearer wrong-key', 'Basic abc', `Bearer ${alpha.key}x`]) {
        const response = await anonymous(path, {
          ...init,
          headers: authorization === undefined ? {} : { authorization },
        });
        expect(response.status, `${init.method} ${path} ${authorization}`).toBe(401);
        expect(response.headers.get('www-authenticate')).toBe('Bearer');
        if (init.method !== 'HEAD') expect((await errorOf(response)).code).toBe('unauthorized');
      }
    }
    expect(await (await asAlpha('/api/keys')).json()).toEqual({ keys: [], cursor: null });
  });

  it('echoes a valid x-request-id and replaces an invalid one', async () => {
    const echoed = await anonymous('/api/health', { headers: { 'x-request-id': 'agent-7:run.42_a' } });
    expect(echoed.headers.get('x-request-id')).toBe('agent-7:run.42_a');
    for (const bad of ['has space', 'x'.repeat(129), 'semi;colon']) {
      const replaced = await anonymous('/api/kv/a', { headers: { 'x-request-id': bad } });
      const id = replaced.headers.get('x-request-id');
      expect(id).toMatch(/^[A-Za-z0-9._:-]{1,128}$/);
      expect(id).not.toBe(bad);
    }
  });

  it('creates, replaces, reads, heads and deletes a value', async () => {
    const created = await asAlpha('/api/kv/notes/today', { method: 'PUT', body: 'hello' });
    expect(created.status).toBe(201);
    const etag1 = created.headers.get('etag');
    expect(etag1).toMatch(/^".+"$/);
    expect(await created.json()).toEqual({ key: 'notes/today', etag: etag1, size: 5 });

    const replaced = await asAlpha('/api/kv/notes/today', { method: 'PUT', body: 'hello, world' });
    expect(replaced.status).toBe(200);
    const etag2 = replaced.headers.get('etag');
    expect(etag2).not.toBe(etag1);

    const read = await asAlpha('/api/kv/notes/today');
    expect(read.status).toBe(200);
    expect(read.headers.get('etag')).toBe(etag2);
    expect(read.headers.get('content-type')).toBe('application/octet-stream');
    expect(await read.text()).toBe('hello, world');

    const head = await asAlpha('/api/kv/notes/today', { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers.get('etag')).toBe(etag2);
    expect(head.headers.get('content-length')).toBe('12');

    expect((await asAlpha('/api/kv/notes/today', { method: 'DELETE' })).status).toBe(204);
    const gone = await asAlpha('/api/kv/notes/today');
    expect(gone.status).toBe(404);
    expect((await errorOf(gone)).code).toBe('not_found');
    expect((await asAlpha('/api/kv/notes/today', { method: 'HEAD' })).status).toBe(404);
    expect((await asAlpha('/api/kv/notes/today', { method: 'DELETE' })).status).toBe(204);
  });

  it('keeps binary values byte for byte, including an empty value and one of exactly the limit', async () => {
    const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    expect((await asAlpha('/api/kv/bin/all-bytes', { method: 'PUT', body: bytes })).status).toBe(201);
    expect(Buffer.from(await (await asAlpha('/api/kv/bin/all-bytes')).arrayBuffer()).equals(bytes)).toBe(
      true,
    );
    expect((await asAlpha('/api/kv/bin/empty', { method: 'PUT', body: '' })).status).toBe(201);
    const empty = await asAlpha('/api/kv/bin/empty');
    expect(empty.status).toBe(200);
    expect((await empty.arrayBuffer()).byteLength).toBe(0);
    const big = Buffer.alloc(MAX, 0x5a);
    expect((await asAlpha('/api/kv/bin/max', { method: 'PUT', body: big })).status).toBe(201);
    expect(Buffer.from(await (await asAlpha('/api/kv/bin/max')).arrayBuffer()).equals(big)).toBe(true);
  });

  it('applies If-Match and If-None-Match, answering 412 with the current ETag and writing nothing', async () => {
    const first = await asAlpha('/api/kv/cas/x', { method: 'PUT', body: '1' });
    const etag1 = first.headers.get('etag')!;
    const second = await asAlpha('/api/kv/cas/x', {
      method: 'PUT',
      body: '2',
      headers: { 'if-match': etag1 },
    });
    expect(second.status).toBe(200);
    const etag2 = second.headers.get('etag')!;

    const stale = await asAlpha('/api/kv/cas/x', {
      method: 'PUT',
      body: '3',
      headers: { 'if-match': etag1 },
    });
    expect(stale.status).toBe(412);
    expect(stale.headers.get('etag')).toBe(etag2);
    expect((await errorOf(stale)).code).toBe('precondition_failed');

    const exists = await asAlpha('/api/kv/cas/x', {
      method: 'PUT',
      body: '4',
      headers: { 'if-none-match': '*' },
    });
    expect(exists.status).toBe(412);
    expect(exists.headers.get('etag')).toBe(etag2);

    const absentStar = await asAlpha('/api/kv/cas/absent', {
      method: 'PUT',
      body: '5',
      headers: { 'if-match': '*' },
    });
    expect(absentStar.status).toBe(412);
    expect(absentStar.headers.get('etag')).toBeNull();

    const staleAppend = await asAlpha('/api/kv/cas/x', {
      method: 'POST',
      body: '6',
      headers: { 'if-match': etag1 },
    });
    expect(staleAppend.status).toBe(412);
    const staleDelete = await asAlpha('/api/kv/cas/x', { method: 'DELETE', headers: { 'if-match': etag1 } });
    expect(staleDelete.status).toBe(412);

    expect(await (await asAlpha('/api/kv/cas/x')).text()).toBe('2');
    expect((await asAlpha('/api/kv/cas/absent')).status).toBe(404);

    const createOnly = await asAlpha('/api/kv/cas/new', {
      method: 'PUT',
      body: 'n',
      headers: { 'if-none-match': '*' },
    });
    expect(createOnly.status).toBe(201);
    const matchingDelete = await asAlpha('/api/kv/cas/x', {
      method: 'DELETE',
      headers: { 'if-match': etag2 },
    });
    expect(matchingDelete.status).toBe(204);
  });

  it('appends with POST, creating first, and reports the size after the append', async () => {
    const first = await asAlpha('/api/kv/logs/day.jsonl', { method: 'POST', body: '{"a":1}\n' });
    expect(first.status).toBe(201);
    expect(await first.json()).toMatchObject({ key: 'logs/day.jsonl', size: 8 });
    const second = await asAlpha('/api/kv/logs/day.jsonl', { method: 'POST', body: '{"b":2}\n' });
    expect(second.status).toBe(200);
    expect(await second.json()).toMatchObject({ size: 16 });
    expect(await (await asAlpha('/api/kv/logs/day.jsonl')).text()).toBe('{"a":1}\n{"b":2}\n');
    const over = await asAlpha('/api/kv/logs/day.jsonl', { method: 'POST', body: Buffer.alloc(MAX - 10) });
    expect(over.status).toBe(413);
    expect(await (await asAlpha('/api/kv/logs/day.jsonl')).text()).toBe('{"a":1}\n{"b":2}\n');
  });

  it('lists keys by plain prefix in pages, every key once, and refuses bad limits', async () => {
    const keys = Array.from({ length: 7 }, (_, i) => `list/item-${i}`);
    await Promise.all(keys.map((key) => asAlpha(`/api/kv/${key}`, { method: 'PUT', body: key })));
    await asAlpha('/api/kv/listless', { method: 'PUT', body: 'x' });
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const query: string = `prefix=list%2F&limit=3${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`;
      const page = (await (await asAlpha(`/api/keys?${query}`)).json()) as {
        keys: string[];
        cursor: string | null;
      };
      expect(page.keys.length).toBeLessThanOrEqual(3);
      seen.push(...page.keys);
      cursor = page.cursor;
    } while (cursor !== null);
    expect(seen).toEqual(keys);
    const plain = (await (await asAlpha('/api/keys?prefix=list')).json()) as { keys: string[] };
    expect(plain.keys).toEqual([...keys, 'listless']);
    for (const limit of ['0', '5001', 'x', '1.5', '-1', '']) {
      const response = await asAlpha(`/api/keys?limit=${limit}`);
      expect(response.status, limit).toBe(400);
      const error = await errorOf(response);
      expect(error.code).toBe('invalid_argument');
      expect(error.message).toContain('limit');
    }
    const badCursor = await asAlpha('/api/keys?cursor=bm9wZQ');
    expect(badCursor.status).toBe(400);
    expect((await errorOf(badCursor)).message).toContain('cursor');
  });

  it('refuses bad input with 4xx and the error JSON, writing nothing', async () => {
    const before = ((await (await asAlpha('/api/keys?prefix=zz')).json()) as { keys: string[] }).keys;
    expect(before).toEqual([]);
    type Init = { method: string; body?: string | Buffer; headers?: Record<string, string> };
    const cases: [string, string, Init, number, string][] = [
      ['traversal', '/api/kv/zz/%2E%2E/zz-escaped', { method: 'PUT', body: 'x' }, 400, 'key'],
      ['leading traversal', '/api/kv/%2E%2E/zz', { method: 'PUT', body: 'x' }, 400, 'key'],
      ['dot segment', '/api/kv/zz/%2E/a', { method: 'PUT', body: 'x' }, 400, 'key'],
      ['backslash', '/api/kv/zz%5Ca', { method: 'PUT', body: 'x' }, 400, 'key'],
      ['empty segment', '/api/kv/zz//a', { method: 'PUT', body: 'x' }, 400, 'key'],
      ['trailing slash', '/api/kv/zz/', { method: 'PUT', body: 'x' }, 400, 'key'],
      ['no key', '/api/kv/', { method: 'PUT', body: 'x' }, 400, 'key'],
      ['control character', '/api/kv/zz%01a', { method: 'PUT', body: 'x' }, 400, 'key'],
      ['DEL', '/api/kv/zz%7Fa', { method: 'POST', body: 'x' }, 400, 'key'],
      ['1025-byte key', `/api/kv/zz${'k'.repeat(1023)}`, { method: 'PUT', body: 'x' }, 400, 'key'],
      ['oversize body', '/api/kv/zz/big', { method: 'PUT', body: Buffer.alloc(MAX + 1) }, 413, 'limit'],
      [
        'oversize body and bad key',
        '/api/kv/zz/../x',
        { method: 'PUT', body: Buffer.alloc(MAX + 1) },
        413,
        'limit',
      ],
      [
        'both preconditions',
        '/api/kv/zz/both',
        { method: 'PUT', body: 'x', headers: { 'if-match': '*', 'if-none-match': '*' } },
        400,
        'If-Match',
      ],
      [
        'bad If-Match',
        '/api/kv/zz/etag',
        { method: 'PUT', body: 'x', headers: { 'if-match': 'unquoted' } },
        400,
        'If-Match',
      ],
      [
        'bad If-None-Match',
        '/api/kv/zz/etag',
        { method: 'PUT', body: 'x', headers: { 'if-none-match': '"abc"' } },
        400,
        'If-None-Match',
      ],
      ['read traversal', '/api/kv/zz/%2e%2e/x', { method: 'GET' }, 400, 'key'],
      ['delete traversal', '/api/kv/%2E%2E', { method: 'DELETE' }, 400, 'key'],
    ];
    for (const [name, path, init, status, field] of cases) {
      // Sent raw: fetch would normalise the dot segments away before they reach the server.
      const response = await rawRequest(app.url, path, {
        ...init,
        headers: { ...init.headers, authorization: `Bearer ${alpha.key}` },
      });
      expect(response.status, name).toBe(status);
      expect(response.headers['content-type'], name).toContain('application/json');
      const error = (JSON.parse(response.body) as { error: { code: string; message: string } }).error;
      expect(error.message, name).toContain(field);
    }
    const after = ((await (await asAlpha('/api/keys?prefix=zz')).json()) as { keys: string[] }).keys;
    expect(after).toEqual([]);
    expect(((await (await asAlpha('/api/keys')).json()) as { keys: string[] }).keys).not.toContain(
      'zz-escaped',
    );
  });

  it('keeps every line of 50 concurrent appends exactly once and intact', async () => {
    const lines = Array.from({ length: 50 }, (_, i) => JSON.stringify({ writer: i, pad: 'p'.repeat(100) }));
    const responses = await Promise.all(
      lines.map((line) => asAlpha('/api/kv/concurrent/appends.jsonl', { method: 'POST', body: line + '\n' })),
    );
    expect(responses.map((r) => r.status).sort((a, b) => a - b)).toEqual([
      ...Array<number>(49).fill(200),
      201,
    ]);
    const stored = (await (await asAlpha('/api/kv/concurrent/appends.jsonl')).text())
      .split('\n')
      .filter(Boolean);
    expect(stored).toHaveLength(50);
    expect([...stored].sort()).toEqual([...lines].sort());
  });

  it('loses no update among 30 concurrent compare-and-swap incrementers', async () => {
    await asAlpha('/api/kv/concurrent/counter', { method: 'PUT', body: '0' });
    let conflicts = 0;
    const increment = async () => {
      for (;;) {
        const read = await asAlpha('/api/kv/concurrent/counter');
        const etag = read.headers.get('etag')!;
        const next = String(Number(await read.text()) + 1);
        const write = await asAlpha('/api/kv/concurrent/counter', {
          method: 'PUT',
          body: next,
          headers: { 'if-match': etag },
        });
        if (write.status === 200) return;
        expect(write.status).toBe(412);
        conflicts++;
      }
    };
    await Promise.all(Array.from({ length: 30 }, increment));
    expect(await (await asAlpha('/api/kv/concurrent/counter')).text()).toBe('30');
    expect(conflicts).toBeGreaterThan(0);
  });

  it('gives exactly one 201 among 20 concurrent create-only PUTs of one key', async () => {
    const responses = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        asAlpha('/api/kv/concurrent/once', {
          method: 'PUT',
          body: `w${i}`,
          headers: { 'if-none-match': '*' },
        }),
      ),
    );
    const statuses = responses.map((r) => r.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(1);
    expect(statuses.filter((s) => s === 412)).toHaveLength(19);
    const winner = statuses.indexOf(201);
    expect(await (await asAlpha('/api/kv/concurrent/once')).text()).toBe(`w${winner}`);
  });

  it("keeps tenants apart: B can neither read, list, overwrite nor delete A's keys", async () => {
    await asAlpha('/api/kv/private/plan', { method: 'PUT', body: 'alpha secret plan' });
    expect((await asBeta('/api/kv/private/plan')).status).toBe(404);
    expect((await asBeta('/api/kv/private/plan', { method: 'HEAD' })).status).toBe(404);
    expect(await (await asBeta('/api/keys')).json()).toEqual({ keys: [], cursor: null });
    expect(
      (await asBeta('/api/kv/private/plan', { method: 'PUT', body: 'beta', headers: { 'if-match': '*' } }))
        .status,
    ).toBe(412);
    expect((await asBeta('/api/kv/private/plan', { method: 'PUT', body: 'beta' })).status).toBe(201);
    expect((await asBeta('/api/kv/private/plan', { method: 'DELETE' })).status).toBe(204);
    expect((await asBeta('/api/kv/private/plan', { method: 'DELETE' })).status).toBe(204);
    expect(await (await asAlpha('/api/kv/private/plan')).text()).toBe('alpha secret plan');
  });

  it('answers unknown routes 404 and wrong methods 405, with the error JSON', async () => {
    const unknown = await asAlpha('/api/nothing/here');
    expect(unknown.status).toBe(404);
    expect((await errorOf(unknown)).code).toBe('not_found');
    const wrong = await asAlpha('/api/kv/a', { method: 'PATCH', body: 'x' });
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get('allow')).toContain('PUT');
    expect((await errorOf(wrong)).code).toBe('method_not_allowed');
    const healthPut = await anonymous('/api/health', { method: 'PUT' });
    expect(healthPut.status).toBe(405);
    expect((await asAlpha('/api/keys', { method: 'POST' })).status).toBe(405);
  });

  if (backend === 'local') {
    it('answers 409 when a key would also be the folder of another key, changing nothing', async () => {
      await asAlpha('/api/kv/tree/leaf', { method: 'PUT', body: 'leaf' });
      const under = await asAlpha('/api/kv/tree/leaf/child', { method: 'PUT', body: 'child' });
      expect(under.status).toBe(409);
      expect((await errorOf(under)).code).toBe('conflict');
      const over = await asAlpha('/api/kv/tree', { method: 'PUT', body: 'folder' });
      expect(over.status).toBe(409);
      expect(await (await asAlpha('/api/kv/tree/leaf')).text()).toBe('leaf');
      expect((await asAlpha('/api/kv/tree')).status).toBe(404);
      await asAlpha('/api/kv/tree/leaf', { method: 'DELETE' });
      expect((await asAlpha('/api/kv/tree', { method: 'PUT', body: 'now a value' })).status).toBe(201);
    });
  }

  if (backend === 'local') {
    it('answers 500 integrity_error naming a symbolic link planted in the data folder, never following it', async () => {
      expect((await asAlpha('/api/kv/planted/real', { method: 'PUT', body: 'mine' })).status).toBe(201);
      const dataDir = settings['CAIRN_DATA_DIR'] as string;
      const tenantDir = path.join(dataDir, 'kv', alpha.tenant);
      const outside = tempDir('outside');
      writeFileSync(path.join(outside, 'secret'), 'outside the data folder');
      symlinkSync(outside, path.join(tenantDir, 'linked'));
      symlinkSync(path.join(outside, 'secret'), path.join(tenantDir, 'file'));
      const requests: [string, RequestInit, string][] = [
        ['/api/kv/linked/secret', { method: 'GET' }, 'linked'],
        ['/api/kv/linked/new', { method: 'PUT', body: 'x' }, 'linked'],
        ['/api/kv/linked/secret', { method: 'DELETE' }, 'linked'],
        ['/api/kv/file', { method: 'GET' }, 'file'],
        ['/api/kv/file', { method: 'PUT', body: 'overwritten' }, 'file'],
        ['/api/kv/file', { method: 'POST', body: 'appended' }, 'file'],
      ];
      for (const [route, init, link] of requests) {
        const response = await asAlpha(route, init);
        expect(response.status, route).toBe(500);
        const error = await errorOf(response);
        expect(error.code).toBe('integrity_error');
        expect(error.message).toContain(`symbolic link at kv/${alpha.tenant}/${link} `);
        expect(error.message).not.toContain(dataDir);
      }
      expect(readdirSync(outside)).toEqual(['secret']);
      expect(readFileSync(path.join(outside, 'secret'), 'utf8')).toBe('outside the data folder');
      expect(await (await asAlpha('/api/kv/planted/real')).text()).toBe('mine');
    });
  }

  it('never writes a credential or a stored value to its logs', () => {
    const output = app.output();
    expect(output).toContain('"msg":"request"');
    for (const secret of [alpha.key, beta.key, 'alpha secret plan', 'hello, world']) {
      expect(output).not.toContain(secret);
    }
    expect(output).not.toMatch(/Bearer /i);
  });
});
