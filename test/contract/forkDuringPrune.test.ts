import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import { ConflictError } from '../../shared/protocol/errors';
import { keysOf } from '../../shared/threads/layout';
import { decodeThreadRecord } from '../../shared/threads/records';
import type { CheckpointPut } from '../../shared/threads/threadStore';
import { azurite } from '../support/azurite';
import { json, putLine } from '../support/retentionSeed';
import { type Backend, createRetentionWorld, type RetentionWorld, silent } from '../support/retentionWorld';

/**
 * A fork (a put whose parent is not the head) racing the prune that removes its parent: the put
 * checks, after storing its own record, that the parent is still stored, so that either it is
 * refused (409) or the prune, which removes the parent later, keeps every value the fork inherits
 * (docs/retention.md). Here the fork lands in the last moment: after the prune listed the records
 * and decided which values to keep, before it deletes the parent's record.
 */

const T = 'tenant-f';

describe.each<Backend>(['local', 'blob'])('a fork racing the prune on the %s backend', (backend) => {
  let world: RetentionWorld;

  beforeEach(async () => {
    world = await createRetentionWorld(backend, azurite());
  });
  afterEach(async () => world.destroy());

  it('a fork that commits before its parent is removed keeps the values it inherits from it', async () => {
    // c001 … c005, each with its own `messages` (c002's is version 3); keep the last two.
    await putLine(world.threads, T, 't', 5);
    await world.policies.set(T, { keepCheckpoints: 2 });
    const thread = decodeThreadRecord((await world.threadSpace(T).read('t/t'))!.value, 't');
    const parentKey = keysOf(thread).record('c002', '');
    // The fork from c002 changes only `other`: `messages` is c002's, inherited.
    const fork: CheckpointPut = {
      checkpointId: 'x001',
      ns: '',
      parent: 'c002',
      v: 4,
      checkpoint: json({ id: 'x001' }),
      metadata: { step: 9 },
      channelVersions: { static: 1, messages: 3, other: 1 },
      values: { other: json('the fork') },
    };

    let outcome: 'stored' | 'refused' | null = null;
    const beforeDelete = async (key: string) => {
      if (key !== parentKey || outcome !== null) return;
      try {
        await world.anotherThreadStore().putCheckpoint(T, 't', fork);
        outcome = 'stored';
      } catch (error) {
        if (!(error instanceof ConflictError)) throw error;
        outcome = 'refused';
      }
    };
    await world.pruner({ fullPassEveryMs: 0, beforeDelete }).run(silent);
    expect(outcome).toBe('stored');

    // The fork committed: it is the head, and reads whole (on an instance that keeps no value).
    const head = await world.anotherThreadStore().getCheckpoint(T, 't', '');
    expect(head.checkpointId).toBe('x001');
    expect(head.values['messages']?.data.toString()).toContain('"checkpointId":"c002"');
    expect(head.values['other']?.data.toString()).toBe(JSON.stringify('the fork'));
  });
});
