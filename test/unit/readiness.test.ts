import { describe, expect, it } from 'vitest';

import { Readiness, type ReadinessProbe } from '../../shared/readiness';

const answers: ReadinessProbe = { name: 'backend', check: () => Promise.resolve() };

describe('Readiness', () => {
  it('is ready when every probe answers', async () => {
    const readiness = new Readiness([answers, { name: 'memory', check: () => Promise.resolve() }], 1000);
    await expect(readiness.check()).resolves.toEqual({
      ready: true,
      checks: { backend: 'ok', memory: 'ok' },
    });
  });

  it('names a probe that fails and one that never answers (even one that ignores its signal)', async () => {
    const readiness = new Readiness(
      [
        answers,
        { name: 'memory', check: () => Promise.reject(new Error('connection refused')) },
        { name: 'audit', check: () => new Promise<void>(() => {}) },
      ],
      50,
    );
    await expect(readiness.check()).resolves.toEqual({
      ready: false,
      checks: { backend: 'ok', memory: 'failed', audit: 'timeout' },
    });
  });

  it('runs one check for concurrent callers', async () => {
    let calls = 0;
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    const readiness = new Readiness(
      [
        {
          name: 'backend',
          check: () => {
            calls += 1;
            return gate;
          },
        },
      ],
      60_000,
    );
    const first = readiness.check();
    const second = readiness.check();
    release();
    expect(await Promise.all([first, second])).toEqual([
      { ready: true, checks: { backend: 'ok' } },
      { ready: true, checks: { backend: 'ok' } },
    ]);
    expect(calls).toBe(1);
  });
});
