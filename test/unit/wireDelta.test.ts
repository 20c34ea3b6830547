import { describe, expect, it } from 'vitest';

import { BaseMismatchError } from '../../shared/protocol/errors';
import type { TypedBytes } from '../../shared/threads/records';
import { ValueCache } from '../../shared/threads/valueCache';
import { commonPrefix, deltaAgainst, resolvePutDeltas, sha256Hex } from '../../shared/threads/wireDelta';

const typed = (text: string, type = 'json'): TypedBytes => ({ type, data: Buffer.from(text) });

function body(values: Record<string, unknown>) {
  return {
    checkpointId: 'c2',
    ns: '',
    parent: 'c1',
    v: 4,
    checkpoint: { type: 'json', data: '' },
    metadata: {},
    channelVersions: {},
    values,
  } as unknown as Parameters<typeof resolvePutDeltas>[0];
}

function delta(base: string, keep: number, append: string, whole: string, channel?: string) {
  return {
    type: 'json',
    base: { checkpointId: base, ...(channel === undefined ? {} : { channel }) },
    keep,
    append: Buffer.from(append).toString('base64'),
    sha256: sha256Hex(Buffer.from(whole)),
  };
}

describe('wire deltas', () => {
  it('commonPrefix counts the bytes two values share from the start', () => {
    expect(commonPrefix(Buffer.from('abcdef'), Buffer.from('abcxyz'))).toBe(3);
    expect(commonPrefix(Buffer.from('abc'), Buffer.from('abcdef'))).toBe(3);
    expect(commonPrefix(Buffer.from(''), Buffer.from('a'))).toBe(0);
  });

  it('a read answers a value as a delta against since only when that is smaller', () => {
    const known = typed('x'.repeat(500));
    const grown = typed('x'.repeat(500) + 'y'.repeat(10));
    const answered = deltaAgainst(grown, known);
    expect(answered).toMatchObject({ type: 'json', keep: 500, sha256: sha256Hex(grown.data) });
    expect('append' in answered && answered.append.toString()).toBe('y'.repeat(10));
    // Another type tag, or a change as large as the value: whole.
    expect(deltaAgainst(grown, typed('x'.repeat(500), 'other'))).toBe(grown);
    expect(deltaAgainst(typed('short'), typed('shorter'))).toEqual(typed('short'));
  });

  it('resolves a delta put from its base, and asks for each base once', async () => {
    const reads: string[] = [];
    const resolved = await resolvePutDeltas(
      body({
        a: delta('c1', 3, 'DEF', 'abcDEF'),
        b: delta('c1', 1, '!', 'x!', 'a2'),
        c: { type: 'json', data: Buffer.from('whole').toString('base64') },
        d: null,
      }),
      (checkpointId) => {
        reads.push(checkpointId);
        return Promise.resolve({ a: typed('abcxyz'), a2: typed('xyz') });
      },
    );
    expect(reads).toEqual(['c1']);
    expect(resolved.values['a']).toEqual(typed('abcDEF'));
    expect(resolved.values['b']).toEqual(typed('x!'));
    expect(resolved.values['c']).toEqual({ type: 'json', data: Buffer.from('whole').toString('base64') });
    expect(resolved.values['d']).toBeNull();
  });

  it('refuses a delta that does not resolve, naming the channel', async () => {
    const base = (): Promise<Record<string, TypedBytes> | null> => Promise.resolve({ a: typed('abc') });
    const refusal = (values: Record<string, unknown>, read = base) =>
      resolvePutDeltas(body(values), read).then(
        () => null,
        (error: unknown) => error,
      );
    const cases: [Record<string, unknown>, string][] = [
      [{ m: delta('c1', 1, 'b', 'ab') }, 'no value for the channel'],
      [{ a: { ...delta('c1', 1, 'b', 'ab'), type: 'other' } }, 'another type tag'],
      [{ a: delta('c1', 4, '', 'abc') }, 'past the end'],
      [{ a: delta('c1', 3, 'd', 'abcX') }, 'digest'],
    ];
    for (const [values, message] of cases) {
      const error = await refusal(values);
      expect(error).toBeInstanceOf(BaseMismatchError);
      expect((error as BaseMismatchError).field).toBe(`values.${Object.keys(values)[0]}`);
      expect((error as Error).message).toContain(message);
    }
    const missing = await refusal({ a: delta('gone', 1, 'b', 'ab') }, () => Promise.resolve(null));
    expect((missing as Error).message).toContain('not stored');
  });
});

describe('values kept per instance', () => {
  const scope = ValueCache.scopeOf('tenant', 'thread', 'incarnation');
  const source = 'c1/~AAAAAAAAAAAAAAAAAAAAAA';

  it('keeps values by source within one thread incarnation of one tenant', () => {
    const cache = new ValueCache();
    cache.keep(scope, '', 'm', source, typed('v'));
    expect(cache.value(scope, '', 'm', source)).toEqual(typed('v'));
    expect(cache.value(scope, '', 'm', 'c1/~BBBBBBBBBBBBBBBBBBBBBB')).toBeUndefined();
    expect(cache.value(scope, 'sub', 'm', source)).toBeUndefined();
    expect(cache.value(scope, '', 'other', source)).toBeUndefined();
    expect(cache.value(ValueCache.scopeOf('tenant', 'thread', 'again'), '', 'm', source)).toBeUndefined();
    expect(
      cache.value(ValueCache.scopeOf('other', 'thread', 'incarnation'), '', 'm', source),
    ).toBeUndefined();
  });

  it('never keeps a value under a source without a digest (the first layout named the producer only)', () => {
    const cache = new ValueCache();
    cache.keep(scope, '', 'm', 'c1', typed('v'));
    cache.keep(scope, '', 'm', '1f1ef46c-4339-64e0-8054-8368a4208a66', typed('v'));
    expect(cache.value(scope, '', 'm', 'c1')).toBeUndefined();
    expect(cache.value(scope, '', 'm', '1f1ef46c-4339-64e0-8054-8368a4208a66')).toBeUndefined();
  });

  it("gives a checkpoint's values by its id from the sources it remembered, only when it keeps them all", () => {
    const cache = new ValueCache();
    const other = 'c2/~CCCCCCCCCCCCCCCCCCCCCC';
    cache.keep(scope, '', 'a', source, typed('a'));
    cache.rememberCheckpoint(scope, '', 'c2', { a: source, b: other });
    expect(cache.valuesOf(scope, '', 'c2')).toBeUndefined();
    cache.keep(scope, '', 'b', other, typed('b'));
    expect(cache.valuesOf(scope, '', 'c2')).toEqual({ a: typed('a'), b: typed('b') });
    expect(cache.valuesOf(scope, '', 'c3')).toBeUndefined();
  });
});
