import { describe, expect, it } from 'vitest';

import { KEPT_VALUE_BYTES, ValueCache } from '../../shared/threads/valueCache';

const scope = ValueCache.scopeOf('tenant', 'thread', 'incarnation');
/** A source as records name values: `<checkpoint id>/<digest>`. */
const source = (checkpointId: string) => `${checkpointId}/${'d'.repeat(22)}`;

describe('ValueCache', () => {
  it('keeps a value that is a view of a larger buffer as bytes of its own, so that it holds only what it counts', () => {
    const cache = new ValueCache();
    const record = Buffer.alloc(1024 * 1024, 7);
    const view = record.subarray(1000, 1100);
    cache.keep(scope, '', 'm', source('c1'), { type: 'json', data: view });
    const kept = cache.value(scope, '', 'm', source('c1'));
    expect(kept?.data.equals(view)).toBe(true);
    expect(kept?.data.buffer.byteLength).toBe(100);
    expect(kept?.data.buffer).not.toBe(record.buffer);
  });

  it('keeps at most its byte budget, the least recently used dropped first', () => {
    const cache = new ValueCache();
    const value = (fill: number) => ({ type: 'json', data: Buffer.alloc(256 * 1024, fill) });
    const count = Math.ceil(KEPT_VALUE_BYTES / (256 * 1024)) + 4;
    for (let i = 0; i < count; i++) cache.keep(scope, '', 'm', source(`c${i}`), value(i));
    expect(cache.value(scope, '', 'm', source('c0'))).toBeUndefined();
    expect(cache.value(scope, '', 'm', source(`c${count - 1}`))?.data[0]).toBe((count - 1) & 0xff);
    let kept = 0;
    for (let i = 0; i < count; i++) {
      kept += cache.value(scope, '', 'm', source(`c${i}`))?.data.length ?? 0;
    }
    expect(kept).toBeLessThanOrEqual(KEPT_VALUE_BYTES);
  });
});
