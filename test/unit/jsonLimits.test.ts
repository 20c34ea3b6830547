import { describe, expect, it } from 'vitest';

import {
  checkJsonDepth,
  jsonDepth,
  jsonStrings,
  MAX_JSON_DEPTH,
  stringifyJson,
  tooDeepPath,
} from '../../shared/json';
import { documentTerms, queryWords } from '../../shared/memory/keywordSearch';
import { checkFilter, matchesFilter } from '../../shared/memory/valueFilter';
import { InvalidArgumentError } from '../../shared/protocol/errors';

/** `[[[…leaf…]]]`, `depth` arrays deep, built without recursion. */
function nestedArrays(depth: number, leaf: unknown = 'needle'): unknown {
  let value = leaf;
  for (let i = 0; i < depth; i++) value = [value];
  return value;
}

/** `{"a":{"a":…leaf…}}`, `depth` objects deep. */
function nestedObjects(depth: number, leaf: unknown = 'needle'): unknown {
  let value = leaf;
  for (let i = 0; i < depth; i++) value = { a: value };
  return value;
}

/** Deep enough that any recursive walk (JSON.stringify included) overflows the stack. */
const OVERFLOWING = 200_000;

function thrown(action: () => unknown): unknown {
  try {
    action();
  } catch (error) {
    return error;
  }
  return undefined;
}

describe('JSON nesting depth', () => {
  it('counts arrays and objects: scalars 0, [] and {} 1, {"value":[[1]]} 3', () => {
    expect(jsonDepth(1)).toBe(0);
    expect(jsonDepth('a')).toBe(0);
    expect(jsonDepth(null)).toBe(0);
    expect(jsonDepth([])).toBe(1);
    expect(jsonDepth({})).toBe(1);
    expect(jsonDepth({ value: [[1]] })).toBe(3);
    expect(jsonDepth([1, { a: [2, [3]] }, 'x'])).toBe(4);
  });

  it('accepts exactly the limit and names the first path one level past it', () => {
    expect(tooDeepPath(nestedArrays(MAX_JSON_DEPTH))).toBeNull();
    expect(tooDeepPath(nestedObjects(MAX_JSON_DEPTH))).toBeNull();
    expect(tooDeepPath(nestedArrays(MAX_JSON_DEPTH + 1))).toEqual(new Array(MAX_JSON_DEPTH).fill('0'));
    expect(tooDeepPath({ ok: [1], deep: [[[1]]] }, 3)).toEqual(['deep', '0', '0']);
    expect(tooDeepPath({ ok: [[1]], deep: [[1]] }, 3)).toBeNull();
  });

  it('checks values far too deep for any recursion, without overflowing the stack', () => {
    const deep = { value: nestedArrays(OVERFLOWING) };
    expect(jsonDepth(deep)).toBe(OVERFLOWING + 1);
    expect(tooDeepPath(deep)?.[0]).toBe('value');
  });

  it('refuses a too deep value with a 400 naming the top-level field it lies in', () => {
    const error = thrown(() => checkJsonDepth({ ok: 1, value: nestedArrays(4100) }, 'body'));
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect((error as InvalidArgumentError).field).toBe('value');
    expect((error as Error).message).toContain(`${MAX_JSON_DEPTH} levels`);
    const nested = thrown(() => checkJsonDepth({ inner: nestedObjects(100) }, 'metadata'));
    expect((nested as InvalidArgumentError).field).toBe('metadata.inner');
    expect(thrown(() => checkJsonDepth(nestedArrays(MAX_JSON_DEPTH - 1), 'value'))).toBeUndefined();
  });
});

describe('walks over stored JSON', () => {
  it('lists every string of a value in member order, object keys excluded', () => {
    expect([...jsonStrings({ k: 'a', l: ['b', { m: 'c' }, 1, null], n: 'd' })]).toEqual(['a', 'b', 'c', 'd']);
    expect([...jsonStrings('solo')]).toEqual(['solo']);
  });

  it('keyword search reads the words of a value nested far deeper than the limit', () => {
    const terms = documentTerms('deep-fact', nestedArrays(OVERFLOWING, 'needle'), queryWords('needle'));
    expect(terms.counts).toEqual([1]);
  });

  it('filters compare fields of a stored value nested far deeper than the limit', () => {
    const stored = { status: 'active', tree: nestedArrays(OVERFLOWING, 1) };
    expect(matchesFilter(stored, checkFilter({ status: 'active' }))).toBe(true);
    expect(matchesFilter(stored, checkFilter({ tree: [[1]] }))).toBe(false);
    expect(matchesFilter(stored, checkFilter({ tree: { $ne: [[1]] } }))).toBe(true);
    expect(matchesFilter(stored, checkFilter({ tree: { $in: [1, [2]] } }))).toBe(false);
  });

  it('serialise as JSON.stringify does, also a value too deep for it', () => {
    const plain = { a: [1, 'two', null, true, { b: undefined, c: 2.5 }], d: new Date(0), e: undefined };
    expect(stringifyJson(plain)).toBe(JSON.stringify(plain));
    const deep = { value: nestedArrays(OVERFLOWING, 'x'), n: 1 };
    expect(thrown(() => JSON.stringify(deep))).toBeInstanceOf(RangeError);
    const text = stringifyJson(deep);
    expect(text).toBe(`{"value":${'['.repeat(OVERFLOWING)}"x"${']'.repeat(OVERFLOWING)},"n":1}`);
    expect(jsonDepth(JSON.parse(text))).toBe(OVERFLOWING + 1);
  });
});
