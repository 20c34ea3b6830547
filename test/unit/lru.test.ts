import { describe, expect, it } from 'vitest';

import { getOrCreate, lru } from '../../shared/lru';

describe('lru', () => {
  it('keeps at most its capacity and drops the least recently used first', () => {
    const map = lru<string, number>(3);
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
    const map = lru<string, number>(2);
    map.set('a', 1);
    map.set('b', 2);
    map.set('a', 10);
    map.set('c', 3);
    expect(map.get('a')).toBe(10);
    expect(map.get('b')).toBeUndefined();
  });

  it('creates a missing entry once with getOrCreate', () => {
    const map = lru<string, object>(2);
    let made = 0;
    const create = () => ({ made: ++made });
    const first = getOrCreate(map, 'k', create);
    expect(getOrCreate(map, 'k', create)).toBe(first);
    expect(made).toBe(1);
    map.delete('k');
    expect(getOrCreate(map, 'k', create)).not.toBe(first);
    expect(made).toBe(2);
  });

  it('with a weight limit, drops the least recently used until the summed weight fits', () => {
    const map = lru<string, Buffer>(100, { limit: 10, of: (value) => value.length });
    map.set('a', Buffer.alloc(4));
    map.set('b', Buffer.alloc(4));
    expect(map.get('a')?.length).toBe(4); // b is now the oldest
    map.set('c', Buffer.alloc(4));
    expect(map.get('b')).toBeUndefined();
    expect(map.calculatedSize).toBe(8);
    map.set('a', Buffer.alloc(1)); // replacing an entry replaces its weight
    expect(map.calculatedSize).toBe(5);
    map.delete('c');
    expect(map.calculatedSize).toBe(1);
  });

  it('does not keep a value heavier than the whole limit, and drops the entry it replaced', () => {
    const map = lru<string, Buffer>(100, { limit: 10, of: (value) => value.length });
    map.set('a', Buffer.alloc(3));
    map.set('b', Buffer.alloc(2));
    map.set('a', Buffer.alloc(11));
    expect(map.get('a')).toBeUndefined();
    expect(map.get('b')?.length).toBe(2);
    expect(map.calculatedSize).toBe(2);
  });

  it('counts a weightless value as 1 instead of refusing it', () => {
    const map = lru<string, Buffer>(100, { limit: 10, of: (value) => value.length });
    map.set('empty', Buffer.alloc(0));
    expect(map.get('empty')?.length).toBe(0);
    expect(map.calculatedSize).toBe(1);
  });
});
