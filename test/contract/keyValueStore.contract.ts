import { randomUUID } from 'node:crypto';

import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import {
  InvalidArgumentError,
  PayloadTooLargeError,
  PreconditionFailedError,
} from '../../shared/protocol/errors';
import type { KeyValueStore, KeyValueStoreFactory } from '../../shared/storage/keyValueStore';
import { inParallelForThisTest } from '../support/parallel';

/**
 * The key/value storage contract, as obligations every implementation must meet. Run against each
 * implementation with a fixture that makes a fresh, uniquely named store per test.
 */
export interface KeyValueStoreFixture {
  readonly name: string;
  /**
   * A fresh, empty store factory with `maxValueBytes` = 2 MiB, and `another()`, which makes a second
   * factory over the same storage, as another instance of the app would have.
   */
  create(): Promise<{
    factory: KeyValueStoreFactory;
    another: () => KeyValueStoreFactory;
    destroy: () => Promise<void>;
  }>;
}

export const MAX_VALUE_BYTES = 2 * 1024 * 1024;

async function listAll(store: KeyValueStore, prefix: string, limit: number): Promise<string[]> {
  const keys: string[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 10_000; page++) {
    const result = await store.list({ prefix, limit, ...(cursor === undefined ? {} : { cursor }) });
    expect(result.keys.length).toBeLessThanOrEqual(limit);
    keys.push(...result.keys);
    if (result.cursor === null) return keys;
    cursor = result.cursor;
  }
  throw new Error('listing did not end');
}

const byteOrder = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));

export function describeKeyValueStoreContract(fixture: KeyValueStoreFixture): void {
  describe(`KeyValueStore contract: ${fixture.name}`, () => {
    let factory: KeyValueStoreFactory;
    let another: () => KeyValueStoreFactory;
    let destroy: () => Promise<void>;
    let store: KeyValueStore;

    beforeEach(async () => {
      ({ factory, another, destroy } = await fixture.create());
      store = factory.forTenant('tenant-a');
    });
    afterEach(async () => destroy());

    it('reports an absent key as null, never as an error', async () => {
      expect(await store.read('missing/key')).toBeNull();
      expect(await store.head('missing/key')).toBeNull();
      expect(await store.delete('missing/key')).toBe(false);
    });

    it('stores bytes and reads them back with a quoted ETag', async () => {
      const value = Buffer.from([0, 1, 2, 255, 10, 13]);
      const written = await store.write('notes/bytes', value);
      expect(written).toMatchObject({ created: true, size: value.length });
      expect(written.etag).toMatch(/^".+"$/);
      const read = await store.read('notes/bytes');
      expect(read?.value.equals(value)).toBe(true);
      expect(read?.etag).toBe(written.etag);
      expect(await store.head('notes/bytes')).toEqual({ etag: written.etag, size: value.length });
      expect((await store.write('notes/bytes', Buffer.from('x'))).created).toBe(false);
    });

    it('reads what another instance wrote, appended or deleted, never a value it read before', async () => {
      const other = another().forTenant('tenant-a');
      const first = await store.write('shared/state', Buffer.from('one'));
      expect((await store.read('shared/state'))?.value.toString()).toBe('one');
      expect((await store.read('shared/state'))?.value.toString()).toBe('one');
      // Same size, other bytes: only the version tells them apart.
      const second = await other.write('shared/state', Buffer.from('two'));
      expect(await store.read('shared/state')).toEqual({ value: Buffer.from('two'), etag: second.etag });
      const appended = await other.append('shared/state', Buffer.from('+3'));
      expect(await store.read('shared/state')).toEqual({ value: Buffer.from('two+3'), etag: appended.etag });
      expect(await other.delete('shared/state')).toBe(true);
      expect(await store.read('shared/state')).toBeNull();
      // The first bytes again, under a new version.
      const again = await other.write('shared/state', Buffer.from('one'));
      expect(again.etag).not.toBe(first.etag);
      expect(await store.read('shared/state')).toEqual({ value: Buffer.from('one'), etag: again.etag });
      // And the other way round: what this instance writes, the other reads.
      const mine = await store.write('shared/state', Buffer.from('mine'), { ifMatch: again.etag });
      expect(await other.read('shared/state')).toEqual({ value: Buffer.from('mine'), etag: mine.etag });
    });

    it('gives a new ETag on every write, also when the value comes back (A→B→A)', async () => {
      const a1 = await store.write('aba', Buffer.from('A'));
      const b = await store.write('aba', Buffer.from('B'));
      const a2 = await store.write('aba', Buffer.from('A'));
      expect(new Set([a1.etag, b.etag, a2.etag]).size).toBe(3);
      await expect(store.write('aba', Buffer.from('C'), { ifMatch: a1.etag })).rejects.toBeInstanceOf(
        PreconditionFailedError,
      );
      expect((await store.read('aba'))?.value.toString()).toBe('A');
    });

    it('replaces only the matching version with ifMatch, and tells the loser the current ETag', async () => {
      const first = await store.write('cas', Buffer.from('1'));
      const second = await store.write('cas', Buffer.from('2'), { ifMatch: first.etag });
      expect(second.created).toBe(false);
      const failure = await store
        .write('cas', Buffer.from('3'), { ifMatch: first.etag })
        .catch((e: unknown) => e);
      expect(failure).toBeInstanceOf(PreconditionFailedError);
      expect((failure as PreconditionFailedError).currentEtag).toBe(second.etag);
      expect((await store.read('cas'))?.value.toString()).toBe('2');
    });

    it('ifMatch "*" requires the key to exist; ifAbsent requires it not to', async () => {
      await expect(store.write('star', Buffer.from('x'), { ifMatch: '*' })).rejects.toBeInstanceOf(
        PreconditionFailedError,
      );
      expect(await store.read('star')).toBeNull();
      const created = await store.write('star', Buffer.from('x'), { ifAbsent: true });
      expect(created.created).toBe(true);
      await expect(store.write('star', Buffer.from('y'), { ifAbsent: true })).rejects.toBeInstanceOf(
        PreconditionFailedError,
      );
      const replaced = await store.write('star', Buffer.from('z'), { ifMatch: '*' });
      expect(replaced.created).toBe(false);
      expect((await store.read('star'))?.value.toString()).toBe('z');
    });

    it('refuses ifMatch with ifAbsent and writes nothing', async () => {
      await expect(
        store.write('both', Buffer.from('x'), { ifMatch: '*', ifAbsent: true }),
      ).rejects.toBeInstanceOf(InvalidArgumentError);
      expect(await store.read('both')).toBeNull();
    });

    it('stores an empty value and a value of exactly the limit; refuses one byte more, writing nothing', async () => {
      expect((await store.write('empty', Buffer.alloc(0))).size).toBe(0);
      expect((await store.read('empty'))?.value.length).toBe(0);
      const big = Buffer.alloc(MAX_VALUE_BYTES, 7);
      expect((await store.write('big', big)).size).toBe(MAX_VALUE_BYTES);
      expect((await store.read('big'))?.value.equals(big)).toBe(true);
      await expect(store.write('too-big', Buffer.alloc(MAX_VALUE_BYTES + 1))).rejects.toBeInstanceOf(
        PayloadTooLargeError,
      );
      expect(await store.head('too-big')).toBeNull();
    });

    it('appends, creating the key first, and refuses an append past the limit without writing', async () => {
      const created = await store.append('log.jsonl', Buffer.from('one\n'));
      expect(created).toMatchObject({ created: true, size: 4 });
      const appended = await store.append('log.jsonl', Buffer.from('two\n'));
      expect(appended).toMatchObject({ created: false, size: 8 });
      expect(appended.etag).not.toBe(created.etag);
      await expect(
        store.append('log.jsonl', Buffer.from('x'), { ifMatch: created.etag }),
      ).rejects.toBeInstanceOf(PreconditionFailedError);
      await expect(store.append('log.jsonl', Buffer.alloc(MAX_VALUE_BYTES))).rejects.toBeInstanceOf(
        PayloadTooLargeError,
      );
      expect((await store.read('log.jsonl'))?.value.toString()).toBe('one\ntwo\n');
      await expect(
        store.append('log.jsonl', Buffer.from('three\n'), { ifMatch: appended.etag }),
      ).resolves.toMatchObject({ size: 14 });
    });

    it('keeps every one of 50 concurrent appends, each contiguous', async () => {
      const lines = Array.from({ length: 50 }, (_, i) => `line-${i}-${'x'.repeat(200)}\n`);
      await Promise.all(lines.map((line) => store.append('concurrent.log', Buffer.from(line))));
      const stored = (await store.read('concurrent.log'))!.value.toString();
      const storedLines = stored.split('\n').filter((line) => line !== '');
      expect(storedLines).toHaveLength(50);
      expect(new Set(storedLines)).toEqual(new Set(lines.map((line) => line.trimEnd())));
    });

    it('lets exactly one of 20 concurrent create-only writers win', async () => {
      const results = await Promise.allSettled(
        Array.from({ length: 20 }, (_, i) =>
          store.write('race', Buffer.from(`writer-${i}`), { ifAbsent: true }),
        ),
      );
      const winners = results.filter((result) => result.status === 'fulfilled');
      expect(winners).toHaveLength(1);
      for (const result of results) {
        if (result.status === 'rejected') expect(result.reason).toBeInstanceOf(PreconditionFailedError);
      }
      const winnerIndex = results.findIndex((result) => result.status === 'fulfilled');
      expect((await store.read('race'))?.value.toString()).toBe(`writer-${winnerIndex}`);
    });

    it('loses no update among 30 concurrent compare-and-swap incrementers', async () => {
      await store.write('counter', Buffer.from('0'));
      const increment = async () => {
        for (;;) {
          const current = (await store.read('counter'))!;
          const next = Buffer.from(String(Number(current.value.toString()) + 1));
          try {
            await store.write('counter', next, { ifMatch: current.etag });
            return;
          } catch (error) {
            if (!(error instanceof PreconditionFailedError)) throw error;
          }
        }
      };
      await Promise.all(Array.from({ length: 30 }, increment));
      expect((await store.read('counter'))?.value.toString()).toBe('30');
    });

    it('deletes only the matching version with ifMatch', async () => {
      const first = await store.write('doomed', Buffer.from('1'));
      const second = await store.write('doomed', Buffer.from('2'));
      await expect(store.delete('doomed', { ifMatch: first.etag })).rejects.toBeInstanceOf(
        PreconditionFailedError,
      );
      expect((await store.read('doomed'))?.value.toString()).toBe('2');
      expect(await store.delete('doomed', { ifMatch: second.etag })).toBe(true);
      expect(await store.read('doomed')).toBeNull();
      await expect(store.delete('doomed', { ifMatch: '*' })).rejects.toBeInstanceOf(PreconditionFailedError);
    });

    it('handles unicode keys and a key of exactly 1024 bytes', async () => {
      const unicode = ['ünïcødé/日本語.txt', 'emoji/😀', 'Ωmega/ß'];
      for (const key of unicode) await store.write(key, Buffer.from(key));
      for (const key of unicode) expect((await store.read(key))?.value.toString()).toBe(key);
      // Five segments of 204 bytes: filesystems limit one segment to 255 bytes.
      const longKey = ['a', 'b', 'c', 'd', 'e'].map((letter) => letter.repeat(204)).join('/');
      expect(Buffer.byteLength(longKey)).toBe(1024);
      await store.write(longKey, Buffer.from('long'));
      expect((await store.read(longKey))?.value.toString()).toBe('long');
      expect(await listAll(store, '', 100)).toEqual([...unicode, longKey].sort(byteOrder));
    });

    it('stores keys with segments over 255 bytes, lists them in key order among others, pages and deletes', async () => {
      // One segment of 1,021 bytes (the filesystem's name limit is 255), and keys that share the
      // beginning of a long segment, to hold key order at every boundary.
      const huge = `x/${'é'.repeat(510)}y`;
      expect(Buffer.byteLength(huge)).toBe(1023);
      const long = 'l'.repeat(300);
      const keys = [
        `${long}`,
        `${long}/child`,
        `${long}-sibling`,
        `${'l'.repeat(126)}`,
        `${'l'.repeat(126)}/short`,
        `${'l'.repeat(252)}m`,
        'l',
        'm',
        huge,
      ];
      // A key cannot also be another key's folder: `${long}` and `${long}/child` cannot both exist.
      const stored = keys.filter((key) => key !== `${long}/child` && key !== `${'l'.repeat(126)}/short`);
      for (const key of stored) await store.write(key, Buffer.from(key));
      for (const key of stored) expect((await store.read(key))?.value.toString()).toBe(key);
      expect(await listAll(store, '', 2)).toEqual([...stored].sort(byteOrder));
      expect(await listAll(store, 'l'.repeat(200), 1)).toEqual(
        stored.filter((key) => key.startsWith('l'.repeat(200))).sort(byteOrder),
      );
      await store.append(huge, Buffer.from('+'));
      expect((await store.read(huge))?.value.toString()).toBe(`${huge}+`);
      expect(await store.delete(long)).toBe(true);
      expect(await store.read(long)).toBeNull();
      expect(await listAll(store, '', 100)).toEqual(stored.filter((key) => key !== long).sort(byteOrder));
    });

    it.each([
      ['empty', ''],
      ['traversal', 'a/../b'],
      ['dot segment', './a'],
      ['leading slash', '/a'],
      ['trailing slash', 'a/'],
      ['empty segment', 'a//b'],
      ['backslash', 'a\\b'],
      ['control character', 'a\u0001b'],
      ['DEL', 'a\u007fb'],
      ['U+FFFF', 'a\uffffb'],
      ['U+FFFE', 'a/\ufffe'],
      ['U+FDD0', '\ufdd0'],
      ['U+10FFFF', 'a\u{10ffff}'],
      ['a lone surrogate', 'a\ud800b'],
      ['1025 bytes', 'k'.repeat(1025)],
    ])('refuses a key with %s before any I/O', async (_name, key) => {
      await expect(store.write(key, Buffer.from('x'))).rejects.toBeInstanceOf(InvalidArgumentError);
      await expect(store.append(key, Buffer.from('x'))).rejects.toBeInstanceOf(InvalidArgumentError);
      await expect(store.read(key)).rejects.toBeInstanceOf(InvalidArgumentError);
      await expect(store.head(key)).rejects.toBeInstanceOf(InvalidArgumentError);
      await expect(store.delete(key)).rejects.toBeInstanceOf(InvalidArgumentError);
      expect(await listAll(store, '', 100)).toEqual([]);
    });

    it.each([
      ['a control character', '\u0000'],
      ['U+FFFF', 'a\uffff'],
      ['U+1FFFE', '\u{1fffe}/'],
      ['a lone surrogate', '\udfff'],
      ['a leading slash', '/a'],
      ['an empty segment', 'a//'],
      ['a dot segment', 'a/../'],
      ['a backslash', 'a\\'],
      ['1025 bytes', 'p'.repeat(1025)],
    ])('refuses a listing prefix with %s before any I/O, as keys are refused', async (_name, prefix) => {
      await store.write('a/b', Buffer.from('x'));
      await expect(store.list({ prefix, limit: 10 })).rejects.toBeInstanceOf(InvalidArgumentError);
      await expect(store.listItems({ prefix, limit: 10 })).rejects.toBeInstanceOf(InvalidArgumentError);
      // A prefix may end inside a segment, a dot included, or with "/".
      for (const partial of ['a', 'a/', 'a/b']) expect(await listAll(store, partial, 10)).toEqual(['a/b']);
      expect(await listAll(store, 'a/.', 10)).toEqual([]);
    });

    it('lists by plain string prefix, ascending, every key once across pages', async () => {
      const keys = [
        'interactions/2026-01-01.jsonl',
        'interactions/2026-01-02.jsonl',
        'inter',
        'a-c',
        'a/b',
        'a/b-c',
        'z',
      ];
      for (const key of keys) await store.write(key, Buffer.from(key));
      expect(await listAll(store, '', 2)).toEqual([...keys].sort(byteOrder));
      expect(await listAll(store, 'inter', 1)).toEqual([
        'inter',
        'interactions/2026-01-01.jsonl',
        'interactions/2026-01-02.jsonl',
      ]);
      expect(await listAll(store, 'a/', 10)).toEqual(['a/b', 'a/b-c']);
      expect(await listAll(store, 'nothing', 10)).toEqual([]);
      const first = await store.list({ prefix: '', limit: 2 });
      expect(first.cursor).not.toBeNull();
      await expect(store.list({ prefix: 'a', limit: 2, cursor: first.cursor! })).rejects.toBeInstanceOf(
        InvalidArgumentError,
      );
      await expect(store.list({ prefix: '', limit: 2, cursor: 'not-a-cursor' })).rejects.toBeInstanceOf(
        InvalidArgumentError,
      );
    });

    it('lists items with the ETag and size head answers and when each was last written', async () => {
      const before = Date.now();
      await store.write('items/a', Buffer.from('one'));
      await store.write('items/b', Buffer.from('three'));
      await store.append('items/c', Buffer.from('x'));
      await store.write('other', Buffer.from('no'));
      const all: { key: string; etag: string; size: number; modifiedAt: Date }[] = [];
      let cursor: string | undefined;
      do {
        const page = await store.listItems({
          prefix: 'items/',
          limit: 2,
          ...(cursor === undefined ? {} : { cursor }),
        });
        expect(page.items.length).toBeLessThanOrEqual(2);
        all.push(...page.items);
        cursor = page.cursor ?? undefined;
      } while (cursor !== undefined);
      expect(all.map((item) => item.key)).toEqual(['items/a', 'items/b', 'items/c']);
      for (const item of all) {
        const head = await store.head(item.key);
        expect(item.etag).toBe(head?.etag);
        expect(item.size).toBe(head?.size);
        // The storage's clock, to the second: not before this test began (less a second of rounding).
        expect(item.modifiedAt.getTime()).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000 - 1000);
      }
      // A later write moves the time and the ETag; a conditional delete on the listed ETag then fails.
      const listedA = all[0]!;
      await new Promise((resolve) => setTimeout(resolve, 1100));
      await store.write('items/a', Buffer.from('one'));
      const [again] = (await store.listItems({ prefix: 'items/a', limit: 10 })).items;
      expect(again?.etag).not.toBe(listedA.etag);
      expect(again!.modifiedAt.getTime()).toBeGreaterThan(listedA.modifiedAt.getTime());
      await expect(store.delete('items/a', { ifMatch: listedA.etag })).rejects.toBeInstanceOf(
        PreconditionFailedError,
      );
      expect(await store.delete('items/a', { ifMatch: again!.etag })).toBe(true);
      expect((await store.listItems({ prefix: 'nothing', limit: 10 })).items).toEqual([]);
    });

    it('pages through 5001 keys without losing or repeating one', async () => {
      // This test's own store and prefix, bound now: should it time out, its writes still under way
      // can reach neither the next test's store (`store` is reassigned before each test) nor its keys.
      const own = store;
      const prefix = `many-${randomUUID().slice(0, 8)}/`;
      const keys = Array.from({ length: 5001 }, (_, i) => `${prefix}${String(i).padStart(5, '0')}`);
      await inParallelForThisTest(
        16,
        keys.map((key) => () => own.write(key, Buffer.alloc(0))),
      );
      const listed = await listAll(own, prefix, 1000);
      expect(listed).toHaveLength(5001);
      expect(listed).toEqual(keys);
      const full = await own.list({ prefix, limit: 5000 });
      expect(full.keys).toHaveLength(5000);
      expect(full.cursor).not.toBeNull();
    });

    it('keeps tenants apart', async () => {
      await store.write('shared/name', Buffer.from('a'));
      const other = factory.forTenant('tenant-b');
      expect(await other.read('shared/name')).toBeNull();
      expect(await listAll(other, '', 10)).toEqual([]);
      expect(await other.delete('shared/name')).toBe(false);
      await other.write('shared/name', Buffer.from('b'));
      expect((await store.read('shared/name'))?.value.toString()).toBe('a');
    });

    it("keeps a tenant's internal space apart from its key/value space and from other tenants'", async () => {
      const threads = factory.forSpace('threads', 'tenant-a');
      await store.write('t/name', Buffer.from('kv'));
      expect(await threads.read('t/name')).toBeNull();
      await threads.write('t/name', Buffer.from('space'));
      await threads.append('t/log', Buffer.from('line\n'));
      expect((await store.read('t/name'))?.value.toString()).toBe('kv');
      expect(await listAll(store, '', 10)).toEqual(['t/name']);
      expect(await listAll(threads, '', 10)).toEqual(['t/log', 't/name']);
      // Another instance's factory finds the same space; another tenant's space is empty.
      expect((await another().forSpace('threads', 'tenant-a').read('t/name'))?.value.toString()).toBe(
        'space',
      );
      const otherTenant = factory.forSpace('threads', 'tenant-b');
      expect(await listAll(otherTenant, '', 10)).toEqual([]);
      expect(await listAll(factory.forTenant('tenant-b'), '', 10)).toEqual([]);
      expect(await threads.delete('t/name')).toBe(true);
      expect((await store.read('t/name'))?.value.toString()).toBe('kv');
    });
  });
}
