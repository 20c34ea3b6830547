import { LRUCache } from 'lru-cache';

/** A value lru-cache can hold: anything but null and undefined. */
type Present = NonNullable<unknown>;

/** A bounded least-recently-used cache (lru-cache): reading an entry makes it the most recent. */
export type Lru<K extends Present, V extends Present> = LRUCache<K, V>;

/** An optional second bound of an {@link Lru}: the summed weight of its values (e.g. bytes). */
export interface WeightLimit<V> {
  readonly limit: number;
  readonly of: (value: V) => number;
}

/**
 * A cache of at most `max` entries and, with a {@link WeightLimit}, at most `limit` in summed
 * weight (each value weighed once, when it is set). A value heavier than the whole limit is not
 * kept, and the entry it would have replaced is dropped all the same. lru-cache needs every weight
 * to be a positive integer: a weight under 1 (a version without its bytes) counts as 1, and a
 * fractional one is rounded up. For caches of hints, clients and small values that must stay
 * bounded whatever the traffic; nothing may rely on an entry still being there.
 */
export function lru<K extends Present, V extends Present>(max: number, weight?: WeightLimit<V>): Lru<K, V> {
  if (weight === undefined) return new LRUCache<K, V>({ max });
  return new LRUCache<K, V>({
    max,
    maxSize: weight.limit,
    sizeCalculation: (value) => Math.max(1, Math.ceil(weight.of(value))),
  });
}

/** The entry for `key` in `cache`, made by `create` (and kept) when there is none. */
export function getOrCreate<K extends Present, V extends Present>(
  cache: Lru<K, V>,
  key: K,
  create: () => V,
): V {
  let value = cache.get(key);
  if (value === undefined) {
    value = create();
    cache.set(key, value);
  }
  return value;
}
