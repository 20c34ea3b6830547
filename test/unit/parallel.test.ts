import { setImmediate as nextTurn } from 'node:timers/promises';

import { describe, expect, it } from 'vitest';

import { inParallelForThisTest } from '../support/parallel';

describe('tasks run in parallel for a test', () => {
  let started = 0;
  let release: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let first: Promise<void> | undefined;
  let left: Promise<unknown> | undefined;

  it('runs them at most `width` at once, in order of the list', async () => {
    const order: number[] = [];
    const results = await inParallelForThisTest(
      3,
      Array.from({ length: 10 }, (_, index) => async () => {
        order.push(index);
        await nextTurn();
        return index * 2;
      }),
    );
    expect(results).toEqual(Array.from({ length: 10 }, (_, index) => index * 2));
    expect(order).toEqual(Array.from({ length: 10 }, (_, index) => index));
  });

  it('(a test that ends while its tasks are under way, as one that times out)', async () => {
    let firstDone: () => void = () => undefined;
    first = new Promise<void>((resolve) => (firstDone = resolve));
    left = inParallelForThisTest(
      1,
      Array.from({ length: 100 }, () => async () => {
        started++;
        await gate;
        firstDone();
      }),
    ).catch((error: unknown) => error);
    await nextTurn();
    expect(started).toBe(1);
  });

  it('starts none of them once their test has ended', async () => {
    release();
    await first;
    for (let turn = 0; turn < 10; turn++) await nextTurn();
    expect(started).toBe(1);
    expect(await left).toBeInstanceOf(Error);
  });
});
