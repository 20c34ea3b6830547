import { setTimeout as sleep } from 'node:timers/promises';

/**
 * The one backoff of every compare-and-swap loop (a conditional write that lost a race is tried
 * again from a fresh read): before attempt `n` (from 0) it waits a uniformly random time between 0
 * and min(CAP, BASE × 2^n) ms ("full jitter"), none before the first, so that contenders spread out
 * instead of colliding again. Each site keeps its own number of attempts.
 */
export const CAS_BACKOFF = { baseMs: 10, capMs: 500 } as const;

/** What a try of {@link retryCompareAndSwap} returns when its conditional write lost the race. */
export const LOST_RACE: unique symbol = Symbol('lost race');

/** The wait before attempt `attempt` (0 for the first); `random` in [0, 1). */
export function casDelayMs(attempt: number, random: () => number = Math.random): number {
  if (attempt <= 0) return 0;
  return random() * Math.min(CAS_BACKOFF.capMs, CAS_BACKOFF.baseMs * 2 ** attempt);
}

/** Waits {@link casDelayMs} before attempt `attempt` (aborted with `signal`). */
export async function casPause(attempt: number, signal?: AbortSignal): Promise<void> {
  if (attempt > 0) await sleep(casDelayMs(attempt), undefined, signal === undefined ? {} : { signal });
}

/**
 * Runs `tryOnce` (read, decide, write on the version read) until it returns something other than
 * {@link LOST_RACE}, at most `attempts` times with {@link casPause} between; LOST_RACE when every
 * attempt lost (the caller says what that means: a 503, an error in a report). What `tryOnce`
 * throws ends the loop.
 */
export async function retryCompareAndSwap<T>(
  attempts: number,
  tryOnce: (attempt: number) => Promise<T | typeof LOST_RACE>,
  options: { signal?: AbortSignal } = {},
): Promise<T | typeof LOST_RACE> {
  for (let attempt = 0; attempt < attempts; attempt++) {
    await casPause(attempt, options.signal);
    const outcome = await tryOnce(attempt);
    if (outcome !== LOST_RACE) return outcome;
  }
  return LOST_RACE;
}
