import { randomBytes } from 'node:crypto';

import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import { ConflictError, InvalidArgumentError, PayloadTooLargeError } from '../../shared/protocol/errors';
import {
  type ImmutableObjectStore,
  MAX_OBJECT_BYTES,
  ObjectExistsError,
  type ObjectInfo,
  type RewritableObjectStore,
} from '../../shared/storage/immutableObjectStore';

/**
 * The immutable object contract (archive blocks, tails, manifests and the `latest` pointer), as
 * obligations every implementation must meet. Run against each implementation with a fixture that
 * makes a fresh, uniquely named store per test.
 */
export interface ImmutableObjectStoreFixture {
  readonly name: string;
  /** A fresh, empty store whose list pages hold at most 3 objects (continuations are exercised). */
  create(): Promise<{ store: ImmutableObjectStore; destroy: () => Promise<void> }>;
}

/** Every listed object's key and size (`storedAt` has tests of its own). */
export async function listAll(
  store: ImmutableObjectStore,
  prefix: string,
): Promise<Omit<ObjectInfo, 'storedAt'>[]> {
  const items: Omit<ObjectInfo, 'storedAt'>[] = [];
  for await (const { key, size } of store.list(prefix)) items.push({ key, size });
  return items;
}

async function listWithTimes(store: ImmutableObjectStore, prefix: string): Promise<ObjectInfo[]> {
  const items: ObjectInfo[] = [];
  for await (const item of store.list(prefix)) items.push(item);
  return items;
}

/** Blob storage keeps times to the second: allow that much either side of the local clock. */
const CLOCK_SLACK_MS = 2000;

const byteOrder = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));

export function describeImmutableObjectStoreContract(fixture: ImmutableObjectStoreFixture): void {
  describe(`ImmutableObjectStore contract: ${fixture.name}`, () => {
    let store: ImmutableObjectStore;
    let destroy: () => Promise<void>;

    beforeEach(async () => {
      ({ store, destroy } = await fixture.create());
    });
    afterEach(async () => destroy());

    it('reports absent objects and pointers as null and an empty listing, never as an error', async () => {
      expect(await store.get('s1/blocks/g1/0')).toBeNull();
      expect(await store.head('s1/blocks/g1/0')).toBeNull();
      expect(await store.readPointer('s1/latest')).toBeNull();
      expect(await listAll(store, 's1/')).toEqual([]);
    });

    it.each([0, 1, 65_535, 65_536, 65_537, MAX_OBJECT_BYTES])(
      'stores and reads back %i bytes exactly, with its size in head and list',
      async (size) => {
        const bytes = randomBytes(size);
        const key = `sizes/${size}`;
        expect(await store.put(key, bytes)).toEqual({ created: true });
        expect((await store.get(key))?.equals(bytes)).toBe(true);
        expect(await store.head(key)).toMatchObject({ key, size });
        expect(await listAll(store, 'sizes/')).toEqual([{ key, size }]);
      },
    );

    it('stores objects whose key has a segment over 255 bytes and lists them in key order', async () => {
      const long = `s/${'g'.repeat(400)}`;
      const keys = [`${long}/0`, `${long}/1`, 's/a', 's/h'];
      for (const key of keys) await store.put(key, Buffer.from(key));
      for (const key of keys) expect((await store.get(key))?.toString()).toBe(key);
      expect((await listAll(store, 's/')).map((item) => item.key)).toEqual([...keys].sort(byteOrder));
      expect(await listAll(store, `${long}/`)).toEqual([
        { key: `${long}/0`, size: Buffer.byteLength(`${long}/0`) },
        { key: `${long}/1`, size: Buffer.byteLength(`${long}/1`) },
      ]);
      expect(await store.put(`${long}/0`, Buffer.from(`${long}/0`))).toEqual({ created: false });
    });

    it('refuses an object of 2,097,153 bytes before writing anything', async () => {
      const error = await store.put('sizes/big', Buffer.alloc(MAX_OBJECT_BYTES + 1)).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(PayloadTooLargeError);
      expect(await store.get('sizes/big')).toBeNull();
      expect(await listAll(store, '')).toEqual([]);
    });

    it('never overwrites: the same bytes again succeed as a retry, other bytes are refused and stay', async () => {
      const first = Buffer.from('first bytes');
      expect(await store.put('s1/checkpoints/c1', first)).toEqual({ created: true });
      expect(await store.put('s1/checkpoints/c1', Buffer.from(first))).toEqual({ created: false });
      const error = await store.put('s1/checkpoints/c1', Buffer.from('other bytes')).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ObjectExistsError);
      expect(error).toBeInstanceOf(ConflictError);
      expect((await store.get('s1/checkpoints/c1'))?.equals(first)).toBe(true);
      // An empty object is an object too: other bytes do not replace it.
      await store.put('s1/empty', Buffer.alloc(0));
      await expect(store.put('s1/empty', Buffer.from('x'))).rejects.toBeInstanceOf(ObjectExistsError);
      expect((await store.get('s1/empty'))?.length).toBe(0);
    });

    it('10 concurrent writers of the same bytes all succeed and one object is stored', async () => {
      const bytes = randomBytes(65_536);
      const results = await Promise.all(Array.from({ length: 10 }, () => store.put('s1/blocks/g/0', bytes)));
      expect(results.filter((result) => result.created)).toHaveLength(1);
      expect((await store.get('s1/blocks/g/0'))?.equals(bytes)).toBe(true);
      expect(await listAll(store, 's1/blocks/')).toEqual([{ key: 's1/blocks/g/0', size: 65_536 }]);
    });

    it('10 concurrent writers of different bytes: exactly one wins, the others are told', async () => {
      const candidates = Array.from({ length: 10 }, () => randomBytes(65_536));
      const outcomes = await Promise.allSettled(candidates.map((bytes) => store.put('s1/blocks/g/1', bytes)));
      const winners = outcomes.flatMap((outcome, index) => (outcome.status === 'fulfilled' ? [index] : []));
      expect(winners).toHaveLength(1);
      for (const outcome of outcomes) {
        if (outcome.status === 'rejected') expect(outcome.reason).toBeInstanceOf(ObjectExistsError);
      }
      const stored = await store.get('s1/blocks/g/1');
      expect(stored?.equals(candidates[winners[0] ?? -1] ?? Buffer.alloc(0))).toBe(true);
    });

    it('validates keys and prefixes before any I/O', async () => {
      for (const key of [
        '',
        '/a',
        'a/',
        'a//b',
        '../x',
        'a/../b',
        'a/./b',
        'a\\b',
        'a\u0000b',
        'x'.repeat(1025),
      ]) {
        await expect(store.put(key, Buffer.from('x')), JSON.stringify(key)).rejects.toBeInstanceOf(
          InvalidArgumentError,
        );
        await expect(store.get(key), JSON.stringify(key)).rejects.toBeInstanceOf(InvalidArgumentError);
      }
      await expect(listAll(store, '../')).rejects.toBeInstanceOf(InvalidArgumentError);
      await expect(store.swapPointer('../latest', null, 'c1')).rejects.toBeInstanceOf(InvalidArgumentError);
      expect(await listAll(store, '')).toEqual([]);
    });

    it('lists by plain prefix, ascending by key, with sizes, across pages', async () => {
      // No key is another's folder: the local backend refuses that (the archive layout never needs it).
      const keys = ['a/b/c', 'a/bc', 'a/b-c', 'a/a/z', 'b/1', 'a/b/d/e', 'ab', 'a/b/d-'];
      for (const [index, key] of keys.entries()) await store.put(key, Buffer.alloc(index));
      const sizeOf = (key: string) => keys.indexOf(key);
      const expected = (prefix: string) =>
        keys
          .filter((key) => key.startsWith(prefix))
          .sort(byteOrder)
          .map((key) => ({ key, size: sizeOf(key) }));
      for (const prefix of ['', 'a', 'a/', 'a/b', 'a/b/', 'a/b/d/', 'b/', 'c/']) {
        expect(await listAll(store, prefix), prefix).toEqual(expected(prefix));
      }
    });

    it('lists 300 objects of one folder completely, page after page', async () => {
      const keys = Array.from({ length: 300 }, (_, index) => `s1/blocks/g1/${index}`);
      for (let start = 0; start < keys.length; start += 50) {
        await Promise.all(keys.slice(start, start + 50).map((key) => store.put(key, Buffer.from(key))));
      }
      const listed = await listAll(store, 's1/blocks/g1/');
      expect(listed.map((item) => item.key)).toEqual([...keys].sort(byteOrder));
      expect(listed.every((item) => item.size === Buffer.byteLength(item.key))).toBe(true);
    });

    it('tells when each object was stored, in head and list', async () => {
      const before = Date.now();
      await store.put('times/a', Buffer.from('a'));
      const after = Date.now();
      const head = await store.head('times/a');
      const [listed] = await listWithTimes(store, 'times/');
      for (const storedAt of [head?.storedAt, listed?.storedAt]) {
        expect(storedAt).toBeInstanceOf(Date);
        expect(storedAt?.getTime()).toBeGreaterThanOrEqual(before - CLOCK_SLACK_MS);
        expect(storedAt?.getTime()).toBeLessThanOrEqual(after + CLOCK_SLACK_MS);
      }
      // A retry of the same bytes does not make the object younger.
      await store.put('times/a', Buffer.from('a'));
      expect((await store.head('times/a'))?.storedAt.getTime()).toBe(head?.storedAt.getTime());
    });

    it('deletes idempotently: true once, then false; the key is free again afterwards', async () => {
      expect(await store.delete('gone/never')).toBe(false);
      await store.put('gone/a/b', Buffer.from('first'));
      await store.put('gone/a/c', Buffer.from('stays'));
      expect(await store.delete('gone/a/b')).toBe(true);
      expect(await store.delete('gone/a/b')).toBe(false);
      expect(await store.get('gone/a/b')).toBeNull();
      expect(await store.head('gone/a/b')).toBeNull();
      expect(await listAll(store, 'gone/')).toEqual([{ key: 'gone/a/c', size: 5 }]);
      expect(await store.put('gone/a/b', Buffer.from('other bytes'))).toEqual({ created: true });
      expect((await store.get('gone/a/b'))?.toString()).toBe('other bytes');
      // The last object of a folder: nothing is left to list, and the folder's name is free for a key.
      expect(await store.delete('gone/a/b')).toBe(true);
      expect(await store.delete('gone/a/c')).toBe(true);
      expect(await listAll(store, 'gone/')).toEqual([]);
      expect(await store.put('gone/a', Buffer.from('a key now'))).toEqual({ created: true });
    });

    it('deletes with storedBefore only an object stored before that instant', async () => {
      await store.put('young/x', Buffer.from('x'));
      expect(await store.delete('young/x', { storedBefore: new Date(Date.now() - 60 * 60 * 1000) })).toBe(
        false,
      );
      expect((await store.get('young/x'))?.toString()).toBe('x');
      expect(await store.delete('young/x', { storedBefore: new Date(Date.now() + 60 * 1000) })).toBe(true);
      expect(await store.get('young/x')).toBeNull();
      expect(await store.delete('young/x', { storedBefore: new Date(Date.now() + 60 * 1000) })).toBe(false);
    });

    it('touch of an absent or deleted object answers null and stores nothing', async () => {
      expect(await store.touch('touched/never')).toBeNull();
      await store.put('touched/gone', Buffer.from('x'));
      expect(await store.delete('touched/gone')).toBe(true);
      expect(await store.touch('touched/gone')).toBeNull();
      expect(await store.get('touched/gone')).toBeNull();
      expect(await listAll(store, 'touched/')).toEqual([]);
    });

    it('touch makes storedAt now, bytes and size unchanged: a delete with storedBefore before the touch leaves it', async () => {
      const bytes = randomBytes(65_536);
      await store.put('touched/a', bytes);
      await store.put('touched/b', bytes);
      const stored = (await store.head('touched/a'))?.storedAt.getTime() ?? NaN;
      // Blob storage keeps times to the second: the touch comes more than a second after the put,
      // and the cutoff lies between them (sent to the second, it is still after the put's time).
      const cutoff = new Date(stored + 1500);
      while (Date.now() < stored + 2050) await new Promise((resolve) => setTimeout(resolve, 50));
      const before = Date.now();
      const touched = await store.touch('touched/a');
      expect(touched).toMatchObject({ key: 'touched/a', size: 65_536 });
      expect(touched?.storedAt.getTime()).toBeGreaterThanOrEqual(before - CLOCK_SLACK_MS);
      expect(touched?.storedAt.getTime()).toBeGreaterThan(cutoff.getTime());
      expect((await store.head('touched/a'))?.storedAt.getTime()).toBe(touched?.storedAt.getTime());
      // The untouched twin, stored at the same time, goes; the touched one stays, whole.
      expect(await store.delete('touched/b', { storedBefore: cutoff })).toBe(true);
      expect(await store.delete('touched/a', { storedBefore: cutoff })).toBe(false);
      expect((await store.get('touched/a'))?.equals(bytes)).toBe(true);
      expect(await listAll(store, 'touched/')).toEqual([{ key: 'touched/a', size: 65_536 }]);
      // A put of the same bytes is still a retry, not a new object.
      expect(await store.put('touched/a', bytes)).toEqual({ created: false });
    });

    it('a touch racing a delete never brings the object back', async () => {
      for (let round = 0; round < 5; round++) {
        const key = `touched/race-${round}`;
        await store.put(key, Buffer.from(key));
        const [touched, deleted] = await Promise.all([
          store.touch(key),
          store.delete(key, { storedBefore: new Date(Date.now() + 60 * 60 * 1000) }),
        ]);
        if (deleted) expect(await store.get(key)).toBeNull();
        else expect(touched).not.toBeNull();
        if (touched === null) expect(deleted).toBe(true);
      }
    });

    it('of 10 concurrent deletes of one object exactly one reports it deleted', async () => {
      await store.put('race/x', Buffer.from('x'));
      const results = await Promise.all(Array.from({ length: 10 }, () => store.delete('race/x')));
      expect(results.filter(Boolean)).toHaveLength(1);
      expect(await store.get('race/x')).toBeNull();
    });

    it('validates the key of a delete before any I/O', async () => {
      for (const key of ['', '../x', 'a//b', 'a\\b']) {
        await expect(store.delete(key), JSON.stringify(key)).rejects.toBeInstanceOf(InvalidArgumentError);
      }
    });

    it('removes a pointer only from the expected value; the loser is told; a first value may follow', async () => {
      expect(await store.swapPointer('w/latest', null, null)).toEqual({ swapped: true });
      await store.swapPointer('w/latest', null, 'c1');
      expect(await store.swapPointer('w/latest', 'c0', null)).toEqual({ swapped: false, current: 'c1' });
      expect(await store.readPointer('w/latest')).toBe('c1');
      expect(await store.swapPointer('w/latest', 'c1', null)).toEqual({ swapped: true });
      expect(await store.readPointer('w/latest')).toBeNull();
      expect(await store.swapPointer('w/latest', 'c1', null)).toEqual({ swapped: false, current: null });
      expect(await store.swapPointer('w/latest', null, 'c2')).toEqual({ swapped: true });
      expect(await store.readPointer('w/latest')).toBe('c2');
      // delete removes a pointer too.
      expect(await store.delete('w/latest')).toBe(true);
      expect(await store.readPointer('w/latest')).toBeNull();
    });

    it('of 10 concurrent removals and moves from one value exactly one wins', async () => {
      await store.swapPointer('w2/latest', null, 'c1');
      const results = await Promise.all(
        Array.from({ length: 10 }, (_, index) =>
          store.swapPointer('w2/latest', 'c1', index % 2 === 0 ? null : `n${index}`),
        ),
      );
      const winners = results.flatMap((result, index) => (result.swapped ? [index] : []));
      expect(winners).toHaveLength(1);
      const winner = winners[0] ?? -1;
      const expected = winner % 2 === 0 ? null : `n${winner}`;
      expect(await store.readPointer('w2/latest')).toBe(expected);
      for (const result of results) if (!result.swapped) expect(result.current).toBe(expected);
    });

    it('moves a pointer only from the expected value and tells the loser where it is', async () => {
      expect(await store.swapPointer('s1/latest', 'c0', 'c1')).toEqual({ swapped: false, current: null });
      expect(await store.swapPointer('s1/latest', null, 'c1')).toEqual({ swapped: true });
      expect(await store.swapPointer('s1/latest', null, 'c2')).toEqual({ swapped: false, current: 'c1' });
      expect(await store.swapPointer('s1/latest', 'c1', 'c2')).toEqual({ swapped: true });
      expect(await store.swapPointer('s1/latest', 'c1', 'c3')).toEqual({ swapped: false, current: 'c2' });
      expect(await store.readPointer('s1/latest')).toBe('c2');
      await expect(store.swapPointer('s1/latest', 'c2', 'two\nlines')).rejects.toBeInstanceOf(
        InvalidArgumentError,
      );
      expect(await store.readPointer('s1/latest')).toBe('c2');
    });

    it('of 10 concurrent moves from the same value exactly one wins, also for the first value', async () => {
      for (const [expected, pointer] of [
        [null, 's2/latest'],
        ['c1', 's1/latest'],
      ] as const) {
        if (expected !== null) await store.swapPointer(pointer, null, expected);
        const results = await Promise.all(
          Array.from({ length: 10 }, (_, index) => store.swapPointer(pointer, expected, `n${index}`)),
        );
        const winners = results.flatMap((result, index) => (result.swapped ? [`n${index}`] : []));
        expect(winners, pointer).toHaveLength(1);
        for (const result of results) {
          if (!result.swapped) expect(result.current).toBe(winners[0]);
        }
        expect(await store.readPointer(pointer)).toBe(winners[0]);
      }
    });
  });
}

export interface RewritableObjectStoreFixture {
  readonly name: string;
  create(): Promise<{ store: RewritableObjectStore; destroy: () => Promise<void> }>;
}

/**
 * `rewrite`, the one exception to "never overwrite" (the rewrap job re-seals objects in place):
 * conditional on the bytes read, a delete always wins, `storedAt` never moves back.
 */
export function describeRewritableObjectStoreContract(fixture: RewritableObjectStoreFixture): void {
  describe(`RewritableObjectStore contract: ${fixture.name}`, () => {
    let store: RewritableObjectStore;
    let destroy: () => Promise<void>;

    beforeEach(async () => {
      ({ store, destroy } = await fixture.create());
    });
    afterEach(async () => destroy());

    it('replaces the bytes it transformed, leaves them when told to, and finds nothing to do when absent', async () => {
      await store.put('r/a', Buffer.from('first'));
      const stored = await store.head('r/a');
      const seen: string[] = [];
      expect(
        await store.rewrite('r/a', (bytes) => {
          seen.push(bytes.toString());
          return Buffer.from('FIRST');
        }),
      ).toBe('replaced');
      expect(seen).toEqual(['first']);
      expect((await store.get('r/a'))?.toString()).toBe('FIRST');
      expect((await store.head('r/a'))?.storedAt.getTime()).toBeGreaterThanOrEqual(
        stored?.storedAt.getTime() ?? Infinity,
      );
      expect(await store.rewrite('r/a', () => null)).toBe('kept');
      expect((await store.get('r/a'))?.toString()).toBe('FIRST');
      let called = false;
      expect(
        await store.rewrite('r/never', () => {
          called = true;
          return Buffer.from('x');
        }),
      ).toBe('absent');
      expect(called).toBe(false);
      expect(await store.get('r/never')).toBeNull();
    });

    it('never writes back an object deleted meanwhile: the delete wins', async () => {
      for (let round = 0; round < 3; round++) {
        const key = `r/gone-${round}`;
        await store.put(key, Buffer.from('doomed'));
        let deleting: Promise<boolean> | undefined;
        const rewritten = await store.rewrite(key, (bytes) => {
          // The delete is sent while the rewrite holds the bytes it read.
          deleting ??= store.delete(key);
          return Buffer.concat([bytes, Buffer.from('!')]);
        });
        expect(await deleting).toBe(true);
        // Replaced before the delete landed, or found absent on its next attempt: never written back.
        expect(['replaced', 'absent']).toContain(rewritten);
        expect(await store.get(key)).toBeNull();
      }
      expect(await listAll(store, 'r/')).toEqual([]);
    });

    it('4 concurrent rewrites each transform the bytes the one before left: none is lost', async () => {
      await store.put('r/count', Buffer.from(''));
      const results = await Promise.all(
        Array.from({ length: 4 }, (_, index) =>
          store.rewrite('r/count', (bytes) => Buffer.concat([bytes, Buffer.from(String(index))])),
        ),
      );
      expect(results).toEqual(['replaced', 'replaced', 'replaced', 'replaced']);
      const final = (await store.get('r/count'))?.toString() ?? '';
      expect([...final].sort().join('')).toBe('0123');
    });
  });
}
