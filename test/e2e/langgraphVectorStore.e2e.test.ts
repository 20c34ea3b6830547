import { CairnStore } from '@cairn-state/langgraph';
import { Embeddings } from '@langchain/core/embeddings';
import { type BaseStore, InMemoryStore } from '@langchain/langgraph-checkpoint';
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
import { memoryTableSettings } from '../support/tables';

/**
 * CairnStore with LangGraph's index config, against LangGraph's own InMemoryStore with the same
 * deterministic embedder on the same data: the same top results in the same order, with the same
 * cosine scores; and the fallbacks when the embedder fails. Over real HTTP to the app, on the local
 * backend and on Table Storage (Azurite).
 */

const DIMS = 24;

/** Words hashed into 24 dimensions, weighted by position: deterministic, no model. */
class HashEmbeddings extends Embeddings {
  failing = false;
  constructor() {
    super({});
  }
  embed(text: string): number[] {
    const vector = new Array<number>(DIMS).fill(0);
    const words = text
      .toLowerCase()
      .split(/[^a-z0-9]+/)
      .filter(Boolean);
    words.forEach((word, position) => {
      let hash = 2166136261;
      for (const char of word) hash = Math.imul(hash ^ char.charCodeAt(0), 16777619) >>> 0;
      vector[hash % DIMS] = (vector[hash % DIMS] ?? 0) + 1 + 1 / (position + 2);
      vector[(hash >>> 8) % DIMS] = (vector[(hash >>> 8) % DIMS] ?? 0) + 0.5;
    });
    // A small component of the whole text, so that no two texts tie (ties are ordered differently
    // by each store: insertion order there, newest first here).
    let whole = 0;
    for (const char of text) whole = (Math.imul(whole, 31) + char.charCodeAt(0)) >>> 0;
    vector[DIMS - 1] = (vector[DIMS - 1] ?? 0) + (whole % 997) / 997;
    return vector;
  }
  async embedDocuments(documents: string[]): Promise<number[][]> {
    if (this.failing) throw new Error('the embedding service is down');
    return documents.map((document) => this.embed(document));
  }
  async embedQuery(document: string): Promise<number[]> {
    if (this.failing) throw new Error('the embedding service is down');
    return this.embed(document);
  }
}

const TOPICS = ['vegetarian dinner', 'french language', 'dark theme', 'morning meetings', 'hiking trips'];
const EXTRAS = ['pasta', 'cheese', 'lessons', 'colours', 'coffee', 'mountains', 'rain', 'books'];

/** 40 items in 4 namespaces, each a short text of a topic and two extra words. */
const DATA = Array.from({ length: 40 }, (_, i) => ({
  namespace: ['users', `u${i % 4}`],
  key: `fact-${i}`,
  value: {
    text: `${TOPICS[i % TOPICS.length]} ${EXTRAS[(i * 3) % EXTRAS.length]} ${EXTRAS[(i * 5 + 1) % EXTRAS.length]} ${i}`,
    kind: i % 3 === 0 ? 'pref' : 'note',
    rank: i,
  },
}));

const QUERIES = [
  { prefix: ['users'], query: 'dinner ideas with pasta', limit: 5 },
  { prefix: ['users'], query: 'learning french', limit: 8, offset: 2 },
  { prefix: ['users', 'u1'], query: 'hiking in the mountains', limit: 4 },
  { prefix: ['users'], query: 'coffee meetings', limit: 6, filter: { kind: 'pref' } },
];

describe.each<Backend>(['local', 'blob'])('CairnStore with an index: %s', (backend) => {
  const tenant = newTenant('vectors');
  let app: RunningApp;
  let embeddings: HashEmbeddings;
  let warnings: string[];
  let cairn: CairnStore;
  let reference: BaseStore;

  beforeAll(async () => {
    const { blobEndpoint, tableEndpoint } = azurite();
    app = await startApp({
      CAIRN_API_KEYS: apiKeysSetting([tenant]),
      ...backendSettings(backend, blobEndpoint),
      ...(backend === 'blob' ? memoryTableSettings(tableEndpoint) : {}),
    });
    embeddings = new HashEmbeddings();
    warnings = [];
    const index = { dims: DIMS, embeddings, fields: ['text'] };
    cairn = new CairnStore({
      url: app.url,
      token: tenant.key,
      scope: 'vectors',
      index,
      onWarning: (message) => warnings.push(message),
    });
    reference = new InMemoryStore({ index });
    for (const item of DATA) {
      await cairn.put(item.namespace, item.key, item.value);
      await reference.put(item.namespace, item.key, item.value);
    }
  });
  afterAll(async () => {
    await app.stop();
  });

  it('ranks by meaning as LangGraph InMemoryStore does: same results, same order, same scores', async () => {
    for (const { prefix, ...options } of QUERIES) {
      const [ours, theirs] = await Promise.all([
        cairn.search(prefix, options),
        reference.search(prefix, options),
      ]);
      expect(theirs.length).toBeGreaterThan(0);
      expect(ours.map((item) => [item.namespace, item.key])).toEqual(
        theirs.map((item) => [item.namespace, item.key]),
      );
      ours.forEach((item, i) => expect(item.score).toBeCloseTo(theirs[i]?.score ?? Number.NaN, 5));
      expect(ours.map((item) => item.value)).toEqual(theirs.map((item) => item.value));
    }
    expect(warnings).toEqual([]);
  });

  it('takes index: false and a field list per put, as LangGraph does', async () => {
    const items = [
      { key: 'none', value: { text: 'vegetarian dinner', other: 'x' }, index: false as const },
      { key: 'other', value: { text: 'zzz', other: 'vegetarian dinner' }, index: ['other'] },
    ];
    for (const { key, value, index } of items) {
      await cairn.put(['solo'], key, value, index);
      await reference.put(['solo'], key, value, index);
    }
    const options = { query: 'vegetarian dinner', limit: 5 };
    const [ours, theirs] = await Promise.all([
      cairn.search(['solo'], options),
      reference.search(['solo'], options),
    ]);
    expect(ours.map((item) => [item.key, item.score === undefined])).toEqual([
      ['other', false],
      ['none', true],
    ]);
    expect(theirs.map((item) => [item.key, item.score === undefined])).toEqual([
      ['other', false],
      ['none', true],
    ]);
  });

  it('falls back to keywords when the embedder fails, and says so; never fails the call', async () => {
    embeddings.failing = true;
    try {
      await cairn.put(['fallback'], 'k', { text: 'stored while the embedder was down' });
      const found = await cairn.search(['fallback'], { query: 'embedder down' });
      expect(found.map((item) => item.key)).toEqual(['k']);
      expect(found[0]?.score).toBeGreaterThan(0);
      expect(warnings).toEqual([
        expect.stringContaining('stored without vectors'),
        expect.stringContaining('ranks by keywords'),
      ]);
    } finally {
      embeddings.failing = false;
    }
  });

  it("refuses puts and searches of a store whose dims are not the tenant index's: a configuration error, not a fallback", async () => {
    // Another app of the tenant, configured with twice the dimensions (its embedder answers them).
    const wide = new (class extends Embeddings {
      constructor() {
        super({});
      }
      async embedDocuments(documents: string[]): Promise<number[][]> {
        return documents.map((document) => [...embeddings.embed(document), ...embeddings.embed(document)]);
      }
      async embedQuery(document: string): Promise<number[]> {
        return [...embeddings.embed(document), ...embeddings.embed(document)];
      }
    })();
    const told: string[] = [];
    const other = new CairnStore({
      url: app.url,
      token: tenant.key,
      scope: 'vectors',
      index: { dims: 2 * DIMS, embeddings: wide, fields: ['text'] },
      onWarning: (message) => told.push(message),
    });
    const refused = async (call: Promise<unknown>) => {
      await expect(call).rejects.toThrow(/must have 24 dimensions/);
      await expect(call).rejects.toHaveProperty('status', 400);
    };
    await refused(other.put(['wide'], 'k', { text: 'dinner with pasta' }));
    await refused(other.search(['users'], { query: 'dinner ideas' }));
    expect(told).toEqual([]);
    expect(await other.get(['wide'], 'k')).toBeNull();
  });

  it('answers a vector of another dimension count with 400 naming the field, writing nothing', async () => {
    const headers = { authorization: `Bearer ${tenant.key}`, 'content-type': 'application/json' };
    const put = await fetch(`${app.url}/api/memory/facts?namespace=raw&key=k`, {
      method: 'PUT',
      headers,
      body: JSON.stringify({ value: 1, vectors: { text: [1, 2, 3] } }),
    });
    expect(put.status).toBe(400);
    const putError = ((await put.json()) as { error: { code: string; message: string } }).error;
    expect(putError.code).toBe('invalid_argument');
    expect(putError.message).toMatch(/^vectors\.text: must have 24 dimensions/);
    const search = await fetch(`${app.url}/api/memory/search`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ namespace: '', vector: [1, 2, 3] }),
    });
    expect(search.status).toBe(400);
    const searchError = ((await search.json()) as { error: { message: string } }).error;
    expect(searchError.message).toMatch(/^vector: must have 24 dimensions/);
    const get = await fetch(`${app.url}/api/memory/facts?namespace=raw&key=k`, { headers });
    expect(get.status).toBe(404);
  });
});
