import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

import { MissingObjectsError } from '../../shared/protocol/errors';
import { splitFile } from '../support/archiveTestKit';
import { azurite } from '../support/azurite';
import { fileBytes, publishFile, restored } from '../support/retentionSeed';
import { type Backend, createRetentionWorld, type RetentionWorld, silent } from '../support/retentionWorld';

/**
 * An archive instance publishes without asking the storage about objects it stored itself in the
 * last 45 minutes (docs/archives.md), sound only because retention spares objects younger than an
 * hour. An upload of bytes already stored long ago stores nothing (`created: false`): the object
 * keeps its old storage time, so the prune may collect it, and the instance must not vouch for it.
 */

const HOUR = 3_600_000;
const T = 'tenant-a';

describe.each<Backend>(['local', 'blob'])('archive objects vouched for on the %s backend', (backend) => {
  let world: RetentionWorld;
  /** How far this process's monotonic clock (the archive's) is moved on. */
  let elapsed = 0;

  beforeEach(async () => {
    world = await createRetentionWorld(backend, azurite());
    elapsed = 0;
    const real = performance.now.bind(performance);
    vi.spyOn(performance, 'now').mockImplementation(() => real() + elapsed);
  });
  afterEach(async () => {
    vi.restoreAllMocks();
    await world.destroy();
  });

  it('an upload of bytes stored two hours ago is not vouched for: a prune that collects them meanwhile makes the publish 422, not a checkpoint that cannot be restored', async () => {
    await publishFile(world.archive, T, 's', 'c1', null, fileBytes(70_000, 'one'));
    // c2's objects are uploaded, but its publish fails (the client goes away).
    const { objects, file } = splitFile('events.jsonl', fileBytes(200_000, 'two'), 'g2', 'c2');
    for (const [key, bytes] of objects) await world.archive.putObject(T, 's', key, bytes);

    // Two hours later the client retries: it uploads the same objects again (each 200, same bytes
    // already stored, so their storage time stays two hours back) ...
    elapsed = 2 * HOUR;
    for (const [key, bytes] of objects) {
      expect(await world.archive.putObject(T, 's', key, bytes)).toEqual({ created: false });
    }
    // ... while a prune collects them: no kept manifest references them, and the storage says they
    // are older than the grace.
    const report = await world.pruner({ graceMs: HOUR, now: () => Date.now() + 2 * HOUR }).run(silent);
    expect(report.tenants.find((entry) => entry.tenant === T)?.objectsDeleted).toBe(objects.length);

    // The publish must find them missing; it must not move `latest` to a checkpoint whose bytes
    // are gone.
    await expect(
      world.archive.publishCheckpoint(T, 's', {
        checkpointId: 'c2',
        parent: 'c1',
        files: [file],
        data: null,
      }),
    ).rejects.toBeInstanceOf(MissingObjectsError);
    expect(await restored(world.archive, T, 's')).toEqual(fileBytes(70_000, 'one'));
  });
});
