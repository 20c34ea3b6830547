import { rm } from 'node:fs/promises';

import { expect, it } from 'vitest';

import {
  claimEmailWindow,
  initializeEmailCursor,
  readEmailCursor,
} from '../../shared/coordination/emailCursor';
import { planEmailClaim } from '../../shared/coordination/emailWindowPoll';
import { LocalKeyValueStoreFactory } from '../../shared/storage/local/localKeyValueStore';
import { tempDir } from '../support/cleanup';

it('a claim never moves the email cursor backwards (windows would overlap)', async () => {
  const dir = tempDir('kv');
  try {
    const store = new LocalKeyValueStoreFactory(dir, 1 << 20).forTenant('t1');
    await initializeEmailCursor(store, '2026-11-29T21:16:51.123Z');
    const read = await readEmailCursor(store);
    if (read.outcome !== 'present') throw new Error('no cursor');
    const result = await claimEmailWindow(store, {
      newCursor: '2026-11-29T20:00:00.000Z',
      etag: read.etag,
      claimId: 'c1',
      priorClaims: [],
    });
    const after = await readEmailCursor(store);
    if (after.outcome !== 'present') throw new Error('no cursor');
    const plan = planEmailClaim(after, new Date('2026-11-29T21:17:51.123Z'), 'timer');
    // Refused, nothing written: the timer's next window starts where the claimed one ended.
    expect({ result, nextFrom: plan?.owned[0]?.from, recentClaims: after.recentClaims }).toEqual({
      result: 'backwards',
      nextFrom: '2026-11-29T21:16:51.123Z',
      recentClaims: [],
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
