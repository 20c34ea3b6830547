/** An optional second bound of an {@link LruMap}: the summed weight of its values (e.g. bytes). */
export interface WeightLimit<V> {
  readonly limit: number;
  readonly of: (value: V) => number;
}

/**
 * A map that keeps at most `capacity` entries, dropping the least recently used first (reading an
 * entry makes it the most recent), and, with a {@link WeightLimit}, at most `limit` in summed
 * weight (each value weighed once, when it is set). For caches of hints, clients and small values
 * that must stay bounded whatever the traffic; nothing may rely on an entry still being there.
 */
export class LruMap<K, V> {
  private readonly entries = new Map<K, { readonly value: V; readonly weight: number }>();
  private weight = 0;

  constructor(
    private readonly capacity: number,
    private readonly weightLimit?: WeightLimit<V>,
  ) {}

  get size(): number {
    return this.entries.size;
  }

  /** The summed weight of the values (0 without a weight limit). */
  get totalWeight(): number {
    return this.weight;
  }

  get(key: K): V | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined) return undefined;
    // Map keeps insertion order: re-inserting makes the entry the most recent.
    this.entries.delete(key);
    this.entries.set(key, entry);
    return entry.value;
  }

  /**
   * Adds or replaces an entry. A value heavier than the whole limit is not kept, and the entry it
   * would have replaced is gone all the same (the key never maps to an outdated value).
   */
  set(key: K, value: V): void {
    this.delete(key);
    const weight = this.weightLimit?.of(value) ?? 0;
    if (this.weightLimit !== undefined && weight > this.weightLimit.limit) return;
    this.entries.set(key, { value, weight });
    this.weight += weight;
    while (
      this.entries.size > this.capacity ||
      (this.weightLimit !== undefined && this.weight > this.weightLimit.limit)
    ) {
      const oldest = this.entries.keys().next();
      if (oldest.done === true) break;
      this.delete(oldest.value);
    }
  }

  /** The entry for `key`, made by `create` when there is none. */
  getOrCreate(key: K, create: () => V): V {
    let value = this.get(key);
    if (value === undefined) {
      value = create();
      this.set(key, value);
    }
    return value;
  }

  delete(key: K): void {
    const entry = this.entries.get(key);
    if (entry === undefined) return;
    this.entries.delete(key);
    this.weight -= entry.weight;
  }
}
