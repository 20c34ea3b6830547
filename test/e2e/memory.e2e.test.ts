import { CairnClient, CairnHttpError } from '@cairn-state/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { Azurite } from '../../dev/azurite';
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
import { startAzurite } from '../support/cleanup';
import { eventually } from '../support/eventually';
import { memoryTableSettings } from '../support/tables';

/**
 * The memory routes (docs/memory.md) over real HTTP against the app in the local runtime: facts on
 * the local filesystem (local backend, no table service) and on Table Storage (Blob backend with
 * CAIRN_TABLE_ENDPOINT, Azurite). Every answer is checked against the OpenAPI document.
 */

type Call = ReturnType<typeof client>;

interface Item {
  namespace: string[];
  key: string;
  value: unknown;
  createdAt: number;
  updatedAt: number;
  expiresAt?: number;
  etag: string;
  score?: number;
}

const factPath = (namespace: string, key: string) =>
  `/api/memory/facts?${new URLSearchParams({ namespace, key }).toString()}`;

async function errorOf(response: Response): Promise<{ code: string; message: string }> {
  return ((await response.json()) as { error: { code: string; message: string } }).error;
}

function put(
  call: Call,
  namespace: string,
  key: string,
  body: unknown,
  headers: Record<string, string> = {},
) {
  return call(factPath(namespace, key), {
    method: 'PUT',
    body: typeof body === 'string' ? body : JSON.stringify(body),
    headers: { 'content-type': 'application/json', ...headers },
  });
}

function search(call: Call, body: unknown) {
  return call('/api/memory/search', { method: 'POST', body: JSON.stringify(body) });
}

async function searchItems(call: Call, body: unknown): Promise<Item[]> {
  const response = await search(call, body);
  expect(response.status).toBe(200);
  return ((await response.json()) as { items: Item[] }).items;
}

describe.each<Backend>(['local', 'blob'])('memory API on the %s backend', (backend) => {
  const alpha = newTenant('alpha');
  const beta = newTenant('beta');
  let app: RunningApp;
  let asAlpha: Call;
  let asBeta: Call;

  beforeAll(async () => {
    const { blobEndpoint, tableEndpoint } = azurite();
    app = await startApp({
      CAIRN_API_KEYS: apiKeysSetting([alpha, beta]),
      ...backendSettings(backend, blobEndpoint),
      ...(backend === 'blob' ? memoryTableSettings(tableEndpoint) : {}),
    });
    asAlpha = client(app.url, alpha.key);
    asBeta = client(app.url, beta.key);
  });
  afterAll(async () => {
    await app.stop();
  });

  it('remembers, recalls, replaces and forgets a fact with ETags', async () => {
    const created = await put(asAlpha, 'users/42', 'language', { value: { lang: 'French' } });
    expect(created.status).toBe(201);
    const first = (await created.json()) as Item;
    expect(first).toMatchObject({ namespace: ['users', '42'], key: 'language', value: { lang: 'French' } });
    expect(created.headers.get('etag')).toBe(first.etag);
    expect(first.createdAt).toBe(first.updatedAt);

    const read = await asAlpha(factPath('users/42', 'language'));
    expect(read.status).toBe(200);
    expect(read.headers.get('etag')).toBe(first.etag);
    expect(await read.json()).toEqual(first);

    const replaced = await put(asAlpha, 'users/42', 'language', { value: 'Breton' });
    expect(replaced.status).toBe(200);
    const second = (await replaced.json()) as Item;
    expect(second.createdAt).toBe(first.createdAt);
    expect(second.updatedAt).toBeGreaterThan(first.updatedAt);
    expect(second.etag).not.toBe(first.etag);

    expect((await asAlpha(factPath('users/42', 'language'), { method: 'DELETE' })).status).toBe(204);
    expect((await asAlpha(factPath('users/42', 'language'))).status).toBe(404);
    // Forgetting an absent fact is no error.
    expect((await asAlpha(factPath('users/42', 'language'), { method: 'DELETE' })).status).toBe(204);
  });

  it('keeps names as sent: dots, percent signs, slashes in keys, any Unicode', async () => {
    for (const [namespace, key] of [
      ['..', '..'],
      ['a/%2F/#?', 'k/with/slash %20'],
      ['日本/ü', '🙂'],
    ] as const) {
      expect((await put(asAlpha, namespace, key, { value: [namespace, key] })).status).toBe(201);
      const item = (await (await asAlpha(factPath(namespace, key))).json()) as Item;
      expect(item.namespace).toEqual(namespace.split('/'));
      expect(item.key).toBe(key);
      expect(item.value).toEqual([namespace, key]);
    }
  });

  it('makes If-Match a compare-and-swap (412 with the current ETag) and If-None-Match: * create-only', async () => {
    const first = (await (await put(asAlpha, 'cas', 'item', { value: 1 })).json()) as Item;
    const swapped = await put(asAlpha, 'cas', 'item', { value: 2 }, { 'if-match': first.etag });
    expect(swapped.status).toBe(200);
    const current = swapped.headers.get('etag');

    const lost = await put(asAlpha, 'cas', 'item', { value: 3 }, { 'if-match': first.etag });
    expect(lost.status).toBe(412);
    expect(lost.headers.get('etag')).toBe(current);
    expect((await errorOf(lost)).code).toBe('precondition_failed');
    expect(((await (await asAlpha(factPath('cas', 'item'))).json()) as Item).value).toBe(2);

    expect((await put(asAlpha, 'cas', 'item', { value: 4 }, { 'if-none-match': '*' })).status).toBe(412);
    expect((await put(asAlpha, 'cas', 'fresh', { value: 4 }, { 'if-none-match': '*' })).status).toBe(201);
    expect((await put(asAlpha, 'cas', 'absent', { value: 4 }, { 'if-match': '*' })).status).toBe(412);

    const staleDelete = await asAlpha(factPath('cas', 'item'), {
      method: 'DELETE',
      headers: { 'if-match': first.etag },
    });
    expect(staleDelete.status).toBe(412);
    expect(staleDelete.headers.get('etag')).toBe(current);
    const deleted = await asAlpha(factPath('cas', 'item'), {
      method: 'DELETE',
      headers: { 'if-match': current ?? '' },
    });
    expect(deleted.status).toBe(204);
  });

  it('of 16 concurrent compare-and-swap writers exactly one wins; 16 read-modify-write loops lose no update', async () => {
    const { etag } = (await (await put(asAlpha, 'race', 'one', { value: 0 })).json()) as Item;
    const statuses = await Promise.all(
      Array.from(
        { length: 16 },
        async (_, i) => (await put(asAlpha, 'race', 'one', { value: i + 1 }, { 'if-match': etag })).status,
      ),
    );
    expect(statuses.filter((status) => status === 200)).toHaveLength(1);
    expect(statuses.filter((status) => status === 412)).toHaveLength(15);

    await put(asAlpha, 'race', 'sum', { value: 0 });
    const INCREMENTS = 2;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        for (let done = 0; done < INCREMENTS;) {
          const read = (await (await asAlpha(factPath('race', 'sum'))).json()) as Item;
          const write = await put(
            asAlpha,
            'race',
            'sum',
            { value: (read.value as number) + 1 },
            { 'if-match': read.etag },
          );
          if (write.status === 200) done++;
          else expect(write.status).toBe(412);
        }
      }),
    );
    expect(((await (await asAlpha(factPath('race', 'sum'))).json()) as Item).value).toBe(16 * INCREMENTS);
  });

  it('lets a fact expire after its ttl: absent from recall, search and listings; remember without ttl clears it', async () => {
    const short = (await (
      await put(asAlpha, 'ttl/a', 'soon', { value: 'gone soon', ttl: 1 })
    ).json()) as Item;
    expect(short.expiresAt).toBe(short.updatedAt + 1000);
    expect((await put(asAlpha, 'ttl/b', 'cleared', { value: 'x', ttl: 1 })).status).toBe(201);
    const cleared = (await (await put(asAlpha, 'ttl/b', 'cleared', { value: 'x' })).json()) as Item;
    expect(cleared.expiresAt).toBeUndefined();
    // Read back while it lives (a slow machine may take past the second: then it is gone already).
    const reading = await asAlpha(factPath('ttl/a', 'soon'));
    if (reading.status === 200) expect(((await reading.json()) as Item).expiresAt).toBe(short.expiresAt);
    else expect(reading.status).toBe(404);

    // The app's clock is its own (the same machine's): wait until it says the fact has expired.
    await eventually('the fact with a ttl expires', async () => {
      const status = (await asAlpha(factPath('ttl/a', 'soon'))).status;
      expect([200, 404]).toContain(status);
      return status === 404;
    });
    expect(Date.now()).toBeGreaterThanOrEqual(short.expiresAt ?? 0);
    expect(await searchItems(asAlpha, { namespace: 'ttl', text: 'gone soon' })).toEqual([]);
    const keys = (await searchItems(asAlpha, { namespace: 'ttl' })).map(({ key }) => key);
    expect(keys).toEqual(['cleared']);
    const listed = await asAlpha('/api/memory/namespaces?prefix=ttl');
    expect(await listed.json()).toEqual({ namespaces: [['ttl', 'b']], truncated: false });
  });

  it('searches a namespace and everything below it by whole segments, with text, scores and filters', async () => {
    const facts: [string, string, unknown][] = [
      ['shop/users', 'policy', { text: 'Refunds within thirty days', kind: 'policy', rank: 1 }],
      ['shop/users/42', 'likes', { text: 'Likes green tea and refunds', kind: 'pref', rank: 2 }],
      ['shop/users/42/cart', 'item', { text: 'green tea, 2 boxes', kind: 'cart', rank: 3 }],
      ['shop/usersX/1', 'likes', { text: 'green tea too', kind: 'pref', rank: 4 }],
      ['shop/teams', 'note', { text: 'nothing to see', kind: 'note', rank: 5 }],
    ];
    for (const [namespace, key, value] of facts)
      expect((await put(asAlpha, namespace, key, { value })).status).toBe(201);

    const all = await searchItems(asAlpha, { namespace: 'shop/users', limit: 100 });
    expect(all.map(({ namespace }) => namespace.join('/'))).toEqual([
      'shop/users/42/cart',
      'shop/users/42',
      'shop/users',
    ]);
    expect(all.every(({ score }) => score === undefined)).toBe(true);

    const tea = await searchItems(asAlpha, { namespace: 'shop/users', text: 'GREEN tea' });
    expect(tea.map(({ key }) => key).sort()).toEqual(['item', 'likes']);
    for (const item of tea) {
      expect(item.score).toBeGreaterThan(0);
      expect(item.score).toBeLessThanOrEqual(1);
    }
    expect(await searchItems(asAlpha, { namespace: 'shop/users', text: 'refunds', limit: 1 })).toHaveLength(
      1,
    );
    const filtered = await searchItems(asAlpha, {
      namespace: 'shop',
      filter: { kind: { $in: ['pref', 'cart'] }, rank: { $gte: 3 } },
    });
    expect(filtered.map(({ value }) => (value as { rank: number }).rank).sort()).toEqual([3, 4]);
    expect((await searchItems(asAlpha, { namespace: '', text: 'tea' })).length).toBeGreaterThanOrEqual(3);

    const listed = await asAlpha('/api/memory/namespaces?prefix=shop&maxDepth=2');
    expect(await listed.json()).toEqual({
      namespaces: [
        ['shop', 'teams'],
        ['shop', 'users'],
        ['shop', 'usersX'],
      ],
      truncated: false,
    });
    const suffixed = await asAlpha('/api/memory/namespaces?suffix=42&limit=5');
    expect(await suffixed.json()).toEqual({ namespaces: [['shop', 'users', '42']], truncated: false });

    const forgotten = await asAlpha('/api/memory/namespaces?namespace=shop/users', { method: 'DELETE' });
    expect(forgotten.status).toBe(200);
    expect(await forgotten.json()).toEqual({ deleted: 3, more: false });
    expect(await searchItems(asAlpha, { namespace: 'shop/users' })).toEqual([]);
    expect((await searchItems(asAlpha, { namespace: 'shop' })).map(({ key }) => key).sort()).toEqual([
      'likes',
      'note',
    ]);
    const again = await asAlpha('/api/memory/namespaces?namespace=shop/users', { method: 'DELETE' });
    expect(await again.json()).toEqual({ deleted: 0, more: false });
  });

  it('matches whole words in scripts written with combining marks, not the letters between the marks', async () => {
    // Devanagari vowel signs and viramas are marks (\p{M}), part of the word as in Unicode's word
    // boundaries: "हिन्दी" (Hindi) and "दिन" (day) share the letters द and न, not a word.
    const facts: [string, unknown][] = [
      ['hindi', { text: 'हिन्दी भाषा' }],
      ['day', { text: 'दिन' }],
      ['thai', { text: 'ภาษาไทย' }],
    ];
    for (const [key, value] of facts)
      expect((await put(asAlpha, 'scripts', key, { value })).status).toBe(201);
    const keysFor = async (text: string) =>
      (await searchItems(asAlpha, { namespace: 'scripts', text })).map(({ key }) => key);
    expect(await keysFor('हिन्दी')).toEqual(['hindi']);
    expect(await keysFor('दिन')).toEqual(['day']);
    expect(await keysFor('भाषा')).toEqual(['hindi']);
    // A word's letters alone are another word.
    expect(await keysFor('ह')).toEqual([]);
  });

  it('compares numbers in filters by value: -0 in a filter is 0, as JSON has one zero', async () => {
    expect((await put(asAlpha, 'zero', 'z', { value: { n: 0, list: [0] } })).status).toBe(201);
    // A body holding -0 (JSON.stringify writes 0; other languages' encoders write -0 or -0.0).
    const keysFor = async (filter: string) => {
      const response = await asAlpha('/api/memory/search', {
        method: 'POST',
        body: `{"namespace":"zero","filter":${filter}}`,
      });
      expect(response.status).toBe(200);
      return ((await response.json()) as { items: Item[] }).items.map(({ key }) => key);
    };
    expect(await keysFor('{"n":-0}')).toEqual(['z']);
    expect(await keysFor('{"n":{"$eq":-0.0}}')).toEqual(['z']);
    expect(await keysFor('{"n":{"$in":[-0]}}')).toEqual(['z']);
    expect(await keysFor('{"list":[-0]}')).toEqual(['z']);
    expect(await keysFor('{"n":{"$ne":-0}}')).toEqual([]);
    expect(await keysFor('{"n":{"$nin":[-0]}}')).toEqual([]);
  });

  it("isolates tenants: another tenant's facts are absent on every route and untouched by its writes", async () => {
    await put(asAlpha, 'private/notes', 'secret', { value: 'alpha only' });
    expect((await asBeta(factPath('private/notes', 'secret'))).status).toBe(404);
    expect(await searchItems(asBeta, { namespace: '', text: 'alpha only' })).toEqual([]);
    expect(await searchItems(asBeta, { namespace: 'private' })).toEqual([]);
    expect(await (await asBeta('/api/memory/namespaces')).json()).toEqual({
      namespaces: [],
      truncated: false,
    });
    expect((await asBeta(factPath('private/notes', 'secret'), { method: 'DELETE' })).status).toBe(204);
    const wiped = await asBeta('/api/memory/namespaces?namespace=&all=true', { method: 'DELETE' });
    expect(await wiped.json()).toEqual({ deleted: 0, more: false });
    const named = await asBeta('/api/memory/namespaces?namespace=private', { method: 'DELETE' });
    expect(await named.json()).toEqual({ deleted: 0, more: false });
    expect((await asAlpha(factPath('private/notes', 'secret'))).status).toBe(200);
    // Beta's own fact of the same name is its own.
    expect((await put(asBeta, 'private/notes', 'secret', { value: 'beta' })).status).toBe(201);
    expect(((await (await asAlpha(factPath('private/notes', 'secret'))).json()) as Item).value).toBe(
      'alpha only',
    );
    expect((await client(app.url)(factPath('private/notes', 'secret'))).status).toBe(401);
  });

  it('refuses bad input with 400 naming the field, 413 before anything else, and writes nothing', async () => {
    const cases: [string, RequestInit, string][] = [
      ['/api/memory/facts?key=k', { method: 'GET' }, 'namespace'],
      ['/api/memory/facts?namespace=a', { method: 'GET' }, 'key'],
      [factPath('/a', 'k'), { method: 'GET' }, 'namespace'],
      [factPath('a/', 'k'), { method: 'GET' }, 'namespace'],
      [factPath('a//b', 'k'), { method: 'GET' }, 'namespace'],
      [factPath('a\u0001b', 'k'), { method: 'GET' }, 'namespace'],
      [factPath('x'.repeat(513), 'k'), { method: 'GET' }, 'namespace'],
      [factPath(Array(17).fill('s').join('/'), 'k'), { method: 'GET' }, 'namespace'],
      [factPath('a', 'k'.repeat(513)), { method: 'DELETE' }, 'key'],
      [factPath('a', ''), { method: 'PUT', body: '{"value":1}' }, 'key'],
      [factPath('a', 'k'), { method: 'PUT', body: 'not json' }, 'body'],
      [factPath('a', 'k'), { method: 'PUT', body: '{}' }, 'value'],
      [factPath('a', 'k'), { method: 'PUT', body: '{"value":1,"extra":2}' }, 'extra'],
      [factPath('a', 'k'), { method: 'PUT', body: '{"value":1,"ttl":0}' }, 'ttl'],
      [factPath('a', 'k'), { method: 'PUT', body: '{"value":1,"ttl":1.5}' }, 'ttl'],
      [
        factPath('a', 'k'),
        { method: 'PUT', body: '{"value":1}', headers: { 'if-match': '"x"', 'if-none-match': '*' } },
        'If-Match',
      ],
      ['/api/memory/search', { method: 'POST', body: '{"namespace":"a","limit":0}' }, 'limit'],
      ['/api/memory/search', { method: 'POST', body: '{"namespace":"a","limit":1001}' }, 'limit'],
      ['/api/memory/search', { method: 'POST', body: '{"text":"x"}' }, 'namespace'],
      [
        '/api/memory/search',
        { method: 'POST', body: '{"namespace":"a","filter":{"n":{"$near":1}}}' },
        'filter.n.$near',
      ],
      ['/api/memory/namespaces?namespace=', { method: 'DELETE' }, 'namespace'],
      ['/api/memory/namespaces?maxDepth=0', { method: 'GET' }, 'maxDepth'],
      ['/api/memory/namespaces?prefix=a//b', { method: 'GET' }, 'prefix'],
    ];
    for (const [path, init, field] of cases) {
      const response = await asAlpha(path, init);
      expect(response.status, `${init.method} ${path}`).toBe(400);
      const error = await errorOf(response);
      expect(error.code).toBe('invalid_argument');
      expect(error.message.startsWith(`${field}:`), `${path}: ${error.message}`).toBe(true);
    }
    // 413 first: an oversize body with a bad namespace too; a value over 32 KiB.
    const huge = await put(asAlpha, '//bad', 'k', { value: 'x'.repeat(70 * 1024) });
    expect(huge.status).toBe(413);
    const big = await put(asAlpha, 'a', 'big', { value: 'x'.repeat(32 * 1024) });
    expect(big.status).toBe(413);
    expect((await errorOf(big)).code).toBe('payload_too_large');
    expect((await asAlpha(factPath('a', 'big'))).status).toBe(404);
    expect((await asAlpha(factPath('a', 'k'))).status).toBe(404);
  });

  it("fixes the tenant's dimension count by a vector stored, not by a write its condition refused", async () => {
    // Before the tenant's first vector: a compare-and-swap that fails writes nothing at all.
    const ifMatch = { 'if-match': '"not-the-etag"' };
    const refused = await put(asBeta, 'dims', 'k', { value: 1, vectors: { t: [1, 2, 3] } }, ifMatch);
    expect(refused.status).toBe(412);
    expect((await put(asBeta, 'dims', 'other', { value: 0 })).status).toBe(201);
    const create = { 'if-none-match': '*' };
    const exists = await put(asBeta, 'dims', 'other', { value: 1, vectors: { t: [1, 2] } }, create);
    expect(exists.status).toBe(412);
    // The first vector stored fixes it.
    expect((await put(asBeta, 'dims', 'k', { value: 2, vectors: { t: [1, 2, 3, 4] } })).status).toBe(201);
    const other = await put(asBeta, 'dims', 'k', { value: 3, vectors: { t: [1, 2, 3] } });
    expect(other.status).toBe(400);
    expect((await errorOf(other)).message).toMatch(/^vectors\.t: must have 4 dimensions/);
  });

  it('is reachable through CairnClient.memory with typed answers and errors', async () => {
    const cairn = new CairnClient({ url: app.url, token: alpha.key });
    const fact = await cairn.memory.remember(['client', 'u1'], 'name', { first: 'Ada' }, { ttl: 3600 });
    expect(fact).toMatchObject({ created: true, namespace: ['client', 'u1'], key: 'name' });
    expect(fact.expiresAt).toBeGreaterThan(fact.updatedAt);
    expect((await cairn.memory.recall('client/u1', 'name'))?.value).toEqual({ first: 'Ada' });
    expect(await cairn.memory.recall('client/u1', 'absent')).toBeNull();
    const lost = await cairn.memory
      .remember('client/u1', 'name', 'x', { ifMatch: '"not-the-etag"' })
      .catch((error: unknown) => error);
    expect(lost).toBeInstanceOf(CairnHttpError);
    expect((lost as CairnHttpError).status).toBe(412);
    expect((lost as CairnHttpError).etag).toBe(fact.etag);
    await cairn.memory.remember('client/u2', 'name', { first: 'Grace' });
    const found = await cairn.memory.search('client', { text: 'grace' });
    expect(found.items.map(({ key, namespace }) => [namespace.join('/'), key])).toEqual([
      ['client/u2', 'name'],
    ]);
    expect((await cairn.memory.listNamespaces({ prefix: 'client' })).namespaces).toEqual([
      ['client', 'u1'],
      ['client', 'u2'],
    ]);
    await cairn.memory.forget('client/u2', 'name');
    expect(await cairn.memory.forgetAll('client')).toBe(1);
    expect((await cairn.memory.search('client')).items).toEqual([]);
  });
});

// Memory without a table service on the Blob backend: test/e2e/notConfigured.e2e.test.ts.

describe('memory on Table Storage while the storage is down', () => {
  const tenant = newTenant('faulty');
  let storage: Azurite;
  let app: RunningApp;
  let call: Call;

  beforeAll(async () => {
    storage = await startAzurite();
    app = await startApp({
      CAIRN_API_KEYS: apiKeysSetting([tenant]),
      ...backendSettings('blob', storage.blobEndpoint),
      ...memoryTableSettings(storage.tableEndpoint),
      CAIRN_STORAGE_TIMEOUT_MS: '3000',
    });
    call = client(app.url, tenant.key);
  });
  afterAll(async () => {
    await app.stop();
    await storage.stop();
  });

  it('answers 503 storage_unavailable with Retry-After on every route, never 404, and serves again after', async () => {
    expect((await put(call, 'known', 'k', { value: 1 })).status).toBe(201);
    await storage.stop();
    const requests: [string, RequestInit][] = [
      [factPath('known', 'k'), { method: 'GET' }],
      [factPath('unknown', 'k'), { method: 'GET' }],
      [factPath('known', 'k'), { method: 'PUT', body: '{"value":2}' }],
      [factPath('known', 'k'), { method: 'DELETE' }],
      ['/api/memory/search', { method: 'POST', body: '{"namespace":"known","text":"x"}' }],
      ['/api/memory/namespaces', { method: 'GET' }],
      ['/api/memory/namespaces?namespace=known', { method: 'DELETE' }],
    ];
    for (const [path, init] of requests) {
      const response = await call(path, init);
      expect(response.status, `${init.method} ${path}`).toBe(503);
      expect(response.headers.get('retry-after')).toBe('1');
      expect((await errorOf(response)).code).toBe('storage_unavailable');
    }
    storage = await startAzurite({ ports: storage.ports });
    // The restarted emulator is empty (in memory): the app makes its table again.
    expect((await put(call, 'known', 'k', { value: 3 })).status).toBe(201);
    expect((await call(factPath('known', 'k'))).status).toBe(200);
  });
});
