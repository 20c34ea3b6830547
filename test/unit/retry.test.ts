import { describe, expect, it } from 'vitest';

import { CAS_BACKOFF, casDelayMs, LOST_RACE, retryCompareAndSwap } from '../../shared/retry';

describe('the compare-and-swap backoff', () => {
  it('waits nothing before the first attempt, then full jitter up to min(cap, base × 2^n)', () => {
    expect(casDelayMs(0, () => 0.99)).toBe(0);
    expect(casDelayMs(1, () => 0)).toBe(0);
    expect(casDelayMs(1, () => 0.5)).toBe(CAS_BACKOFF.baseMs);
    expect(casDelayMs(3, () => 0.5)).toBe(0.5 * CAS_BACKOFF.baseMs * 8);
    expect(casDelayMs(30, () => 0.5)).toBe(0.5 * CAS_BACKOFF.capMs);
    for (let attempt = 1; attempt < 40; attempt++) {
      expect(casDelayMs(attempt)).toBeLessThan(CAS_BACKOFF.capMs);
      expect(casDelayMs(attempt)).toBeGreaterThanOrEqual(0);
    }
  });
});

describe('retryCompareAndSwap', () => {
  it('tries again after a lost race and returns the first outcome that is not one', async () => {
    const seen: number[] = [];
    const outcome = await retryCompareAndSwap(5, async (attempt) => {
      seen.push(attempt);
      return attempt < 2 ? LOST_RACE : `won at ${attempt}`;
    });
    expect(outcome).toBe('won at 2');
    expect(seen).toEqual([0, 1, 2]);
  });

  it('gives up after the attempts given, returning LOST_RACE', async () => {
    let tries = 0;
    const outcome = await retryCompareAndSwap(3, async () => {
      tries++;
      return LOST_RACE;
    });
    expect(outcome).toBe(LOST_RACE);
    expect(tries).toBe(3);
  });

  it('ends at the first throw', async () => {
    let tries = 0;
    await expect(
      retryCompareAndSwap(4, async () => {
        tries++;
        throw new Error('storage down');
      }),
    ).rejects.toThrow('storage down');
    expect(tries).toBe(1);
  });
});
