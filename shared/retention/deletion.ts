import { PreconditionFailedError } from '../protocol/errors';
import { forEachLimited } from '../protocol/pool';
import type { ItemPage, KeyValueStore, ListedItem } from '../storage/keyValueStore';
import { countObject, type PruneBudget, type PruneCounts } from './budget';

/** Deletions one tenant's pass sends at once. */
export const DELETE_CONCURRENCY = 16;
/** The largest listing page both backends serve. */
export const LIST_PAGE = 5000;

/**
 * Deletes listed keys of a key/value store within the budget, counting each key this call removed
 * (a key another run removed first is not counted). With `onVersion`, a key is deleted only in the
 * version listed: one written since (a put that names it again, an append) stays. True when every
 * item was attempted (false: the budget ran out first).
 */
export async function deleteListed(
  store: KeyValueStore,
  items: readonly ListedItem[],
  budget: PruneBudget,
  counts: PruneCounts,
  options: { onVersion: boolean; counted?: (item: ListedItem) => void },
): Promise<boolean> {
  let complete = true;
  await forEachLimited(
    items,
    DELETE_CONCURRENCY,
    async (item) => {
      if (!budget.take()) {
        complete = false;
        return;
      }
      let removed: boolean;
      try {
        removed = await budget.deleting(() =>
          store.delete(item.key, options.onVersion ? { ifMatch: item.etag } : {}),
        );
      } catch (error) {
        if (!(error instanceof PreconditionFailedError)) throw error;
        removed = false;
      }
      if (removed) {
        countObject(counts, item.size);
        options.counted?.(item);
      }
    },
    () => !complete,
  );
  return complete;
}

/** Every item under `prefix`, page by page (pages of {@link LIST_PAGE}). */
export async function* listAllItems(store: KeyValueStore, prefix: string): AsyncGenerator<ListedItem[]> {
  let cursor: string | undefined;
  do {
    const page: ItemPage = await store.listItems({
      prefix,
      limit: LIST_PAGE,
      ...(cursor === undefined ? {} : { cursor }),
    });
    yield page.items;
    cursor = page.cursor ?? undefined;
  } while (cursor !== undefined);
}

/**
 * Deletes every key under `prefix` (unconditionally: the whole prefix is garbage) within the
 * budget; keys last written at or after `storedBefore` (when given) stay. True when nothing that
 * may go is left. Listings continue by key, so deleting while listing skips nothing.
 */
export async function deletePrefix(
  store: KeyValueStore,
  prefix: string,
  budget: PruneBudget,
  counts: PruneCounts,
  options: { storedBefore?: number } = {},
): Promise<boolean> {
  let spared = false;
  for await (const page of listAllItems(store, prefix)) {
    const doomed = page.filter(
      (item) => options.storedBefore === undefined || item.modifiedAt.getTime() < options.storedBefore,
    );
    if (doomed.length < page.length) spared = true;
    if (!(await deleteListed(store, doomed, budget, counts, { onVersion: false }))) return false;
  }
  return !spared;
}
