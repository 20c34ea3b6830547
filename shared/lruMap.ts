/**
 * A map that keeps at most `capacity` entries, dropping the least recently used first (reading an
 * entry makes it the most recent). For caches of hints and clients that must stay bounded whatever
 * the traffic; nothing may rely on an entry still being there.
 */
export class LruMap<K, V> {
  private readonly entries = new Map<K, V>();

  constructor(private readonly capacity: number) {}

  get size(): number {
    return this.entries.size;
  }

  get(key: K): V | undefined {
    const value = this.entries.get(key);
    if (value !== undefined) {
      // Map keeps insertion order: re-inserting makes the entry the most recent.
      this.entries.delete(key);
      this.entries.set(key, value);
    }
    return value;
  }

  set(key: K, value: V): void {
    this.entries.delete(key);
    this.entries.set(key, value);
    if (this.entries.size > this.capacity) {
      const oldest = this.entries.keys().next();
      if (oldest.done !== true) this.entries.delete(oldest.value);
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
    this.entries.delete(key);
  }
}
