import pMap from 'p-map';
import { onTestFinished } from 'vitest';

/**
 * Runs `tasks` with at most `width` at once, for the current test only: once the test has ended
 * (passed, failed or timed out), no task that has not begun is started. A test that timed out
 * therefore stops writing instead of writing on beside the next test.
 */
export async function inParallelForThisTest<T>(
  width: number,
  tasks: readonly (() => Promise<T>)[],
): Promise<T[]> {
  const ended = new AbortController();
  onTestFinished(() => ended.abort());
  return pMap(tasks, (task) => task(), { concurrency: width, signal: ended.signal });
}
