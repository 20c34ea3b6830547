import { describe, expect, it } from 'vitest';

import { interleave } from '../bench/measure';

/**
 * The bench's interleaving (test/bench/measure.ts): both ways get the same indexes, call by call,
 * in alternating order, and the warm-up is not counted.
 */

describe('bench interleave', () => {
  it('calls both ways with the same indexes, alternating which goes first, after an uncounted warm-up', async () => {
    const calls: string[] = [];
    const way = (name: string) => (_worker: number, index: number) => {
      calls.push(`${name}${index}`);
      return Promise.resolve();
    };
    const [a, b] = await interleave(way('a'), way('b'), { count: 4, concurrency: 1, warmUp: 2 });
    expect(calls).toEqual(['a0', 'b0', 'b1', 'a1', 'a2', 'b2', 'b3', 'a3', 'a4', 'b4', 'b5', 'a5']);
    expect(Number.isFinite(a.p95Ms) && Number.isFinite(b.p95Ms)).toBe(true);
  });

  it('gives every worker whole pairs: each index is called once each way', async () => {
    const seen = { a: [] as number[], b: [] as number[] };
    const way = (name: 'a' | 'b') => async (_worker: number, index: number) => {
      seen[name].push(index);
      await new Promise((resolve) => setImmediate(resolve));
    };
    await interleave(way('a'), way('b'), { count: 40, concurrency: 8, warmUp: 8 });
    const expected = Array.from({ length: 48 }, (_, index) => index);
    expect([...seen.a].sort((x, y) => x - y)).toEqual(expected);
    expect([...seen.b].sort((x, y) => x - y)).toEqual(expected);
  });
});
