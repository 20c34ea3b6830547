import { setTimeout as sleep } from 'node:timers/promises';

import { CairnClient } from '@cairn-state/client';
import {
  CairnStore,
  decodeStoreLabel as decodeName,
  encodeStoreLabel as encodeName,
} from '@cairn-state/langgraph';
import {
  Annotation,
  END,
  getStore,
  type LangGraphRunnableConfig,
  START,
  StateGraph,
} from '@langchain/langgraph';
import { type BaseStore, InMemoryStore, type Item, type Operation } from '@langchain/langgraph-checkpoint';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { namespaceProblem } from '../../shared/protocol/memory';
import {
  apiKeysSetting,
  type Backend,
  backendSettings,
  newTenant,
  type RunningApp,
  startApp,
} from '../support/app';
import { azurite } from '../support/azurite';
import { eventually } from '../support/eventually';
import { memoryTableSettings } from '../support/tables';

/**
 * CairnStore as a LangGraph store. The behaviour LangGraph's own stores share is checked on
 * LangGraph's InMemoryStore too, as the reference: the same test passing on both says CairnStore
 * behaves as LangGraph expects; what only Cairn does (keyword `query` with scores, `$exists`, ttl,
 * wildcard-free listing on the service, scopes) is checked on CairnStore alone. CairnStore runs
 * against the app on the local backend (facts on disk) and on Table Storage (Azurite).
 */

type Subject = 'reference' | Backend;

describe.each<Subject>(['reference', 'local', 'blob'])('LangGraph store behaviour: %s', (subject) => {
  const tenant = newTenant('graph');
  let app: RunningApp | undefined;
  let makeStore: (scope?: string) => BaseStore;
  let store: BaseStore;
  // What only Cairn does is not registered for the reference at all (nothing is skipped).
  const cairnOnly = (name: string, test: () => Promise<void>) => {
    if (subject !== 'reference') it(name, test);
  };

  beforeAll(async () => {
    if (subject === 'reference') {
      const shared = new InMemoryStore();
      makeStore = () => shared;
    } else {
      const { blobEndpoint, tableEndpoint } = azurite();
      app = await startApp({
        CAIRN_API_KEYS: apiKeysSetting([tenant]),
        ...backendSettings(subject, blobEndpoint),
        ...(subject === 'blob' ? memoryTableSettings(tableEndpoint) : {}),
      });
      const url = app.url;
      makeStore = (scope = 'tests') => new CairnStore({ url, token: tenant.key, scope });
    }
    store = makeStore();
  });
  afterAll(async () => {
    await app?.stop();
  });

  it('puts, gets, updates and deletes items, keeping createdAt', async () => {
    expect(await store.get(['users', 'u1'], 'prefs')).toBeNull();
    await store.put(['users', 'u1'], 'prefs', { theme: 'dark', size: 3 });
    const first = await store.get(['users', 'u1'], 'prefs');
    expect(first).toMatchObject({
      namespace: ['users', 'u1'],
      key: 'prefs',
      value: { theme: 'dark', size: 3 },
    });
    expect(first?.createdAt).toBeInstanceOf(Date);
    // Read now: a store may hand out its own objects and change them later.
    const created = first?.createdAt.getTime() ?? NaN;
    const updated = first?.updatedAt.getTime() ?? NaN;
    await sleep(5);
    await store.put(['users', 'u1'], 'prefs', { theme: 'light' });
    const second = await store.get(['users', 'u1'], 'prefs');
    expect(second?.value).toEqual({ theme: 'light' });
    expect(second?.createdAt.getTime()).toBe(created);
    expect(second?.updatedAt.getTime()).toBeGreaterThan(updated);
    await store.delete(['users', 'u1'], 'prefs');
    expect(await store.get(['users', 'u1'], 'prefs')).toBeNull();
    await store.delete(['users', 'u1'], 'prefs');
  });

  it('keeps labels and keys with "/", "%", spaces and any Unicode apart and intact', async () => {
    const namespaces = [['a/b'], ['a', 'b'], ['50%', 'x%2Fy'], ['日本', 'ü 1'], ['tab\there']];
    for (const [i, namespace] of namespaces.entries()) {
      await store.put(namespace, `key/${i}%`, { i });
    }
    for (const [i, namespace] of namespaces.entries()) {
      const item = await store.get(namespace, `key/${i}%`);
      expect(item?.namespace).toEqual(namespace);
      expect(item?.key).toBe(`key/${i}%`);
      expect(item?.value).toEqual({ i });
    }
    expect((await store.search(['a/b'])).map(({ value }) => value)).toEqual([{ i: 0 }]);
    expect((await store.search(['a'])).map(({ value }) => value)).toEqual([{ i: 1 }]);
  });

  it('keeps labels and keys with Unicode noncharacters and lone surrogates apart and intact', async () => {
    // Characters a Cairn name may not hold (docs/memory.md, "Names and values"), but a label may.
    const namespaces = [
      ['nc', '\uFFFF'],
      ['nc', 'x\uFDD0y'],
      ['nc', '\u{1FFFE}'],
      ['nc', 'lone\uD800'],
    ];
    for (const [i, namespace] of namespaces.entries()) {
      await store.put(namespace, `key\uFFFE${i}\uDC00`, { i });
    }
    for (const [i, namespace] of namespaces.entries()) {
      const item = await store.get(namespace, `key\uFFFE${i}\uDC00`);
      expect(item?.namespace).toEqual(namespace);
      expect(item?.key).toBe(`key\uFFFE${i}\uDC00`);
      expect(item?.value).toEqual({ i });
    }
    const found = await store.search(['nc'], { limit: 10 });
    expect(found.map(({ value }) => value as { i: number }).sort((a, b) => a.i - b.i)).toEqual(
      namespaces.map((_, i) => ({ i })),
    );
  });

  it('searches a namespace prefix and below by whole labels, with filters, limit and offset', async () => {
    const docs: [string[], string, Record<string, unknown>][] = [
      [['docs'], 'd1', { kind: 'report', score: 5, status: 'active' }],
      [['docs', 'team'], 'd2', { kind: 'memo', score: 3, status: 'active' }],
      [['docs', 'team', 'old'], 'd3', { kind: 'report', score: 1, status: 'archived' }],
      [['docsX'], 'd4', { kind: 'report', score: 9, status: 'active' }],
    ];
    for (const [namespace, key, value] of docs) await store.put(namespace, key, value);
    const keys = async (options: Parameters<BaseStore['search']>[1] = {}, prefix = ['docs']) =>
      (await store.search(prefix, { limit: 100, ...options })).map(({ key }) => key).sort();
    expect(await keys()).toEqual(['d1', 'd2', 'd3']);
    expect(await keys({}, ['docs', 'team'])).toEqual(['d2', 'd3']);
    expect(await keys({ filter: { kind: 'report' } })).toEqual(['d1', 'd3']);
    expect(await keys({ filter: { kind: { $eq: 'memo' } } })).toEqual(['d2']);
    expect(await keys({ filter: { status: { $ne: 'active' } } })).toEqual(['d3']);
    expect(await keys({ filter: { score: { $gt: 1 } } })).toEqual(['d1', 'd2']);
    expect(await keys({ filter: { score: { $gte: 3, $lte: 4 } } })).toEqual(['d2']);
    expect(await keys({ filter: { score: { $lt: 3 } } })).toEqual(['d3']);
    expect(await keys({ filter: { kind: { $in: ['memo', 'other'] } } })).toEqual(['d2']);
    expect(await keys({ filter: { kind: { $nin: ['memo'] } } })).toEqual(['d1', 'd3']);
    expect(await keys({ filter: { kind: 'report', status: 'active' } })).toEqual(['d1']);
    const pages = [
      ...(await store.search(['docs'], { limit: 2, offset: 0 })),
      ...(await store.search(['docs'], { limit: 2, offset: 2 })),
    ].map(({ key }) => key);
    expect(pages.sort()).toEqual(['d1', 'd2', 'd3']);
    expect(await store.search(['docs'], { filter: { kind: 'report' }, limit: 1, offset: 1 })).toHaveLength(1);
    expect((await store.search(['nothing-here'])).length).toBe(0);
  });

  it('lists namespaces with prefix, suffix, wildcards, maxDepth, limit and offset', async () => {
    for (const namespace of [
      ['ln', 'a', 'x'],
      ['ln', 'a', 'y'],
      ['ln', 'b', 'x'],
      ['ln', 'b'],
      ['lnX', 'c'],
    ]) {
      await store.put(namespace, 'k', { n: namespace.join('/') });
    }
    const list = (options: Parameters<BaseStore['listNamespaces']>[0]) => store.listNamespaces(options);
    expect(await list({ prefix: ['ln'] })).toEqual([
      ['ln', 'a', 'x'],
      ['ln', 'a', 'y'],
      ['ln', 'b'],
      ['ln', 'b', 'x'],
    ]);
    expect(await list({ prefix: ['ln'], suffix: ['x'] })).toEqual([
      ['ln', 'a', 'x'],
      ['ln', 'b', 'x'],
    ]);
    expect(await list({ prefix: ['ln'], maxDepth: 2 })).toEqual([
      ['ln', 'a'],
      ['ln', 'b'],
    ]);
    expect(await list({ prefix: ['ln', '*', 'x'] })).toEqual([
      ['ln', 'a', 'x'],
      ['ln', 'b', 'x'],
    ]);
    expect(await list({ prefix: ['ln'], suffix: ['*', 'y'] })).toEqual([['ln', 'a', 'y']]);
    expect(await list({ prefix: ['ln'], limit: 2, offset: 1 })).toEqual([
      ['ln', 'a', 'y'],
      ['ln', 'b'],
    ]);
    // A depth no namespace reaches cuts nothing, whatever the store adds in front of the labels.
    for (const maxDepth of [15, 16, 100])
      expect(await list({ prefix: ['ln'], maxDepth })).toEqual(await list({ prefix: ['ln'] }));
  });

  it('runs batches of mixed operations, one answer per operation', async () => {
    // Whether a read sees a put of the same batch differs between LangGraph's stores (its
    // in-memory store applies puts last; CairnStore runs operations in order): not relied on here.
    const writes: Operation[] = [
      { namespace: ['batch'], key: 'a', value: { v: 1 } },
      { namespace: ['batch'], key: 'b', value: { v: 2 } },
      { namespace: ['batch'], key: 'gone', value: { v: 3 } },
    ];
    const written = (await store.batch(writes)) as unknown[];
    expect(written.map((result) => result ?? undefined)).toEqual([undefined, undefined, undefined]);
    const reads: Operation[] = [
      { namespace: ['batch'], key: 'a' },
      { namespace: ['batch'], key: 'gone', value: null },
      { namespacePrefix: ['batch'], limit: 10, offset: 0 },
      { matchConditions: [{ matchType: 'prefix', path: ['batch'] }], limit: 10, offset: 0 },
      { namespace: ['batch'], key: 'missing' },
    ];
    const results = (await store.batch(reads)) as unknown[];
    expect((results[0] as Item | null)?.value).toEqual({ v: 1 });
    expect((results[2] as Item[]).map(({ key }) => key).sort()).toEqual(
      subject === 'reference' ? ['a', 'b', 'gone'] : ['a', 'b'],
    );
    expect(results[3]).toEqual([['batch']]);
    expect(results[4]).toBeNull();
    expect(await store.get(['batch'], 'gone')).toBeNull();
  });

  cairnOnly('answers `query` with the keyword search, best first with scores in [0, 1]', async () => {
    await store.put(['kb'], 'tides', { text: 'The moon moves the tides' });
    await store.put(['kb'], 'sun', { text: 'The sun is a star' });
    await store.put(['kb', 'deep'], 'lunar', { text: 'Moon landing' });
    const hits = await store.search(['kb'], { query: 'moon tides' });
    expect(hits.map(({ key }) => key)).toEqual(['tides', 'lunar']);
    for (const hit of hits) {
      expect(hit.score).toBeGreaterThan(0);
      expect(hit.score).toBeLessThanOrEqual(1);
    }
    expect(await store.search(['kb'], { query: 'moon', filter: { text: { $exists: false } } })).toEqual([]);
  });

  cairnOnly('expires an item put with a ttl in minutes; a put without one clears it', async () => {
    const cairn = store as CairnStore;
    await cairn.put(['ttl'], 'brief', { text: 'one second' }, undefined, { ttl: 1 / 60 });
    await cairn.put(['ttl'], 'kept', { text: 'kept' }, undefined, { ttl: 1 / 60 });
    await cairn.put(['ttl'], 'kept', { text: 'kept' });
    expect(await store.get(['ttl'], 'brief')).not.toBeNull();
    // The app's clock is its own: wait until it says the item has expired.
    await eventually(
      'the item put with a ttl expires',
      async () => (await store.get(['ttl'], 'brief')) === null,
    );
    expect((await store.search(['ttl'])).map(({ key }) => key)).toEqual(['kept']);
  });

  cairnOnly("keeps one scope's items apart from another's in the same tenant", async () => {
    const other = makeStore('other-app');
    await other.put(['users', 'u1'], 'secret', { of: 'other-app' });
    await store.put(['users', 'u1'], 'secret', { of: 'tests' });
    expect((await other.get(['users', 'u1'], 'secret'))?.value).toEqual({ of: 'other-app' });
    expect((await store.get(['users', 'u1'], 'secret'))?.value).toEqual({ of: 'tests' });
    expect((await other.search([])).map(({ value }) => value)).toEqual([{ of: 'other-app' }]);
    expect(await other.listNamespaces()).toEqual([['users', 'u1']]);
    // What a LangGraph store writes is a plain fact for every other Cairn client of the tenant.
    const cairn = new CairnClient({ url: app?.url ?? '', token: tenant.key });
    expect((await cairn.memory.recall('other-app/users/u1', 'secret'))?.value).toEqual({ of: 'other-app' });
  });

  cairnOnly('serves a StateGraph node through config.store and getStore()', async () => {
    const State = Annotation.Root({ userId: Annotation<string>, reply: Annotation<string> });
    const remember = async (state: typeof State.State, config: LangGraphRunnableConfig) => {
      await config.store?.put(['profiles', state.userId], 'visits', { count: 1, note: 'likes green tea' });
      return {};
    };
    const answer = async (state: typeof State.State) => {
      const found = await getStore()?.search(['profiles', state.userId], { query: 'tea' });
      return { reply: `found ${found?.length ?? 0}: ${String(found?.[0]?.value['note'])}` };
    };
    const graph = new StateGraph(State)
      .addNode('remember', remember)
      .addNode('answer', answer)
      .addEdge(START, 'remember')
      .addEdge('remember', 'answer')
      .addEdge('answer', END)
      .compile({ store });
    const result = await graph.invoke({ userId: 'u-7', reply: '' });
    expect(result.reply).toBe('found 1: likes green tea');
    expect((await store.get(['profiles', 'u-7'], 'visits'))?.value).toEqual({
      count: 1,
      note: 'likes green tea',
    });
  });
});

describe('CairnStore label encoding', () => {
  it('is injective and undone by decodeName', () => {
    const labels = ['', '%', '/', 'a/b', 'a%2Fb', '%25', 'x\u0000y', 'tab\t', '日本', 'plain'];
    labels.push('\uFFFF', '%U00FFFF', '\u{10FFFF}', '\uD800', 'a\uDFFFb', '\uFDEF');
    const encoded = labels.map(encodeName);
    expect(new Set(encoded).size).toBe(labels.length);
    for (const segment of encoded) {
      // eslint-disable-next-line no-control-regex
      expect(segment).not.toMatch(/[/\u0000-\u001f\u007f]/);
      expect(segment).not.toBe('');
      // A segment the service takes, whatever the label held.
      expect(namespaceProblem(segment)).toBeNull();
    }
    expect(encoded.map(decodeName)).toEqual(labels);
  });

  it('refuses a scope that is not a namespace path', () => {
    const options = { url: 'http://127.0.0.1:9/api', token: 't' };
    expect(() => new CairnStore({ ...options, scope: '' })).toThrow(TypeError);
    expect(() => new CairnStore({ ...options, scope: 'a//b' })).toThrow(TypeError);
    expect(() => new CairnStore({ ...options, scope: ['a/b'] })).toThrow(TypeError);
  });
});
