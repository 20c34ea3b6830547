import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import { MemoryFacts } from '../../shared/memory/memory';
import type { MemoryStore } from '../../shared/memory/memoryStore';
import { DelegatingMemoryStore } from '../support/delegatingMemoryStore';
import type { MemoryStoreFixture } from './memoryStore.contract';

/**
 * The search cache (docs/memory.md, "Search cache"), on each store: a search on one instance sees
 * every fact written or forgotten on another before it started, whatever it cached, and a warm
 * search reads the tenant's change feed and the rows that changed, nothing else. Small on purpose:
 * a few facts of 4 dimensions (volume is the bench's).
 */

const A = { tenant: 'cache-tenant-a' };
const B = { tenant: 'cache-tenant-b' };

/** Counts the storage calls of the memory facts over it. */
class CountingStore extends DelegatingMemoryStore {
  readonly calls = { changes: 0, fetch: 0, scan: 0, get: 0 };
  fetched: string[] = [];
  reset(): void {
    for (const name of Object.keys(this.calls) as (keyof CountingStore['calls'])[]) this.calls[name] = 0;
    this.fetched = [];
  }
  override changes(...args: Parameters<MemoryStore['changes']>) {
    this.calls.changes++;
    return super.changes(...args);
  }
  override fetch(...args: Parameters<MemoryStore['fetch']>) {
    this.calls.fetch++;
    this.fetched.push(...args[1]);
    return super.fetch(...args);
  }
  override scan(...args: Parameters<MemoryStore['scan']>) {
    this.calls.scan++;
    return super.scan(...args);
  }
  override get(...args: Parameters<MemoryStore['get']>) {
    this.calls.get++;
    return super.get(...args);
  }
}

const vector = (x: number) => [x, 1 - x, 0, 0];

export function describeMemorySearchCacheContract(fixture: MemoryStoreFixture): void {
  describe(`memory search cache: ${fixture.name}`, () => {
    let store: MemoryStore;
    let another: () => MemoryStore;
    let destroy: () => Promise<void>;
    let clock: number;
    const facts = (over: MemoryStore, extra: { searchCacheBytes?: number } = {}) =>
      new MemoryFacts({ store: over, now: () => clock, ...extra });

    beforeEach(async () => {
      ({ store, another, destroy } = await fixture.create());
      clock = Date.UTC(2026, 0, 1);
    });
    afterEach(async () => destroy());

    const keys = async (memory: MemoryFacts, namespace: string, tenant = A) =>
      (await memory.search(tenant, { namespace, limit: 100 })).items
        .map((item) => `${item.namespace.join('/')}:${item.key}`)
        .sort();

    it('sees on one instance every fact written or forgotten on another before the search started', async () => {
      const writer = facts(store);
      const reader = facts(another());
      await writer.remember(A, 'notes/x', 'one', { text: 'green tea' }, { vectors: { text: vector(1) } });
      await writer.remember(A, 'notes', 'two', { text: 'black coffee' });
      expect(await keys(reader, 'notes')).toEqual(['notes/x:one', 'notes:two']);
      // Covered by the cached subtree `notes`, and the whole tenant read afresh.
      expect(await keys(reader, 'notes/x')).toEqual(['notes/x:one']);
      expect(await keys(reader, '')).toEqual(['notes/x:one', 'notes:two']);

      clock += 10;
      const replaced = await writer.remember(
        A,
        'notes/x',
        'one',
        { text: 'oolong tea' },
        { vectors: { text: vector(0) } },
      );
      clock += 10;
      await writer.remember(A, 'notes/x', 'three', { text: 'jasmine tea' });
      const found = await reader.search(A, { namespace: 'notes', text: 'tea', limit: 10 });
      // Equal scores: the newer first.
      expect(found.items.map((item) => [item.key, item.value, item.etag])).toEqual([
        ['three', { text: 'jasmine tea' }, expect.any(String)],
        ['one', { text: 'oolong tea' }, replaced.item.etag],
      ]);
      const near = await reader.search(A, { namespace: 'notes', vector: vector(0), limit: 1 });
      expect(near.items.map((item) => item.key)).toEqual(['one']);
      expect(near.items[0]?.score).toBeCloseTo(1, 5);

      await writer.forget(A, 'notes/x', 'three');
      expect(await keys(reader, 'notes')).toEqual(['notes/x:one', 'notes:two']);
      await writer.forgetAll(A, 'notes/x');
      expect(await keys(reader, 'notes')).toEqual(['notes:two']);
      expect(await keys(reader, '')).toEqual(['notes:two']);

      // Expired, then pruned elsewhere: absent either way.
      await writer.remember(A, 'notes', 'brief', { text: 'soon gone' }, { ttl: 1 });
      expect(await keys(reader, 'notes')).toEqual(['notes:brief', 'notes:two']);
      clock += 2000;
      expect(await keys(reader, 'notes')).toEqual(['notes:two']);
      expect((await writer.pruneExpired(A.tenant, 10)).deleted).toBe(1);
      expect(await keys(reader, 'notes')).toEqual(['notes:two']);

      // Another tenant's cache and feed are its own.
      await writer.remember(B, 'notes', 'other', 'b');
      expect(await keys(reader, '', B)).toEqual(['notes:other']);
      expect(await keys(reader, '')).toEqual(['notes:two']);
    });

    it('reads on a warm search only the feed, and after a change only the rows that changed', async () => {
      const writer = facts(store);
      const counting = new CountingStore(another());
      const reader = facts(counting);
      for (const key of ['a', 'b', 'c', 'd'])
        await writer.remember(A, 'team/1', key, { text: `fact ${key}` });

      expect(await keys(reader, 'team')).toEqual(['team/1:a', 'team/1:b', 'team/1:c', 'team/1:d']);
      expect(counting.calls.scan).toBeGreaterThan(0);

      counting.reset();
      await reader.search(A, { namespace: 'team', text: 'fact' });
      await reader.search(A, { namespace: 'team/1', vector: vector(1) });
      expect(counting.calls).toEqual({ changes: 2, fetch: 0, scan: 0, get: 0 });

      await writer.remember(A, 'team/1', 'b', { text: 'fact b, again' });
      await writer.forget(A, 'team/1', 'c');
      await writer.remember(A, 'elsewhere', 'e', 'not searched by the reader yet');
      counting.reset();
      const found = await reader.search(A, { namespace: 'team', text: 'again' });
      expect(found.items.map((item) => item.key)).toEqual(['b']);
      // The two rows of the cached subtree, once; the row elsewhere is not read until searched.
      expect(counting.calls).toEqual({ changes: 1, fetch: 1, scan: 0, get: 0 });
      expect(counting.fetched.length).toBe(2);
      expect(await keys(reader, 'team')).toEqual(['team/1:a', 'team/1:b', 'team/1:d']);
    });

    it('keeps no tenant heavier than its bound, and answers the same reading storage each time', async () => {
      const writer = facts(store);
      const counting = new CountingStore(another());
      const reader = facts(counting, { searchCacheBytes: 1 });
      await writer.remember(A, 'big', 'a', { text: 'alpha' });
      await writer.remember(A, 'big', 'b', { text: 'beta' });
      expect(await keys(reader, 'big')).toEqual(['big:a', 'big:b']);
      expect(await keys(reader, 'big')).toEqual(['big:a', 'big:b']);
      expect(counting.calls.scan).toBe(2);
      await writer.forget(A, 'big', 'a');
      expect(await keys(reader, 'big')).toEqual(['big:b']);
    });

    it('weighs a tenant anew as it grows after its first search, evicting the least recently searched', async () => {
      const writer = facts(store);
      const counting = new CountingStore(another());
      // Estimated weights: B about 61 kB; A about 25 kB until its 2,000 distinct words are counted
      // (a text search), then about 220 kB. Both fit before A grows, not after.
      const reader = facts(counting, { searchCacheBytes: 240_000 });
      const words = Array.from({ length: 2000 }, (_, i) => `w${i}`).join(' ');
      await writer.remember(A, 'grows', 'many', { text: words });
      await writer.remember(B, 'stays', 'long', { text: 'x'.repeat(30_000) });

      expect(await keys(reader, 'stays', B)).toEqual(['stays:long']);
      expect(await keys(reader, 'grows')).toEqual(['grows:many']);
      counting.reset();
      expect(await keys(reader, 'stays', B)).toEqual(['stays:long']);
      expect(await keys(reader, 'grows')).toEqual(['grows:many']);
      expect(counting.calls.scan).toBe(0);

      // B searched last before A grows: A is then the most recent, and B goes.
      await reader.search(B, { namespace: 'stays' });
      const found = await reader.search(A, { namespace: 'grows', text: 'w1999' });
      expect(found.items.map((item) => item.key)).toEqual(['many']);
      counting.reset();
      expect(await keys(reader, 'grows')).toEqual(['grows:many']);
      expect(counting.calls.scan).toBe(0);
      expect(await keys(reader, 'stays', B)).toEqual(['stays:long']);
      expect(counting.calls.scan).toBeGreaterThan(0);
    });
  });
}
