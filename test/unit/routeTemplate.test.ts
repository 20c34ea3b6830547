import { describe, expect, it } from 'vitest';

import { compareRanks, compileRoute } from '../../dev/host/routeTemplate';

describe('route templates (as the Functions host reads them)', () => {
  it('matches literals case-insensitively and parameters as one non-empty segment', () => {
    const route = compileRoute('sessions/{sid}/checkpoints/{cid}');
    expect(route.match('Sessions/s1/checkpoints/c%202')).toEqual({ sid: 's1', cid: 'c 2' });
    expect(route.match('sessions//checkpoints/c')).toBeNull();
    expect(route.match('sessions/s1/checkpoints')).toBeNull();
    expect(route.match('sessions/s1/checkpoints/c/extra')).toBeNull();
  });

  it('gives a catch-all the rest of the path, decoded segment by segment, possibly empty', () => {
    const route = compileRoute('kv/{*key}');
    expect(route.match('kv/a/b%20c/%2E%2E')).toEqual({ key: 'a/b c/..' });
    expect(route.match('kv')).toEqual({ key: '' });
    expect(route.match('kv/a//b')).toEqual({ key: 'a//b' });
    expect(route.match('kv/%zz')).toEqual({ key: '%zz' });
    expect(route.match('keys')).toBeNull();
  });

  it('supports optional parameters and ignores constraints', () => {
    const route = compileRoute('items/{id:int}/{part?}');
    expect(route.match('items/3')).toEqual({ id: '3' });
    expect(route.match('items/3/x')).toEqual({ id: '3', part: 'x' });
  });

  it('ranks literal routes before parameters and catch-alls last', () => {
    const ranked = ['{*path}', 'kv/{*key}', 'sessions/{sid}', 'sessions/latest', 'health']
      .map(compileRoute)
      .sort((a, b) => compareRanks(a.rank, b.rank))
      .map((route) => route.template);
    expect(ranked).toEqual(['sessions/latest', 'sessions/{sid}', 'health', 'kv/{*key}', '{*path}']);
  });
});
