import pMap, { pMapSkip } from 'p-map';

/**
 * The one bounded pool of the project (app and client): runs `work` on every item, at most `width`
 * at once, starting them in the items' order (p-map with `stopOnError`). After the first failure
 * nothing new starts; it rejects with that failure once the items already running settled, so
 * nothing keeps writing after the caller moved on (e.g. to remove a staging folder, or to report a
 * job's page). With `stop`, it stops starting new items once `stop()` is true (and resolves).
 */
export async function forEachLimited<T>(
  items: readonly T[],
  width: number,
  work: (item: T, index: number) => Promise<void>,
  stop: () => boolean = () => false,
): Promise<void> {
  await mapLimited(items, width, work, stop);
}

/** Like `forEachLimited`, and resolves to the results in the items' order. */
export async function mapLimited<T, R>(
  items: readonly T[],
  width: number,
  work: (item: T, index: number) => Promise<R>,
  stop: () => boolean = () => false,
): Promise<R[]> {
  const running = new Set<Promise<unknown>>();
  let failed = false;
  try {
    return await pMap(
      items,
      (item, index) => {
        if (failed || stop()) return pMapSkip;
        const started = work(item, index);
        running.add(started);
        void started.then(
          () => running.delete(started),
          () => {
            failed = true;
            running.delete(started);
          },
        );
        return started;
      },
      { concurrency: Math.max(1, width), stopOnError: true },
    );
  } catch (error) {
    failed = true;
    await Promise.allSettled([...running]);
    throw error;
  }
}
