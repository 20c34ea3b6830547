import os from 'node:os';

/**
 * How much longer than on a quiet machine with room to spare a test may take: the factor every
 * test, hook and start-up timeout of the suite is multiplied by. A timeout is a bound on a hang,
 * never a measure of speed: on a loaded machine of two cores a test that takes 20 s alone can take
 * a minute, and must still pass.
 *
 * `CAIRN_TEST_TIMEOUT_SCALE` (a number >= 1) sets it; by default it is 6 divided by the cores
 * Node may use, at least 1 (3 on two cores, 1 from six cores up).
 */
export function timeoutScale(
  env: NodeJS.ProcessEnv = process.env,
  cores: number = os.availableParallelism(),
): number {
  const asked = env['CAIRN_TEST_TIMEOUT_SCALE'];
  if (asked !== undefined && asked !== '') {
    const factor = Number(asked);
    if (!Number.isFinite(factor) || factor < 1) {
      throw new Error(`CAIRN_TEST_TIMEOUT_SCALE must be a number >= 1, not ${JSON.stringify(asked)}`);
    }
    return factor;
  }
  return Math.max(1, 6 / Math.max(1, cores));
}

/** `ms` (a timeout sized for a quiet machine) scaled by {@link timeoutScale}, in whole ms. */
export function scaled(ms: number): number {
  return Math.ceil(ms * timeoutScale());
}

/**
 * The storage deadline of the stores and apps the tests make on the run's Azurite (the app's own
 * default is 8 s): a bound on a hang of the emulator, which does its work on one thread and can
 * stall for seconds on a loaded machine, not a measure of speed. Tests of the deadline itself (on
 * an Azurite of their own) set theirs.
 */
export const STORAGE_TIMEOUT_MS = scaled(20_000);
