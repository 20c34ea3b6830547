import { describe, expect, it } from 'vitest';

import { InvalidArgumentError } from '../../shared/protocol/errors';
import { compareKeys } from '../../shared/protocol/keyOrderWalk';
import { validateKey } from '../../shared/protocol/keys';
import {
  channelSegment,
  checkCheckpointId,
  checkNamespace,
  checkThreadId,
  idOfInverted,
  invertedId,
  namespaceSegment,
} from '../../shared/threads/identifiers';
import {
  canonicalOrder,
  compareByCodePoint,
  encodeWritesLine,
  mergeWrites,
} from '../../shared/threads/pendingWrites';

const ALPHABET = '-.0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz';

/** A deterministic pseudo-random generator, so a failure can be replayed. */
function generator(seed: number) {
  let state = seed;
  return () => {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    return state / 2 ** 31;
  };
}

describe('inverted checkpoint ids', () => {
  it('sort in ascending key order exactly as the ids sort descending, prefixes included', () => {
    const random = generator(7);
    const ids = new Set<string>(['a', 'ab', 'abc', 'b', '-', 'z', 'zz', '1ef0-c2', '1ef0-c2-1', '1ef0-c20']);
    while (ids.size < 2000) {
      const length = 1 + Math.floor(random() * 6);
      let id = '';
      for (let i = 0; i < length; i++) id += ALPHABET[Math.floor(random() * ALPHABET.length)];
      if (id !== '.' && id !== '..') ids.add(id);
    }
    const descending = [...ids].sort().reverse();
    const byInvertedKey = [...ids].sort((a, b) => compareKeys(invertedId(a), invertedId(b)));
    expect(byInvertedKey).toEqual(descending);
  });

  it('decode back to the id and are valid key segments', () => {
    for (const id of ['0', '.x', '1ef0a7c2-1b2c-6d3e-8f40-0242ac120002', 'z'.repeat(128)]) {
      expect(idOfInverted(invertedId(id))).toBe(id);
      expect(() => validateKey(`c/${invertedId(id)}/n`)).not.toThrow();
    }
    expect(idOfInverted('abc')).toBeNull();
  });
});

describe('namespace and channel segments', () => {
  it('are valid key segments for any text, distinct for distinct text, at most 200 characters', () => {
    const texts = ['', 'a', 'a/b', '..', 'node:1ef0|child:2', 'ü €', '\u{1F600}', 'x'.repeat(512)];
    const namespaces = texts.map(namespaceSegment);
    const channels = texts.filter((text) => text !== '').map(channelSegment);
    for (const segment of [...namespaces, ...channels]) {
      expect(() => validateKey(`v/${segment}/x`)).not.toThrow();
      expect(segment.length).toBeLessThanOrEqual(200);
    }
    expect(new Set(namespaces).size).toBe(namespaces.length);
    expect(namespaceSegment('')).toBe('n');
    expect(namespaceSegment('x'.repeat(512))).toMatch(/^h[0-9a-f]{64}$/);
  });
});

describe('thread identifiers', () => {
  it('refuse what a key or a route cannot hold, naming the field', () => {
    for (const bad of ['', '.', '..', 'a/b', 'a b', 'x'.repeat(129), 'ü']) {
      expect(() => checkThreadId(bad)).toThrow(InvalidArgumentError);
    }
    expect(() => checkCheckpointId('latest')).toThrow(/checkpointId/);
    expect(() => checkNamespace('a\nb')).toThrow(/^ns:/);
    expect(() => checkNamespace('x'.repeat(513))).toThrow(/^ns:/);
    expect(() => checkThreadId('Thread_1.a-b')).not.toThrow();
    expect(() => checkNamespace('')).not.toThrow();
  });
});

describe('pending writes', () => {
  const value = (text: string) => ({ type: 'json', data: Buffer.from(text) });
  const line = (taskId: string, taskPath: string, writes: [string, number, string][]) =>
    encodeWritesLine(
      taskId,
      taskPath,
      writes.map(([channel, idx, text]) => ({ channel, idx, value: value(text) })),
    );

  it('keep the first regular write of a (task, index) and let a special write replace', () => {
    const stored = Buffer.concat([
      line('t1', '', [
        ['messages', 0, 'first'],
        ['__interrupt__', -3, 'asked'],
      ]),
      line('t1', '', [
        ['messages', 0, 'retry'],
        ['messages', 1, 'second'],
      ]),
      line('t1', '', [['__resume__', -4, 'yes']]),
      line('t1', '', [['__interrupt__', -3, 'asked again']]),
    ]);
    const merged = mergeWrites(stored, 'c1').map((write) => [
      write.channel,
      write.idx,
      write.data.toString(),
    ]);
    expect(merged).toEqual([
      ['messages', 0, 'first'],
      ['__interrupt__', -3, 'asked again'],
      ['messages', 1, 'second'],
      ['__resume__', -4, 'yes'],
    ]);
  });

  it('order by task path, then task id, then index, strings by code point', () => {
    const stored = Buffer.concat([
      line('b', '~1', [['x', 1, 'b1']]),
      line('b', '~1', [['x', 0, 'b0']]),
      line('a', '~1', [['x', 2, 'a2']]),
      line('z', '', [['x', 0, 'z0']]),
      line('c', '~\u{1F600}', [['x', 0, 'astral']]),
      line('d', '~\uffff', [['x', 0, 'bmp']]),
      line('a', '~1', [['x', -1, 'error']]),
    ]);
    expect(canonicalOrder(mergeWrites(stored, 'c1')).map((write) => write.data.toString())).toEqual([
      'z0',
      'error',
      'a2',
      'b0',
      'b1',
      'bmp',
      'astral',
    ]);
    expect(compareByCodePoint('\u{1F600}', '\uffff')).toBe(1);
    expect('\u{1F600}' < '\uffff').toBe(true); // what a plain comparison would have done
  });

  it('have none when nothing is stored', () => {
    expect(mergeWrites(null, 'c1')).toEqual([]);
  });
});
