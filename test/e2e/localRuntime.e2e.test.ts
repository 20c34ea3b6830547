import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { client, type RunningApp, startApp } from '../support/app';
import { tempDir } from '../support/cleanup';
import { scaled } from '../support/timeouts';

/** The local runtime serves an app's own registrations: HTTP routes and methods, timers, admin invoke. */
describe('local runtime', () => {
  const tickFile = path.join(tempDir('ticks'), 'ticks.jsonl');
  let app: RunningApp;

  beforeAll(async () => {
    app = await startApp(
      { TICK_FILE: tickFile, TICK_SCHEDULE: '* * * * * *' },
      path.resolve('dist/test/fixtures/serveFixture.js'),
      { args: ['timerApp'] },
    );
  });
  afterAll(async () => app.stop());

  const runs = (name: string) =>
    existsSync(tickFile)
      ? readFileSync(tickFile, 'utf8')
          .split('\n')
          .filter(Boolean)
          .map((line) => JSON.parse(line) as { name: string; invocationId: string })
          .filter((run) => run.name === name)
      : [];

  async function waitFor(condition: () => boolean, ms: number): Promise<void> {
    const deadline = Date.now() + scaled(ms);
    while (!condition()) {
      if (Date.now() > deadline) throw new Error('condition not met in time');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  it('runs a timer on its NCRONTAB schedule (resolved from an app setting)', async () => {
    await waitFor(() => runs('everySecond').length >= 2, 10_000);
    const ids = runs('everySecond').map((run) => run.invocationId);
    expect(new Set(ids).size).toBe(ids.length);
    expect(runs('yearly')).toEqual([]);
  });

  it('runs a timer on POST /admin/functions/{name} and answers 404 for unknown functions', async () => {
    // A fixture app, not Cairn: its answers are not held to Cairn's OpenAPI document.
    const call = client(app.url, undefined, { contract: false });
    const headers = { 'x-functions-key': app.hostKey };
    const response = await call('/admin/functions/yearly', { method: 'POST', headers, body: '{}' });
    expect(response.status).toBe(202);
    await waitFor(() => runs('yearly').length === 1, 10_000);
    expect((await call('/admin/functions/nothing', { method: 'POST', headers, body: '{}' })).status).toBe(
      404,
    );
  });

  it('serves HTTP routes with their parameters and answers 405/404 with the error JSON', async () => {
    // A fixture app, not Cairn: its answers are not held to Cairn's OpenAPI document.
    const call = client(app.url, undefined, { contract: false });
    const ok = await call('/api/only-get/a%20b');
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ name: 'a b' });
    const wrongMethod = await call('/api/only-get/x', { method: 'POST' });
    expect(wrongMethod.status).toBe(405);
    expect(((await wrongMethod.json()) as { error: { code: string } }).error.code).toBe('method_not_allowed');
    const unknown = await call('/api/nothing');
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: { code: string } }).error.code).toBe('not_found');
    expect((await call('/elsewhere')).status).toBe(404);
  });
});
