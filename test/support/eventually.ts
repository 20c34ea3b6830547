import { setTimeout as sleep } from 'node:timers/promises';

import { scaled } from './timeouts';

/**
 * Waits until `condition` holds, asking again every `everyMs`; throws naming `what` once `withinMs`
 * (scaled to the machine, test/support/timeouts.ts) have passed without it. For what happens on a
 * clock the test cannot move (a lease or a time to live kept by an app in another process): the
 * test waits for the outcome, never for a guessed time, and asserts nothing about how long it took.
 */
export async function eventually(
  what: string,
  condition: () => boolean | Promise<boolean>,
  { withinMs = 30_000, everyMs = 100 }: { withinMs?: number; everyMs?: number } = {},
): Promise<void> {
  const deadline = Date.now() + scaled(withinMs);
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`${what}: not so within ${scaled(withinMs)} ms`);
    await sleep(everyMs);
  }
}
