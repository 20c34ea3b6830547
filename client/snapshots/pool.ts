/**
 * Runs `work` on every item with at most `width` running at once, in the items' order. After the
 * first failure nothing new starts; it rejects with that failure once the running ones settled (so
 * nothing keeps writing after the caller moved on, e.g. to remove a staging folder).
 */
export async function forEachLimited<T>(
  items: readonly T[],
  width: number,
  work: (item: T, index: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  let failure: { readonly error: unknown } | undefined;
  await Promise.all(
    Array.from({ length: Math.min(width, items.length) }, async () => {
      while (failure === undefined && next < items.length) {
        const index = next++;
        try {
          await work(items[index] as T, index);
        } catch (error) {
          failure ??= { error };
        }
      }
    }),
  );
  if (failure !== undefined) throw failure.error;
}
