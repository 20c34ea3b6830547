import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import { azurite } from '../support/azurite';
import { fileBytes, publishFile, restored } from '../support/retentionSeed';
import { type Backend, createRetentionWorld, type RetentionWorld, silent } from '../support/retentionWorld';

/**
 * A session whose chain of checkpoints is broken in the middle (a manifest that a kept checkpoint
 * names as its parent is gone: damage outside Cairn, since retention never removes a manifest of
 * the chain). What the older checkpoints reference cannot be told from garbage, as when `latest`
 * dangles: the prune keeps every manifest of the session, and verify reports the damage.
 */

const HOUR = 3_600_000;
const T = 'tenant-a';

describe.each<Backend>(['local', 'blob'])(
  'a broken chain of session checkpoints on the %s backend',
  (backend) => {
    let world: RetentionWorld;

    beforeEach(async () => {
      world = await createRetentionWorld(backend, azurite());
      await publishFile(world.archive, T, 's', 'c1', null, fileBytes(70_000, 'one'));
      await publishFile(world.archive, T, 's', 'c2', 'c1', fileBytes(140_000, 'one'));
      await publishFile(world.archive, T, 's', 'c3', 'c2', fileBytes(210_000, 'one'));
      // Damage: c2's manifest is gone. c1 is still whole.
      await world.sessionObjects.delete('s/checkpoints/c2');
    });
    afterEach(async () => world.destroy());

    it('verify reports the missing manifest of the chain instead of answering ok', async () => {
      const report = await world.verifier({ graceMs: HOUR }).verifyTenant(T, { readData: true });
      expect(report.findings.map(({ domain, kind, key }) => [domain, kind, key])).toContainEqual([
        'sessions',
        'missing',
        's/checkpoints/c2',
      ]);
      expect(report.ok).toBe(false);
    });

    it('the prune keeps every manifest of the session: the checkpoints before the gap stay restorable', async () => {
      await world.pruner({ fullPassEveryMs: 0 }).run(silent);
      expect(await restored(world.archive, T, 's', 'c1')).toEqual(fileBytes(70_000, 'one'));
      expect(await restored(world.archive, T, 's')).toEqual(fileBytes(210_000, 'one'));
    });
  },
);
