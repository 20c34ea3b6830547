import { randomBytes } from 'node:crypto';

import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import { addCounts, emptyCounts } from '../../shared/crypto/rewrap';
import { sealedKeyId } from '../../shared/crypto/sealedFormat';
import { MemoryFacts } from '../../shared/memory/memory';
import { memoryRewrapTarget } from '../../shared/memory/memoryRewrap';
import type { MemoryStore } from '../../shared/memory/memoryStore';
import { InvalidArgumentError } from '../../shared/protocol/errors';
import { tempDir } from '../support/cleanup';
import { type RecordingAudit, recordingAudit } from '../support/recordingAudit';
import { allRows, type MemoryStoreFixture, sealingCodec } from './memoryStore.contract';

/**
 * The vector part of the memory contract (docs/memory.md, "Vectors"), through the memory facts on
 * each store: vectors stored with facts, the tenant's dimension count, search by vector, by text and
 * both, and vectors going wherever their fact goes (forget, expiry, prune, rewrap, sealing).
 */

const A = { tenant: 'vec-tenant-a' };
const B = { tenant: 'vec-tenant-b' };

/** A unit vector at `degrees` in the plane of the first two axes of `dims` dimensions. */
function at(degrees: number, dims = 4): number[] {
  const radians = (degrees * Math.PI) / 180;
  const vector = new Array<number>(dims).fill(0);
  vector[0] = Math.cos(radians);
  vector[1] = Math.sin(radians);
  return vector;
}

async function invalid(promise: Promise<unknown>): Promise<string> {
  const error = await promise.then(
    () => null,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(InvalidArgumentError);
  return (error as InvalidArgumentError).field ?? '';
}

export function describeMemoryVectorContract(fixture: MemoryStoreFixture): void {
  describe(`memory vectors: ${fixture.name}`, () => {
    let store: MemoryStore;
    let another: () => MemoryStore;
    let destroy: () => Promise<void>;
    let raw: () => Promise<Buffer[]>;
    let clock: number;
    let memory: MemoryFacts;
    let codec: Awaited<ReturnType<typeof sealingCodec>> | undefined;
    let audit: RecordingAudit | undefined;
    const facts = (over: MemoryStore = store) =>
      new MemoryFacts({
        store: over,
        now: () => clock,
        ...(codec === undefined ? {} : { codec }),
        ...(audit === undefined ? {} : { audit: audit.log }),
      });

    beforeEach(async () => {
      ({ store, another, destroy, raw } = await fixture.create());
      clock = Date.UTC(2026, 0, 1);
      if (fixture.sealed === true) {
        codec = await sealingCodec([{ id: 'k1', key: randomBytes(32) }]);
        audit = recordingAudit();
      }
      memory = facts();
    });
    afterEach(async () => destroy());

    it('stores vectors with a fact and ranks a vector search by cosine, closest first, scores in [0, 1]', async () => {
      const put = async (namespace: string, key: string, value: unknown, vectors?: unknown) => {
        clock += 10;
        return memory.remember(A, namespace, key, value, vectors === undefined ? {} : { vectors });
      };
      const first = await put('users/42', 'veg', { text: 'vegetarian', kind: 'diet' }, { text: at(10) });
      expect(first.item.vectorFields).toEqual(['text']);
      await put('users/42', 'lang', { text: 'speaks French', kind: 'lang' }, { text: at(80), $: at(60) });
      await put('users/42/deep', 'far', { text: 'far away', kind: 'diet' }, { text: at(170) });
      await put('users/42', 'plain', { text: 'no vector', kind: 'diet' });
      await put('usersX', 'other', { text: 'elsewhere' }, { text: at(0) });

      expect((await memory.recall(A, 'users/42', 'lang'))?.vectorFields).toEqual(['text', '$']);
      const { items } = await memory.search(A, { namespace: 'users', vector: at(0) });
      expect(items.map((item) => item.key)).toEqual(['veg', 'lang', 'far', 'plain']);
      // lang's closest field is "$" at 60 degrees; facts without vectors come last, without score.
      expect(items[0]?.score).toBeCloseTo((1 + Math.cos(Math.PI / 18)) / 2, 5);
      expect(items[1]?.score).toBeCloseTo((1 + Math.cos(Math.PI / 3)) / 2, 5);
      expect(items[2]?.score).toBeCloseTo((1 + Math.cos((17 * Math.PI) / 18)) / 2, 5);
      expect(items[3]?.score).toBeUndefined();
      for (const item of items.slice(0, 3)) {
        expect(item.score).toBeGreaterThanOrEqual(0);
        expect(item.score).toBeLessThanOrEqual(1);
      }
      // Filter before offset and limit.
      const diet = await memory.search(A, {
        namespace: 'users',
        vector: at(0),
        filter: { kind: 'diet' },
        offset: 1,
        limit: 1,
      });
      expect(diet.items.map((item) => item.key)).toEqual(['far']);
      // Another tenant sees none of it.
      expect((await memory.search(B, { namespace: '', vector: at(0) })).items).toEqual([]);
      // Another instance sees every write and forget made before its search started.
      const other = facts(another());
      await memory.forget(A, 'users/42', 'veg');
      await put('users/42', 'new', { text: 'new one' }, { text: at(1) });
      expect(
        (await other.search(A, { namespace: 'users', vector: at(0), limit: 2 })).items.map((i) => i.key),
      ).toEqual(['new', 'lang']);
    });

    it('takes a vector as base64 of float32 little-endian, stored as the same numbers; refuses bad base64 with 400 naming the field', async () => {
      const base64 = (numbers: number[]) => Buffer.from(new Float32Array(numbers).buffer).toString('base64');
      await memory.remember(A, 'b64', 'array', 'array', { vectors: { $: [1, 0.25, -0.5] } });
      await memory.remember(A, 'b64', 'packed', 'packed', { vectors: { $: base64([1, 0.25, -0.5]) } });
      await memory.remember(A, 'b64', 'away', 'away', { vectors: { $: base64([-1, 0, 0]) } });
      const found = await memory.search(A, { namespace: 'b64', vector: base64([1, 0.25, -0.5]), limit: 3 });
      expect(
        found.items
          .slice(0, 2)
          .map((item) => item.key)
          .sort(),
      ).toEqual(['array', 'packed']);
      expect(found.items[0]?.score).toBeCloseTo(1, 5);
      expect(found.items[1]?.score).toBeCloseTo(1, 5);
      expect(found.items[2]?.key).toBe('away');
      // Not base64, not a whole number of float32s, a NaN: 400 naming the field, nothing written.
      const infinity = Buffer.alloc(12);
      infinity.writeFloatLE(Infinity, 4);
      for (const bad of [
        'not base64!',
        Buffer.from([1, 2, 3, 4, 5, 6]).toString('base64'),
        infinity.toString('base64'),
        '',
      ]) {
        expect(await invalid(memory.remember(A, 'b64', 'bad', 'bad', { vectors: { $: bad } }))).toBe(
          'vectors.$',
        );
      }
      expect(await memory.recall(A, 'b64', 'bad')).toBeNull();
      expect(await invalid(memory.search(A, { namespace: 'b64', vector: 'AAAA=' }))).toBe('vector');
    });

    it('offers dot product and L2 distance, with their scores in [0, 1]', async () => {
      await memory.remember(A, 'd', 'long', 'long', { vectors: { $: [3, 0] } });
      await memory.remember(A, 'd', 'near', 'near', { vectors: { $: [1, 0.1] } });
      await memory.remember(A, 'd', 'away', 'away', { vectors: { $: [-1, 0] } });
      const dot = await memory.search(A, { namespace: 'd', vector: [1, 0], distance: 'dot' });
      expect(dot.items.map((item) => item.key)).toEqual(['long', 'near', 'away']);
      expect(dot.items[0]?.score).toBeCloseTo(1 / (1 + Math.exp(-3)), 5);
      const l2 = await memory.search(A, { namespace: 'd', vector: [1, 0], distance: 'l2' });
      expect(l2.items.map((item) => item.key)).toEqual(['near', 'away', 'long']);
      expect(l2.items[1]?.score).toBeCloseTo(1 / 3, 5);
      expect(l2.items[2]?.score).toBeCloseTo(1 / 3, 5);
      expect(await invalid(memory.search(A, { namespace: 'd', vector: [1, 0], distance: 'hamming' }))).toBe(
        'distance',
      );
    });

    it('fuses a search by text and vector by reciprocal rank fusion', async () => {
      // By vector: a, b, c (d has none). By text "tea": d, c (a and b lack the word).
      await memory.remember(A, 'h', 'a', 'coffee beans', { vectors: { $: at(0) } });
      clock += 10;
      await memory.remember(A, 'h', 'b', 'espresso', { vectors: { $: at(30) } });
      clock += 10;
      await memory.remember(A, 'h', 'c', 'tea leaves and more words here', { vectors: { $: at(60) } });
      clock += 10;
      await memory.remember(A, 'h', 'd', 'tea');
      clock += 10;
      await memory.remember(A, 'h', 'e', 'nothing matches');
      const { items } = await memory.search(A, { namespace: 'h', vector: at(0), text: 'tea' });
      // c: 1/63 + 1/62; a: 1/61; d: 1/61 (d is newer: first of the tie); b: 1/62.
      expect(items.map((item) => item.key)).toEqual(['c', 'd', 'a', 'b']);
      const best = 2 / 61;
      expect(items[0]?.score).toBeCloseTo((1 / 63 + 1 / 62) / best, 10);
      expect(items[3]?.score).toBeCloseTo(1 / 62 / best, 10);
    });

    it('fixes the dimension count with the first vector, for every instance; refuses others with 400 naming the field, writing nothing', async () => {
      await memory.remember(A, 'n', 'first', 1, { vectors: { $: [1, 2, 3] } });
      const other = facts(another());
      expect(await invalid(other.remember(A, 'n', 'k', 1, { vectors: { text: [1, 2] } }))).toBe(
        'vectors.text',
      );
      expect(await invalid(memory.search(A, { namespace: '', vector: [1, 2] }))).toBe('vector');
      expect(await invalid(memory.remember(A, 'n', 'k', 1, { vectors: { a: [1, 2, 3], b: [1, 2] } }))).toBe(
        'vectors.b',
      );
      // Another tenant has an index of its own.
      await memory.remember(B, 'n', 'k', 1, { vectors: { $: [1, 2] } });
      const bad: [unknown, string][] = [
        [[1, 2, 3], 'vectors'],
        [{ $: [] }, 'vectors.$'],
        [{ $: [1, 'x', 3] }, 'vectors.$'],
        [{ $: [1, Number.NaN, 3] }, 'vectors.$'],
        [{ $: [1, 1e39, 3] }, 'vectors.$'],
        [{ $: new Array(4097).fill(0) }, 'vectors.$'],
        [{ '': [1, 2, 3] }, 'vectors.'],
        [Object.fromEntries(Array.from({ length: 9 }, (_, i) => [`f${i}`, [1, 2, 3]])), 'vectors'],
      ];
      for (const [vectors, field] of bad) {
        expect(await invalid(memory.remember(A, 'n', 'bad', 1, { vectors })), JSON.stringify(field)).toBe(
          field,
        );
      }
      expect(await invalid(memory.search(A, { namespace: '', vector: 'x' }))).toBe('vector');
      expect(await memory.recall(A, 'n', 'k')).toBeNull();
      expect(await memory.recall(A, 'n', 'bad')).toBeNull();
    });

    it('stores 8 vectors of 4,096 dimensions with a 32 KiB value, and drops vectors a later write leaves out', async () => {
      const vectors = Object.fromEntries(
        Array.from({ length: 8 }, (_, f) => [
          `f${f}`,
          Array.from({ length: 4096 }, (_, i) => ((i * 7 + f) % 13) - 6),
        ]),
      );
      const value = { text: 'x'.repeat(32 * 1024 - 20) };
      await memory.remember(A, 'big', 'k', value, { vectors });
      const found = await memory.search(A, { namespace: 'big', vector: vectors['f3'] });
      expect(found.items[0]?.score).toBeCloseTo(1, 6);
      expect(found.items[0]?.value).toEqual(value);
      expect(found.items[0]?.vectorFields).toHaveLength(8);
      await memory.remember(A, 'big', 'k', 'plain now');
      const after = await memory.search(A, { namespace: 'big', vector: vectors['f3'] });
      expect(after.items.map((item) => [item.value, item.score, item.vectorFields])).toEqual([
        ['plain now', undefined, undefined],
      ]);
    });

    it('forgets, expires and prunes vectors with their fact', async () => {
      await memory.remember(A, 'e', 'short', 1, { ttl: 1, vectors: { $: at(0) } });
      await memory.remember(A, 'e', 'gone', 2, { vectors: { $: at(0) } });
      await memory.remember(A, 'e', 'stays', 3, { vectors: { $: at(90) } });
      await memory.forget(A, 'e', 'gone');
      clock += 2000;
      expect((await memory.search(A, { namespace: 'e', vector: at(0) })).items.map((i) => i.key)).toEqual([
        'stays',
      ]);
      expect(await memory.pruneExpired(A.tenant, 10)).toEqual({ deleted: 1, more: false });
      expect((await allRows(store, A.tenant)).map((row) => row.key)).toEqual(['stays']);
      await memory.forgetAll(A, 'e');
      expect((await memory.search(A, { namespace: '', vector: at(0) })).items).toEqual([]);
    });

    if (fixture.sealed === true) {
      it('seals vectors with the value; the audit trail records the write, never the vector', async () => {
        // A vector whose float32 bytes are a recognisable pattern.
        const vector = Array.from({ length: 64 }, (_, i) => 1000 + i);
        const pattern = Buffer.alloc(64 * 4);
        vector.forEach((number, i) => pattern.writeFloatLE(number, i * 4));
        await memory.remember(A, 's', 'k', 'v', { vectors: { $: vector } });
        for (const bytes of await raw()) expect(bytes.includes(pattern.subarray(0, 16))).toBe(false);
        for (const row of await allRows(store, A.tenant)) expect(sealedKeyId(row.value)).toBe('k1');
        expect(audit?.committed.map((event) => event.action)).toContain('memory.written');
        expect(JSON.stringify(audit?.committed)).not.toContain('1001');
      });

      it('is re-sealed by rewrap with its vectors', async () => {
        const kvDir = tempDir('memory-vector-keys');
        const k1 = { id: 'k1', key: randomBytes(32) };
        const k2 = { id: 'k2', key: randomBytes(32) };
        const before = new MemoryFacts({ store, now: () => clock, codec: await sealingCodec([k1], kvDir) });
        await before.remember(A, 'r', 'a', 'a', { vectors: { $: at(0) } });
        await before.remember(A, 'r', 'b', 'b', { vectors: { $: at(90) } });
        const rotated = await sealingCodec([k2, k1], kvDir);
        const total = emptyCounts();
        addCounts(total, await memoryRewrapTarget(store, rotated).rewrapPage(A.tenant, null, 100));
        expect(total.resealed).toBe(2);
        const onlyK2 = new MemoryFacts({ store, now: () => clock, codec: await sealingCodec([k2], kvDir) });
        const { items } = await onlyK2.search(A, { namespace: 'r', vector: at(80) });
        expect(items.map((item) => item.key)).toEqual(['b', 'a']);
      });
    }
  });
}
