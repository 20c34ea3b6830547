import { CairnHttpError } from '@cairn-state/client';
import { CairnStore } from '@cairn-state/langgraph';
import type { Item, Operation, SearchItem } from '@langchain/langgraph-checkpoint';
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
import { memoryTableSettings } from '../support/tables';

/**
 * `POST /api/memory/batch` (docs/memory.md, "Batches") over real HTTP, on the local filesystem and
 * on Table Storage: operations run in order, each answered with its own result or error, a bad
 * one failing alone; the body's limits; tenants apart; CairnStore.batch sending one request.
 * Every answer is checked against the OpenAPI document. A few small facts only.
 */

type Call = ReturnType<typeof client>;

interface Result {
  status: number;
  item?: { namespace: string[]; key: string; value: unknown; etag: string } | null;
  created?: boolean;
  deleted?: boolean;
  items?: { key: string }[];
  namespaces?: string[][];
  error?: { code: string; message: string };
  etag?: string;
}

async function batch(call: Call, operations: unknown): Promise<Response> {
  return call('/api/memory/batch', { method: 'POST', body: JSON.stringify({ operations }) });
}

async function results(call: Call, operations: unknown[]): Promise<Result[]> {
  const response = await batch(call, operations);
  expect(response.status).toBe(200);
  return ((await response.json()) as { results: Result[] }).results;
}

const factPath = (namespace: string, key: string) =>
  `/api/memory/facts?${new URLSearchParams({ namespace, key }).toString()}`;

describe.each<Backend>(['local', 'blob'])('memory batches on the %s backend', (backend) => {
  const alpha = newTenant('batch-alpha');
  const beta = newTenant('batch-beta');
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

  it('runs the operations in order, each with its own result or error; a bad one fails alone and writes nothing', async () => {
    const first = await results(asAlpha, [
      { op: 'put', namespace: 'b/1', key: 'tea', value: { text: 'green tea' } },
      { op: 'put', namespace: 'b/1', key: 'coffee', value: { text: 'black coffee' }, ttl: 3600 },
      { op: 'put', namespace: 'b/1/', key: 'bad', value: 1 },
      { op: 'put', namespace: 'b/2', key: 'big', value: 'x'.repeat(33 * 1024) },
      { op: 'get', namespace: 'b/1', key: 'tea' },
      { op: 'put', namespace: 'b/1', key: 'tea', value: 'stale', ifMatch: '"not-the-etag"' },
      { op: 'frobnicate' },
      { op: 'search', namespace: 'b', text: 'tea' },
      { op: 'listNamespaces', prefix: 'b' },
    ]);
    expect(first.map((result) => result.status)).toEqual([201, 201, 400, 413, 200, 412, 400, 200, 200]);
    expect(first[0]?.item?.value).toEqual({ text: 'green tea' });
    expect(first[0]?.created).toBe(true);
    expect(first[2]?.error?.code).toBe('invalid_argument');
    expect(first[2]?.error?.message).toMatch(/^operations\.2\.namespace: /);
    expect(first[3]?.error?.code).toBe('payload_too_large');
    // A read sees the writes before it in the batch.
    expect(first[4]?.item?.etag).toBe(first[0]?.item?.etag);
    expect(first[5]?.error?.code).toBe('precondition_failed');
    expect(first[5]?.etag).toBe(first[0]?.item?.etag);
    expect(first[6]?.error?.message).toMatch(/^operations\.6\.op: /);
    expect(first[7]?.items?.map((item) => item.key)).toEqual(['tea']);
    expect(first[8]?.namespaces).toEqual([['b', '1']]);

    // Nothing of the failed ones was written.
    expect((await asAlpha(factPath('b/2', 'big'))).status).toBe(404);
    expect(((await (await asAlpha(factPath('b/1', 'tea'))).json()) as { value: unknown }).value).toEqual({
      text: 'green tea',
    });

    const second = await results(asAlpha, [
      { op: 'put', namespace: 'b/1', key: 'tea', value: 'oolong', ifMatch: first[0]?.item?.etag },
      { op: 'put', namespace: 'b/1', key: 'tea', value: 'jasmine' },
      { op: 'delete', namespace: 'b/1', key: 'coffee' },
      { op: 'delete', namespace: 'b/1', key: 'coffee' },
      { op: 'get', namespace: 'b/1', key: 'coffee' },
      { op: 'get', namespace: 'b/1', key: 'tea' },
    ]);
    expect(second.map((result) => result.status)).toEqual([200, 200, 200, 200, 200, 200]);
    expect(second.map((result) => result.created ?? result.deleted ?? null)).toEqual([
      false,
      false,
      true,
      false,
      null,
      null,
    ]);
    expect(second[4]?.item).toBeNull();
    expect(second[5]?.item?.value).toBe('jasmine');
  });

  it("checks an operation's ifMatch as its route checks If-Match: 400 naming it, nothing written", async () => {
    const put = await results(asAlpha, [{ op: 'put', namespace: 'cas', key: 'k', value: 'first' }]);
    const etag = put[0]?.item?.etag;
    // The route refuses an If-Match that is neither "*" nor a quoted ETag before any storage request.
    const route = await asAlpha(factPath('cas', 'k'), {
      method: 'PUT',
      headers: { 'content-type': 'application/json', 'if-match': 'not-quoted' },
      body: JSON.stringify({ value: 'second' }),
    });
    expect(route.status).toBe(400);
    const answered = await results(asAlpha, [
      { op: 'put', namespace: 'cas', key: 'k', value: 'second', ifMatch: 'not-quoted' },
      { op: 'put', namespace: 'cas', key: 'k', value: 'second', ifMatch: '' },
      { op: 'delete', namespace: 'cas', key: 'k', ifMatch: 'not-quoted' },
      { op: 'get', namespace: 'cas', key: 'k' },
    ]);
    expect(answered.map((result) => result.status)).toEqual([400, 400, 400, 200]);
    expect(answered[0]?.error?.message).toMatch(/^operations\.0\.ifMatch: /);
    expect(answered[1]?.error?.message).toMatch(/^operations\.1\.ifMatch: /);
    expect(answered[2]?.error?.message).toMatch(/^operations\.2\.ifMatch: /);
    expect(answered[3]?.item?.etag).toBe(etag);
  });

  it('takes a value nested as deep as its route takes it; a deeper one refuses the batch', async () => {
    const nested = (levels: number): unknown => {
      let value: unknown = 'deep';
      for (let i = 0; i < levels; i++) value = [value];
      return value;
    };
    // The route: a body {"value": …} nests at most 64 levels, so the value 63.
    const route = await asAlpha(factPath('depth', 'route'), {
      method: 'PUT',
      body: JSON.stringify({ value: nested(63) }),
    });
    expect(route.status).toBe(201);
    const answered = await results(asAlpha, [
      { op: 'put', namespace: 'depth', key: 'a', value: nested(63) },
      { op: 'put', namespace: 'depth', key: 'c', value: 'shallow' },
      { op: 'search', namespace: 'depth', filter: { x: nested(62) } },
    ]);
    expect(answered.map((result) => result.status)).toEqual([201, 201, 200]);
    // Deeper than any route takes: the whole body is refused, naming operations, nothing written.
    const deeper = await batch(asAlpha, [
      { op: 'put', namespace: 'depth', key: 'b', value: nested(64) },
      { op: 'put', namespace: 'depth', key: 'd', value: 'shallow' },
    ]);
    expect(deeper.status).toBe(400);
    expect(((await deeper.json()) as { error: { message: string } }).error.message).toMatch(
      /^operations: must not nest/,
    );
    expect((await asAlpha(factPath('depth', 'b'))).status).toBe(404);
    expect((await asAlpha(factPath('depth', 'd'))).status).toBe(404);
  });

  it('refuses a body that is no batch: 400 naming operations, 413 past the body limit, nothing written', async () => {
    for (const [body, field] of [
      [{}, 'operations'],
      [{ operations: [] }, 'operations'],
      [{ operations: 'put' }, 'operations'],
      [
        { operations: Array.from({ length: 1001 }, () => ({ op: 'get', namespace: 'a', key: 'k' })) },
        'operations',
      ],
      [{ operations: [{ op: 'get', namespace: 'a', key: 'k' }], extra: 1 }, 'extra'],
    ] as const) {
      const response = await asAlpha('/api/memory/batch', { method: 'POST', body: JSON.stringify(body) });
      expect(response.status).toBe(400);
      const { error } = (await response.json()) as { error: { message: string } };
      expect(error.message, JSON.stringify(body).slice(0, 80)).toMatch(new RegExp(`^${field}: `));
    }
    const huge = await batch(asAlpha, [
      { op: 'put', namespace: 'refused', key: 'k', value: 'x'.repeat(5 * 1024 * 1024) },
    ]);
    expect(huge.status).toBe(413);
    expect((await asAlpha(factPath('refused', 'k'))).status).toBe(404);
  });

  it("keeps tenants apart: another tenant's batch neither reads nor deletes a fact", async () => {
    await results(asAlpha, [{ op: 'put', namespace: 'mine', key: 'k', value: 'alpha only' }]);
    const theirs = await results(asBeta, [
      { op: 'get', namespace: 'mine', key: 'k' },
      { op: 'delete', namespace: 'mine', key: 'k' },
      { op: 'search', namespace: '' },
      { op: 'listNamespaces' },
    ]);
    // An absent fact, as LangGraph's get answers it (docs/memory.md): 200 with null, not the routes' 404/204.
    expect(theirs.map((result) => result.status)).toEqual([200, 200, 200, 200]);
    expect(theirs[0]?.item).toBeNull();
    expect(theirs[1]?.deleted).toBe(false);
    expect(theirs[2]?.items).toEqual([]);
    expect(theirs[3]?.namespaces).toEqual([]);
    const mine = await results(asAlpha, [{ op: 'get', namespace: 'mine', key: 'k' }]);
    expect(mine[0]?.item?.value).toBe('alpha only');
  });

  it('serves CairnStore.batch in one request, in order, and throws the first failure after the rest ran', async () => {
    const store = new CairnStore({ url: `${app.url}/api`, token: alpha.key, scope: 'batch-store' });
    const operations: Operation[] = [
      { namespace: ['users', '1'], key: 'a', value: { text: 'likes tea' } },
      { namespace: ['users', '2'], key: 'b', value: { text: 'likes coffee' } },
      { namespace: ['users', '1'], key: 'a' },
      { namespacePrefix: ['users'], query: 'tea', limit: 5 },
      { limit: 10, offset: 0, matchConditions: [{ matchType: 'prefix', path: ['users'] }] },
    ];
    const [, , got, found, listed] = (await store.batch(operations)) as unknown as [
      unknown,
      unknown,
      Item | null,
      SearchItem[],
      string[][],
    ];
    expect(got?.value).toEqual({ text: 'likes tea' });
    expect(found?.map((item) => item.key)).toEqual(['a']);
    expect(listed).toEqual([
      ['users', '1'],
      ['users', '2'],
    ]);
    const failed = await store
      .batch([
        { namespace: ['users', ...Array<string>(16).fill('deep')], key: 'x', value: { text: 'too deep' } },
        { namespace: ['users', '3'], key: 'c', value: { text: 'still stored' } },
      ])
      .catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(CairnHttpError);
    expect((failed as CairnHttpError).status).toBe(400);
    expect((await store.get(['users', '3'], 'c'))?.value).toEqual({ text: 'still stored' });
  });
});
