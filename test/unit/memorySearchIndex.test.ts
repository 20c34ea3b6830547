import { describe, expect, it } from 'vitest';

import { MemoryFacts } from '../../shared/memory/memory';
import type { MemoryStore } from '../../shared/memory/memoryStore';
import { rank } from '../../shared/memory/ranking';
import { type FactsUnder, SearchIndex } from '../../shared/memory/searchIndex';
import { StorageUnavailableError } from '../../shared/protocol/errors';
import { LocalMemoryStore } from '../../shared/storage/local/localMemoryStore';
import { tempDir } from '../support/cleanup';
import { DelegatingMemoryStore } from '../support/delegatingMemoryStore';

/**
 * The search cache's own bookkeeping over a real local store, with bounds small enough to reach:
 * what a truncated search leaves behind, and what it leaves of the subtrees cached before.
 */

const NOW = Date.UTC(2026, 0, 1);

/** Records the namespaces it scans. */
class RecordingStore extends DelegatingMemoryStore {
  scanned: string[] = [];
  override scan(...args: Parameters<MemoryStore['scan']>) {
    this.scanned.push(args[1]);
    return super.scan(...args);
  }
}

function setUp(maxRows: number) {
  const local = new LocalMemoryStore(tempDir('search-index'));
  const writer = new MemoryFacts({ store: local, now: () => NOW });
  const store = new RecordingStore(local);
  const index = new SearchIndex({
    store,
    open: (_tenant, fact) => fact.value,
    maxRows,
    maxScanBytes: 1 << 30,
  });
  /** The keys a text search of `namespace` answers, and whether it was truncated. */
  const search = (tenant: string, namespace: string, text: string) =>
    index.withFactsUnder(tenant, namespace, (facts: FactsUnder) => ({
      keys: rank(facts.columns, facts.slots, {
        words: [text],
        vector: null,
        distance: 'cosine',
        now: NOW,
        offset: 0,
        limit: 1000,
      })
        .map((item) => `${item.namespace.join('/')}:${item.key}`)
        .sort(),
      truncated: facts.truncated,
      held: facts.columns.slotOf.size,
    }));
  return { writer, store, search };
}

describe('memory search index', () => {
  it('removes what a truncated search read all at once, leaving the other subtrees and their words right', async () => {
    const tenant = { tenant: 'index-bulk' };
    const { writer, search } = setUp(20);
    for (let i = 0; i < 30; i++)
      await writer.remember(tenant, `users/${i}`, 'k', { text: `common word${i}` });
    for (let i = 0; i < 5; i++) await writer.remember(tenant, 'other', `o${i}`, { text: `common other${i}` });
    const others = ['other:o0', 'other:o1', 'other:o2', 'other:o3', 'other:o4'];

    expect(await search(tenant.tenant, 'other', 'common')).toEqual({
      keys: others,
      truncated: false,
      held: 5,
    });
    // Truncated: answered from the first 20 rows read, their words counted, then all dropped.
    const truncated = await search(tenant.tenant, 'users', 'common');
    expect(truncated.truncated).toBe(true);
    expect(truncated.keys).toHaveLength(20);
    expect(await search(tenant.tenant, 'other', 'common')).toEqual({
      keys: others,
      truncated: false,
      held: 5,
    });
    expect(await search(tenant.tenant, 'other', 'word3')).toEqual({ keys: [], truncated: false, held: 5 });

    // Freed slots reused by new facts: no word of the facts removed clings to them.
    for (let i = 0; i < 3; i++) await writer.remember(tenant, 'other', `n${i}`, { text: `fresh` });
    expect((await search(tenant.tenant, 'other', 'word3')).keys).toEqual([]);
    expect((await search(tenant.tenant, 'other', 'common')).keys).toEqual(others);
    expect(await search(tenant.tenant, 'other', 'fresh')).toEqual({
      keys: ['other:n0', 'other:n1', 'other:n2'],
      truncated: false,
      held: 8,
    });
    // Forgotten together (one catch-up removing them all): gone from every word's list.
    await writer.forgetAll(tenant, 'other');
    expect(await search(tenant.tenant, 'other', 'common')).toEqual({ keys: [], truncated: false, held: 0 });
  });
  it('keeps a subtree cached below one whose search was truncated, fresh as its changes come', async () => {
    const tenant = { tenant: 'index-below' };
    const { writer, store, search } = setUp(20);
    for (let i = 0; i < 30; i++)
      await writer.remember(tenant, `users/${i}`, 'k', { text: `common word${i}` });
    await writer.remember(tenant, 'users/7', 'extra', { text: 'common seven' });

    expect(await search(tenant.tenant, 'users/7', 'common')).toEqual({
      keys: ['users/7:extra', 'users/7:k'],
      truncated: false,
      held: 2,
    });
    const truncated = await search(tenant.tenant, 'users', 'common');
    expect(truncated.truncated).toBe(true);
    expect(truncated.keys).toHaveLength(20);
    store.scanned = [];
    // Still cached (no scan), and nothing of the truncated read besides it.
    expect(await search(tenant.tenant, 'users/7', 'common')).toEqual({
      keys: ['users/7:extra', 'users/7:k'],
      truncated: false,
      held: 2,
    });
    expect(store.scanned).toEqual([]);

    await writer.remember(tenant, 'users/7', 'k', { text: 'changed' });
    await writer.forget(tenant, 'users/7', 'extra');
    expect((await search(tenant.tenant, 'users', 'common')).truncated).toBe(true);
    expect(await search(tenant.tenant, 'users/7', 'changed')).toEqual({
      keys: ['users/7:k'],
      truncated: false,
      held: 1,
    });
    expect(await search(tenant.tenant, 'users/7', 'common')).toEqual({ keys: [], truncated: false, held: 1 });
    expect(store.scanned.every((namespace) => namespace === 'users')).toBe(true);
  });

  it('fails a cold read promptly when one part fails: no part reads a further page', async () => {
    const tenant = { tenant: 'index-fault' };
    const local = new LocalMemoryStore(tempDir('search-index'));
    const writer = new MemoryFacts({ store: local, now: () => NOW });
    for (let i = 0; i < 100; i++) await writer.remember(tenant, `users/${i}`, 'k', { text: `fact ${i}` });
    /** Pages of 2 rows (so every part has several), and part 1 failing once, after its first page. */
    class FailingPart extends DelegatingMemoryStore {
      started = 0;
      startedAtFailure: number | null = null;
      override async scan(...args: Parameters<MemoryStore['scan']>) {
        const [id, namespace, options] = args;
        this.started++;
        const page = await super.scan(id, namespace, { ...options, pageSize: 2 });
        if (options.part === 1 && this.startedAtFailure === null) {
          this.startedAtFailure = this.started;
          throw new StorageUnavailableError();
        }
        return page;
      }
    }
    const store = new FailingPart(local);
    const index = new SearchIndex({
      store,
      open: (_tenant, fact) => fact.value,
      maxRows: 1000,
      maxScanBytes: 1 << 30,
    });
    await expect(index.withFactsUnder(tenant.tenant, 'users', (facts) => facts.slots.length)).rejects.toThrow(
      StorageUnavailableError,
    );
    expect(store.startedAtFailure).not.toBeNull();
    expect(store.started).toBe(store.startedAtFailure);

    // Nothing of the failed read was kept: the next search reads and answers all of it.
    expect(await index.withFactsUnder(tenant.tenant, 'users', (facts) => facts.slots.length)).toBe(100);
  });

  it('reads the parts of a large subtree in pages of about the bytes asked for, not of 1,000 rows', async () => {
    const tenant = { tenant: 'index-pages' };
    const local = new LocalMemoryStore(tempDir('search-index'));
    const writer = new MemoryFacts({ store: local, now: () => NOW });
    const text = 'x'.repeat(1000);
    for (let i = 0; i < 60; i++) await writer.remember(tenant, `users/${i}`, 'k', { text, i });
    /** A first page of 4 rows (so that there are parts), then the page sizes the parts ask for. */
    class Pages extends DelegatingMemoryStore {
      asked: number[] = [];
      override async scan(...args: Parameters<MemoryStore['scan']>) {
        const [id, namespace, options] = args;
        if (options.part === undefined) return super.scan(id, namespace, { ...options, pageSize: 4 });
        this.asked.push(options.pageSize);
        return super.scan(...args);
      }
    }
    const store = new Pages(local);
    const index = new SearchIndex({
      store,
      open: (_tenant, fact) => fact.value,
      maxRows: 1000,
      maxScanBytes: 1 << 30,
      scanPageBytes: 10_000,
    });
    expect(await index.withFactsUnder(tenant.tenant, 'users', (facts) => facts.slots.length)).toBe(60);
    // Each value is about 1 KB: pages of about 10 rows (at least 10), never 1,000.
    expect(store.asked.length).toBeGreaterThan(0);
    expect(Math.max(...store.asked)).toBeLessThanOrEqual(10);
  });
});
