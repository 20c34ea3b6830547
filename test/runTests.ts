/**
 * Runs every test with vitest and ends with the line CI reads: `N passed, N failed`.
 *
 * The count is honest: besides the tests that failed, it counts as failures every test that did not
 * run (skipped or todo: a suite whose `beforeAll` throws marks its tests skipped, and no test is
 * skipped on purpose in CI) and every test file that could not run at all (an import error leaves
 * a failed file without tests). When vitest fails for a reason none of these show (an unhandled
 * error) or writes no results, at least one failure is reported. The results file is written to a
 * new temporary folder, so a file of an earlier run is never read. Exits with vitest's own status,
 * or 1 when the count has failures.
 *
 * One skip is asked for, never silent: with CAIRN_SKIP_BICEP_BUILD=1 (machines without the .NET SDK)
 * the tests of the Bicep compile are skipped, not counted as failures, and the line before the
 * count says so: that run checked infra/ with the offline rules only.
 *
 * Arguments are passed on to vitest (e.g. a file filter).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

interface FileResult {
  readonly name: string;
  readonly status: string;
  readonly message?: string;
  readonly assertionResults: readonly { readonly status: string }[];
}

interface VitestResults {
  readonly numPassedTests: number;
  readonly testResults: readonly FileResult[];
}

export interface Tally {
  readonly passed: number;
  readonly failed: number;
  /** Why tests that did not fail count as failures, one line each. */
  readonly notes: string[];
}

/** Test files whose skipped tests were asked for (CAIRN_SKIP_BICEP_BUILD=1), not failures. */
const BICEP_COMPILE_TESTS = /test\/infra\/bicepCompile\.test\.ts$/;

/**
 * The count of a vitest JSON report (null: no report) and vitest's exit status. Tests that did not
 * run count as failures, except in files `skipAsked` names.
 */
export function tally(
  results: VitestResults | null,
  exitStatus: number | null,
  skipAsked: (file: string) => boolean = () => false,
): Tally & { readonly skippedOnRequest: number } {
  const notes: string[] = [];
  if (results === null) {
    return {
      passed: 0,
      failed: 1,
      skippedOnRequest: 0,
      notes: ['vitest wrote no results: the tests did not run'],
    };
  }
  let failed = 0;
  let skippedOnRequest = 0;
  for (const file of results.testResults) {
    const name = path.relative(process.cwd(), file.name);
    const statuses = file.assertionResults.map((test) => test.status);
    failed += statuses.filter((status) => status === 'failed').length;
    const notRun = statuses.filter((status) => status !== 'passed' && status !== 'failed').length;
    if (notRun > 0 && skipAsked(file.name)) {
      skippedOnRequest += notRun;
    } else if (notRun > 0) {
      failed += notRun;
      notes.push(
        `${name}: ${notRun} test(s) did not run${file.message ? ` (${firstLine(file.message)})` : ''}`,
      );
    }
    if (file.status === 'failed' && statuses.length === 0) {
      failed += 1;
      notes.push(`${name}: the file could not run (${firstLine(file.message ?? 'no message')})`);
    }
  }
  if (failed === 0 && exitStatus !== 0) {
    failed = 1;
    notes.push(
      `vitest exited with status ${String(exitStatus)} although every test passed (an unhandled error?)`,
    );
  }
  return { passed: results.numPassedTests, failed, skippedOnRequest, notes };
}

function firstLine(text: string): string {
  return text.split('\n', 1)[0] ?? '';
}

function readResults(file: string): VitestResults | null {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as VitestResults;
  } catch {
    return null;
  }
}

function main(): void {
  const resultsDir = mkdtempSync(path.join(os.tmpdir(), 'cairn-test-results-'));
  const resultsFile = path.join(resultsDir, 'vitest.json');
  try {
    const started = Date.now();
    const vitest = spawnSync(
      process.execPath,
      [
        path.join(path.dirname(require.resolve('vitest/package.json')), 'vitest.mjs'),
        'run',
        '--reporter=default',
        '--reporter=json',
        `--outputFile.json=${resultsFile}`,
        ...process.argv.slice(2),
      ],
      { stdio: 'inherit' },
    );
    const bicepSkipped = process.env['CAIRN_SKIP_BICEP_BUILD'] === '1';
    const { passed, failed, notes, skippedOnRequest } = tally(
      readResults(resultsFile),
      vitest.status,
      (file) => bicepSkipped && BICEP_COMPILE_TESTS.test(file.split(path.sep).join('/')),
    );
    // The figure the README gives for the suite's time alone (the build and lint before it aside).
    console.log(`the tests took ${String(Math.round((Date.now() - started) / 1000))} s`);
    for (const note of notes) console.log(`counted as failed: ${note}`);
    if (bicepSkipped) {
      console.log(
        `Bicep compile SKIPPED (CAIRN_SKIP_BICEP_BUILD=1): infra/ was checked by the offline rules only (${skippedOnRequest} tests skipped).`,
      );
    }
    console.log(`${passed} passed, ${failed} failed`);
    process.exitCode = failed > 0 ? vitest.status || 1 : (vitest.status ?? 1);
  } finally {
    rmSync(resultsDir, { recursive: true, force: true });
  }
}

if (require.main === module) main();
