import { describe, expect, it } from 'vitest';

import { loadConfig, pruneScheduleFrom } from '../../shared/config';
import { firstKeptDay } from '../../shared/coordination/interactionRetention';
import { ConfigurationError, InvalidArgumentError } from '../../shared/protocol/errors';
import { PruneBudget } from '../../shared/retention/budget';
import { effectivePolicy, KEEP_EVERYTHING, parsePolicyOverride } from '../../shared/retention/policy';
import { sampled } from '../../shared/retention/verifyReport';

/** Retention's pure parts: settings, policy validation, the budget, sampling, the log's days. */

const KEYS = `dev:${'a'.repeat(64)}:admin`;

function configError(env: Record<string, string>): ConfigurationError {
  try {
    loadConfig({ CAIRN_API_KEYS: KEYS, ...env }, '/srv/app');
  } catch (error) {
    if (error instanceof ConfigurationError) return error;
    throw error;
  }
  throw new Error('expected a ConfigurationError');
}

function argumentError(body: unknown): InvalidArgumentError {
  try {
    parsePolicyOverride(body);
  } catch (error) {
    if (error instanceof InvalidArgumentError) return error;
    throw error;
  }
  throw new Error('expected an InvalidArgumentError');
}

describe('retention settings', () => {
  it('keep everything by default, prune hourly within 120 s and 50,000 deletions', () => {
    expect(loadConfig({ CAIRN_API_KEYS: KEYS }, '/srv/app').retention).toEqual({
      defaults: KEEP_EVERYTHING,
      schedule: '0 0 * * * *',
      maxSeconds: 120,
      maxDeletes: 50_000,
    });
    expect(pruneScheduleFrom({})).toBe('0 0 * * * *');
  });

  it('read every default of the policy', () => {
    const config = loadConfig(
      {
        CAIRN_API_KEYS: KEYS,
        CAIRN_RETENTION_THREAD_TTL_SECONDS: '86400',
        CAIRN_RETENTION_KEEP_CHECKPOINTS: '10',
        CAIRN_RETENTION_DROP_BRANCHES: 'yes',
        CAIRN_RETENTION_SESSION_TTL_SECONDS: '3600',
        CAIRN_RETENTION_INTERACTION_DAYS: '30',
        CAIRN_PRUNE_SCHEDULE: '0 */10 * * * *',
        CAIRN_PRUNE_MAX_SECONDS: '60',
        CAIRN_PRUNE_MAX_DELETES: '1000',
      },
      '/srv/app',
    );
    expect(config.retention).toEqual({
      defaults: {
        threadTtlSeconds: 86400,
        keepCheckpoints: 10,
        dropBranches: true,
        sessionTtlSeconds: 3600,
        interactionDays: 30,
      },
      schedule: '0 */10 * * * *',
      maxSeconds: 60,
      maxDeletes: 1000,
    });
  });

  it.each([
    ['CAIRN_PRUNE_SCHEDULE', '0 * * * *'],
    ['CAIRN_PRUNE_SCHEDULE', '0 99 * * * *'],
    ['CAIRN_PRUNE_MAX_SECONDS', '0'],
    ['CAIRN_PRUNE_MAX_SECONDS', '3601'],
    ['CAIRN_PRUNE_MAX_DELETES', 'lots'],
    ['CAIRN_RETENTION_THREAD_TTL_SECONDS', '-1'],
    ['CAIRN_RETENTION_KEEP_CHECKPOINTS', '1.5'],
    ['CAIRN_RETENTION_DROP_BRANCHES', 'maybe'],
    ['CAIRN_RETENTION_SESSION_TTL_SECONDS', '0'],
    ['CAIRN_RETENTION_INTERACTION_DAYS', '36501'],
  ])('refuse %s=%s at start-up, naming the setting', (setting, value) => {
    expect(configError({ [setting]: value }).setting).toBe(setting);
  });
});

describe('policy overrides', () => {
  it('take each field given over the defaults; null keeps everything of that kind', () => {
    const defaults = { ...KEEP_EVERYTHING, threadTtlSeconds: 60, keepCheckpoints: 5 };
    const override = parsePolicyOverride({
      keepCheckpoints: null,
      sessionTtlSeconds: 3600,
      dropBranches: true,
    });
    expect(effectivePolicy(defaults, override)).toEqual({
      threadTtlSeconds: 60,
      keepCheckpoints: null,
      dropBranches: true,
      sessionTtlSeconds: 3600,
      interactionDays: null,
    });
    expect(effectivePolicy(defaults, null)).toEqual(defaults);
    expect(parsePolicyOverride({})).toEqual({});
  });

  it.each([
    [[], 'policy'],
    [null, 'policy'],
    [{ keep: 3 }, 'keep'],
    [{ threadTtlSeconds: 0 }, 'threadTtlSeconds'],
    [{ threadTtlSeconds: '60' }, 'threadTtlSeconds'],
    [{ keepCheckpoints: 2.5 }, 'keepCheckpoints'],
    [{ dropBranches: 'yes' }, 'dropBranches'],
    [{ dropBranches: null }, 'dropBranches'],
    [{ sessionTtlSeconds: 315_360_001 }, 'sessionTtlSeconds'],
    [{ interactionDays: -3 }, 'interactionDays'],
  ])('refuse %j, naming %s', (body, field) => {
    expect(argumentError(body).field).toBe(field);
  });
});

describe('the budget, sampling and the interaction log', () => {
  it('a budget runs out of deletions or of time', () => {
    let clock = 0;
    const budget = new PruneBudget(2, 100, () => clock);
    expect([budget.take(), budget.take(), budget.take()]).toEqual([true, true, false]);
    const timed = new PruneBudget(10, 100, () => clock);
    clock = 100;
    expect(timed.exhausted).toBe(true);
    expect(timed.take()).toBe(false);
  });

  it('a run has at most its bound of deletions in flight; the others wait their turn, also after a failure', async () => {
    const budget = new PruneBudget(100, Infinity, () => 0, 3);
    const pending: ((ok: boolean) => void)[] = [];
    const started: number[] = [];
    let inFlight = 0;
    let most = 0;
    const settled = () => new Promise((resolve) => setImmediate(resolve));
    const results = Array.from({ length: 8 }, (_, id) =>
      budget
        .deleting(
          () =>
            new Promise<number>((resolve, reject) => {
              inFlight += 1;
              most = Math.max(most, inFlight);
              started.push(id);
              pending.push((ok) => {
                inFlight -= 1;
                if (ok) resolve(id);
                else reject(new Error(`delete ${id} failed`));
              });
            }),
        )
        .then(
          (done) => `deleted ${done}`,
          (error: Error) => error.message,
        ),
    );
    await settled();
    expect(started).toEqual([0, 1, 2]);
    pending.shift()?.(false);
    await settled();
    expect(started).toEqual([0, 1, 2, 3]);
    while (pending.length > 0) {
      pending.shift()?.(true);
      await settled();
    }
    expect(most).toBe(3);
    expect(started).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(await Promise.all(results)).toEqual([
      'delete 0 failed',
      ...[1, 2, 3, 4, 5, 6, 7].map((id) => `deleted ${id}`),
    ]);
  });

  it('hashes every item with readData, else about one in n and at least one per group', () => {
    const items = Array.from({ length: 160 }, (_, index) => index);
    let seed = 1;
    const random = () => (seed = (seed * 48271) % 2147483647) / 2147483647;
    expect(sampled(items, { readData: true, oneIn: 16, random })).toHaveLength(160);
    const some = sampled(items, { readData: false, oneIn: 16, random });
    expect(some.length).toBeGreaterThan(0);
    expect(some.length).toBeLessThan(40);
    expect(sampled([7], { readData: false, oneIn: 16, random })).toEqual([7]);
    expect(sampled([1, 2, 3], { readData: false, oneIn: Number.POSITIVE_INFINITY, random })).toHaveLength(1);
  });

  it('keeps the last n UTC days of the interaction log, today included', () => {
    const now = Date.parse('2026-03-10T23:59:00Z');
    expect(firstKeptDay(now, 1)).toBe('2026-03-10');
    expect(firstKeptDay(now, 10)).toBe('2026-03-01');
  });
});
