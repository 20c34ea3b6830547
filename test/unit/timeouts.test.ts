import { describe, expect, it } from 'vitest';

import { timeoutScale } from '../support/timeouts';

describe('test timeouts', () => {
  it('are longer on a machine of few cores, never shorter than on a large one', () => {
    expect(timeoutScale({}, 2)).toBe(3);
    expect(timeoutScale({}, 1)).toBe(6);
    expect(timeoutScale({}, 6)).toBe(1);
    expect(timeoutScale({}, 32)).toBe(1);
  });

  it('take CAIRN_TEST_TIMEOUT_SCALE when set, and refuse a factor that would shorten them', () => {
    expect(timeoutScale({ CAIRN_TEST_TIMEOUT_SCALE: '5' }, 32)).toBe(5);
    for (const bad of ['0.5', '0', '-1', 'fast', 'Infinity']) {
      expect(() => timeoutScale({ CAIRN_TEST_TIMEOUT_SCALE: bad }, 2)).toThrow(/CAIRN_TEST_TIMEOUT_SCALE/);
    }
  });

  it('scale the vitest default: a test may take longer than a minute on two cores', async () => {
    const config = (await import('../../vitest.config')).default as {
      test: { testTimeout: number; hookTimeout: number };
    };
    expect(config.test.testTimeout).toBe(Math.ceil(60_000 * timeoutScale()));
    expect(config.test.hookTimeout).toBe(config.test.testTimeout);
    expect(timeoutScale({}, 2) * 60_000).toBeGreaterThan(60_000);
  });
});
