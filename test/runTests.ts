/**
 * Runs every test with vitest and ends with the line CI reads: `N passed, N failed`.
 * Exits with vitest's own status.
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
try {
  const results = JSON.parse(readFileSync(resultsFile, 'utf8')) as {
    numPassedTests: number;
    numFailedTests: number;
    numTotalTests: number;
  };
  passed = results.numPassedTests;
  failed = results.numFailedTests;
} catch {
  // No results file: vitest did not get to run the tests.
  passed = 0;
  failed = 1;
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(vitest.status ?? 1);
