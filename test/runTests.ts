/**
 * Runs every test with vitest and ends with the line CI reads: `N passed, N failed`.
 * Exits with vitest's own status. A run that skipped the Bicep compile (CAIRN_SKIP_BICEP_BUILD=1,
 * for machines without the .NET SDK) says so on the line before: its infra checks were offline only.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

const resultsFile = path.resolve('.test-results', 'vitest.json');
mkdirSync(path.dirname(resultsFile), { recursive: true });
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

let passed: number;
let failed: number;
let skipped = 0;
try {
  const results = JSON.parse(readFileSync(resultsFile, 'utf8')) as {
    numPassedTests: number;
    numFailedTests: number;
    numPendingTests: number;
    numTotalTests: number;
  };
  passed = results.numPassedTests;
  failed = results.numFailedTests;
  skipped = results.numPendingTests;
} catch {
  // No results file: vitest did not get to run the tests.
  passed = 0;
  failed = 1;
}
if (process.env.CAIRN_SKIP_BICEP_BUILD === '1') {
  console.log(
    `Bicep compile SKIPPED (CAIRN_SKIP_BICEP_BUILD=1): infra/ was checked by the offline rules only (${skipped} tests skipped).`,
  );
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(vitest.status ?? 1);
