import { describe, expect, it } from 'vitest';

import { LruMap } from '../../shared/lruMap';

describe('LruMap', () => {
  it('keeps at most its capacity and drops the least recently used first', () => {
    const map = new LruMap<string, number>(3);
    map.set('a', 1);
    map.set('b', 2);
    map.set('c', 3);
    expect(map.get('a')).toBe(1); // a is now the most recent: b is the oldest
    map.set('d', 4);
    expect(map.size).toBe(3);
    expect(map.get('b')).toBeUndefined();
    expect([map.get('a'), map.get('c'), map.get('d')]).toEqual([1, 3, 4]);
  });

  it('replaces a value in place and makes it the most recent', () => {
    const map = new LruMap<string, number>(2);
    map.set('a', 1);
    map.set('b', 2);
    map.set('a', 10);
    map.set('c', 3);
    expect(map.get('a')).toBe(10);
    expect(map.get('b')).toBeUndefined();
  });

  it('creates a missing entry once with getOrCreate', () => {
    const map = new LruMap<string, object>(2);
    let made = 0;
    const create = () => ({ made: ++made });
    const first = map.getOrCreate('k', create);
    expect(map.getOrCreate('k', create)).toBe(first);
    expect(made).toBe(1);
    map.delete('k');
    expect(map.getOrCreate('k', create)).not.toBe(first);
    expect(made).toBe(2);
  });
});
