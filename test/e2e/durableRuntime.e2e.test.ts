import path from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { client, type RunningApp, startApp } from '../support/app';
import { tempDir } from '../support/cleanup';

/**
 * Durable orchestrations in the local runtime: started by a real `df.app.client.http` starter
 * through the durable client's HTTP calls, replayed through the real library, activities retried
 * as their retry options say, also when many fail and retry at once in a fan-out.
 */
describe('local durable runtime', () => {
  let app: RunningApp;
  let call: ReturnType<typeof client>;

  beforeAll(async () => {
    app = await startApp(
      { ATTEMPTS_DIR: tempDir('attempts') },
      path.resolve('dist/test/fixtures/serveFixture.js'),
      { args: ['durableApp'] },
    );
    // A fixture app, not Cairn: its answers are not held to Cairn's OpenAPI document.
    call = client(app.url, undefined, { contract: false });
  });
  afterAll(async () => app.stop());

  async function run(
    name: string,
    input: unknown,
  ): Promise<{ runtimeStatus: string; output: unknown; customStatus: unknown }> {
    const started = await call(`/api/orchestrations/${name}`, {
      method: 'POST',
      body: JSON.stringify(input),
    });
    expect(started.status).toBe(202);
    const { id } = (await started.json()) as { id: string };
    for (let poll = 0; poll < 200; poll++) {
      const status = (await (await call(`/api/orchestrations/status/${id}`)).json()) as {
        runtimeStatus: string;
        output: unknown;
        customStatus: unknown;
      };
      if (status.runtimeStatus === 'Completed' || status.runtimeStatus === 'Failed') return status;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error('the orchestration did not finish');
  }

  it('runs activities in order, retrying one that fails twice, with custom status', async () => {
    const status = await run('sequence', [
      { key: 's1', failures: 0 },
      { key: 's2', failures: 2 },
      { key: 's3', failures: 1 },
    ]);
    expect(status.runtimeStatus).toBe('Completed');
    expect(status.output).toEqual([
      { key: 's1', attempts: 1 },
      { key: 's2', attempts: 3 },
      { key: 's3', attempts: 2 },
    ]);
    expect(status.customStatus).toEqual({ done: 3 });
  });

  it('fails the orchestration when an activity fails on all 3 attempts', async () => {
    const status = await run('sequence', [{ key: 'f1', failures: 5 }]);
    expect(status.runtimeStatus).toBe('Failed');
    expect(String(status.output)).toContain('transient failure 3 of f1');
  });

  it('keeps fan-out results straight while retries of many activities interleave', async () => {
    const steps = Array.from({ length: 12 }, (_, i) => ({ key: `p${i}`, failures: i % 3 }));
    const status = await run('fanOut', steps);
    expect(status.runtimeStatus).toBe('Completed');
    const expected = [
      ...steps.map((step) => ({ key: step.key, attempts: step.failures + 1 })),
      ...steps.map((step) => ({ key: `${step.key}-again`, attempts: step.failures + 1 })),
    ];
    expect(status.output).toEqual(expected);
  });
});
