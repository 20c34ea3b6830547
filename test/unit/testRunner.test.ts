import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { tally } from '../runTests';

/**
 * The runner's closing line is what CI reads: a run in which something could not run must never
 * print `0 failed`.
 */

const RUNNER = path.resolve('dist/test/runTests.js');

describe('the test runner on a scratch suite', () => {
  // Inside the project, so that the scratch tests resolve vitest from node_modules.
  let scratch: string;
  beforeAll(() => {
    scratch = mkdtempSync(path.resolve('.test-scratch-'));
    writeFileSync(
      path.join(scratch, 'vitest.config.ts'),
      "import { defineConfig } from 'vitest/config';\nexport default defineConfig({ test: { include: ['*.test.ts'] } });\n",
    );
    writeFileSync(
      path.join(scratch, 'brokenHook.test.ts'),
      "import { beforeAll, expect, it } from 'vitest';\nbeforeAll(() => { throw new Error('the hook broke'); });\nit('a', () => expect(1).toBe(1));\nit('b', () => expect(1).toBe(1));\n",
    );
    writeFileSync(
      path.join(scratch, 'brokenImport.test.ts'),
      "import { expect, it } from 'vitest';\nimport './no-such-module';\nit('c', () => expect(1).toBe(1));\n",
    );
    writeFileSync(
      path.join(scratch, 'fine.test.ts'),
      "import { expect, it } from 'vitest';\nit('d', () => expect(1).toBe(1));\n",
    );
  });
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it('counts the tests of a broken beforeAll and a file that cannot import as failures', () => {
    const run = spawnSync(
      process.execPath,
      [RUNNER, '--root', scratch, '--config', path.join(scratch, 'vitest.config.ts')],
      { encoding: 'utf8' },
    );
    const lines = run.stdout.trim().split('\n');
    expect(lines.at(-1)).toBe('1 passed, 3 failed');
    expect(run.stdout).toContain('brokenHook.test.ts: 2 test(s) did not run (the hook broke)');
    expect(run.stdout).toContain('brokenImport.test.ts: the file could not run');
    expect(run.status).not.toBe(0);
  });
});

describe('tally', () => {
  const file = (status: string, tests: string[], message = '') => ({
    name: path.resolve('x.test.ts'),
    status,
    message,
    assertionResults: tests.map((s) => ({ status: s })),
  });

  it('reports a failure when vitest wrote no results', () => {
    expect(tally(null, 1)).toMatchObject({ passed: 0, failed: 1 });
  });

  it('counts a skipped test as a failure', () => {
    expect(
      tally({ numPassedTests: 1, testResults: [file('passed', ['passed', 'skipped'])] }, 0),
    ).toMatchObject({ passed: 1, failed: 1 });
  });

  it('reports a failure when vitest failed although every test passed', () => {
    expect(
      tally({ numPassedTests: 2, testResults: [file('passed', ['passed', 'passed'])] }, 1),
    ).toMatchObject({ passed: 2, failed: 1 });
  });

  it('counts a clean run as clean', () => {
    expect(tally({ numPassedTests: 2, testResults: [file('passed', ['passed', 'passed'])] }, 0)).toEqual({
      passed: 2,
      failed: 0,
      skippedOnRequest: 0,
      notes: [],
    });
  });

  it('does not count the skips asked for (CAIRN_SKIP_BICEP_BUILD=1) as failures, and only those', () => {
    const results = {
      numPassedTests: 1,
      testResults: [
        { ...file('passed', ['skipped', 'skipped']), name: path.resolve('test/infra/bicepCompile.test.ts') },
        file('passed', ['passed', 'skipped']),
      ],
    };
    const asked = (name: string) => name.endsWith('bicepCompile.test.ts');
    expect(tally(results, 0, asked)).toMatchObject({ passed: 1, failed: 1, skippedOnRequest: 2 });
    expect(tally(results, 0)).toMatchObject({ failed: 3, skippedOnRequest: 0 });
  });
});
