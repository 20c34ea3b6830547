import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import { azurite } from '../support/azurite';
import { json, put, putLine } from '../support/retentionSeed';
import { type Backend, createRetentionWorld, type RetentionWorld, silent } from '../support/retentionWorld';

/**
 * A checkpoint id stored again, with other content, once retention removed its record
 * (docs/retention.md allows it): the checkpoints that named the removed record's values keep
 * reading those values (retention stored them apart first), never the new record's.
 */

const T = 'tenant-i';

describe.each<Backend>(['local', 'blob'])('a checkpoint id stored again on the %s backend', (backend) => {
  let world: RetentionWorld;

  beforeEach(async () => {
    world = await createRetentionWorld(backend, azurite());
  });
  afterEach(async () => world.destroy());

  it('the kept checkpoints read the value the removed record held, not the one its id holds now', async () => {
    // c001 … c005; `static` is c001's value ({"static":true}), inherited by all.
    await putLine(world.threads, T, 't', 5);
    await world.policies.set(T, { keepCheckpoints: 2 });
    await world.pruner().run(silent);
    // c001's record is gone; its `static` value is stored apart, for c004 and c005.
    // The id c001 is stored again, another root with another `static`.
    await world.threads.putCheckpoint(T, 't', {
      ...put('c001', null, { version: 50 }),
      values: { messages: json('again'), static: json({ static: 'other' }) },
    });

    const reader = world.anotherThreadStore();
    const c005 = await reader.getCheckpoint(T, 't', '', 'c005');
    expect(c005.values['static']?.data.toString()).toBe(JSON.stringify({ static: true }));
    const again = await reader.getCheckpoint(T, 't', '', 'c001');
    expect(again.values['static']?.data.toString()).toBe(JSON.stringify({ static: 'other' }));
    // Verify tells the two apart the same way: nothing is damaged.
    const report = await world.verifier({ graceMs: 3_600_000 }).verifyTenant(T, { readData: true });
    expect(report.findings).toEqual([]);
  });
});
