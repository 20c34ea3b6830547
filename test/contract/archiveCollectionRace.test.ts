import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

import { plainArchiveStorage } from '../../shared/archive/sealedArchive';
import { SessionArchive } from '../../shared/archive/sessionArchive';
import { noTransactionalAuditLog } from '../../shared/audit/pending';
import type { PruneReport } from '../../shared/jobs/retentionPrune';
import { MissingObjectsError } from '../../shared/protocol/errors';
import type { ObjectInfo } from '../../shared/storage/immutableObjectStore';
import { ObservedObjectStore, splitFile } from '../support/archiveTestKit';
import { azurite } from '../support/azurite';
import { fileBytes, publishFile, restored } from '../support/retentionSeed';
import { type Backend, createRetentionWorld, type RetentionWorld, silent } from '../support/retentionWorld';

/**
 * A checkpoint publish relies on objects stored long ago (an upload of bytes stored already keeps
 * their old storage time), while a prune that read the session's manifests before the publish's
 * manifest existed deletes what no kept manifest references. The publish touches such objects
 * before it writes its manifest (docs/archives.md), so the prune's conditional delete leaves them.
 *
 * The storage's clock cannot be moved (on Blob, Last-Modified is Azurite's), so "long ago" is made
 * by moving the instances' clocks (the archive's, the prune's, performance.now) on by the grace,
 * less 1.5 s, once the objects are more than 2 s old: untouched, they are older than the grace to
 * the prune; touched now, they are not (Blob keeps times to the second).
 */

const HOUR = 3_600_000;
const T = 'tenant-a';

/** A promise with its resolver. */
function signal(): { promise: Promise<void>; resolve: () => void } {
  let resolve = () => {};
  const promise = new Promise<void>((done) => (resolve = done));
  return { promise, resolve };
}

describe.each<Backend>(['local', 'blob'])(
  'a checkpoint publish racing a prune on the %s backend',
  (backend) => {
    let world: RetentionWorld;
    /** How far the instances' clocks are moved on. */
    let shift = 0;
    let objects: ObservedObjectStore;
    let archive: SessionArchive;

    beforeEach(async () => {
      world = await createRetentionWorld(backend, azurite());
      shift = 0;
      const real = performance.now.bind(performance);
      vi.spyOn(performance, 'now').mockImplementation(() => real() + shift);
      objects = new ObservedObjectStore(world.sessionObjects);
      archive = new SessionArchive(
        plainArchiveStorage(objects, world.sessionIndex),
        noTransactionalAuditLog,
        () => Date.now() + shift,
      );
    });
    afterEach(async () => {
      vi.restoreAllMocks();
      await world.destroy();
    });

    /** Waits until `key` was stored more than 2 s ago, then moves the clocks on by the grace less 1.5 s. */
    async function ageBeyondTheGrace(key: string): Promise<void> {
      const storedAt = (await world.sessionObjects.head(key))?.storedAt.getTime() ?? NaN;
      while (Date.now() < storedAt + 2050) await new Promise((resolve) => setTimeout(resolve, 50));
      shift = HOUR - 1500;
    }

    it('objects the prune listed as old and the publish touched before the prune deletes them stay: the checkpoint restores', async () => {
      objects.resetCounts();
      await publishFile(archive, T, 's', 'c1', null, fileBytes(70_000, 'one'));
      // Objects this instance stored just now are vouched for: nothing is checked or touched.
      expect(objects.calls.head + objects.calls.list + objects.calls.touch).toBe(0);
      // c2's objects are uploaded, but its publish fails (the client goes away) ...
      const { objects: parts, file } = splitFile('events.jsonl', fileBytes(200_000, 'two'), 'g2', 'c2');
      for (const [key, bytes] of parts) await archive.putObject(T, 's', key, bytes);
      // ... and retries an hour later: the same objects again store nothing and stay old.
      await ageBeyondTheGrace('s/blocks/g2/0');
      for (const [key, bytes] of parts) {
        expect(await archive.putObject(T, 's', key, bytes)).toEqual({ created: false });
      }

      // The prune lists the session (c2's objects: old, referenced by no kept manifest), then the
      // publish checks and touches them, then the prune deletes, then the publish stores its manifest.
      const listed = signal();
      const touched = signal();
      let prune: Promise<PruneReport> | undefined;
      const startPrune = () =>
        (prune ??= world
          .pruner({
            graceMs: HOUR,
            fullPassEveryMs: 0,
            now: () => Date.now() + shift,
            beforeObjectDelete: async () => {
              listed.resolve();
              await touched.promise;
            },
          })
          .run(silent));
      const touch = objects.touch.bind(objects);
      vi.spyOn(objects, 'touch').mockImplementation(async (key): Promise<ObjectInfo | null> => {
        void startPrune();
        await listed.promise;
        return touch(key);
      });
      const put = objects.put.bind(objects);
      vi.spyOn(objects, 'put').mockImplementation(async (key, bytes) => {
        if (key === 's/checkpoints/c2') {
          touched.resolve();
          // Without touches the prune starts only here: it lists and deletes before the manifest.
          await startPrune();
        }
        return put(key, bytes);
      });

      expect(
        await archive.publishCheckpoint(T, 's', {
          checkpointId: 'c2',
          parent: 'c1',
          files: [file],
          data: null,
        }),
      ).toEqual({ checkpointId: 'c2', latest: 'c2' });
      const report = await prune;
      expect(report?.tenants.find((entry) => entry.tenant === T)?.objectsDeleted).toBe(0);
      // Every object of c2 (3 blocks and a tail) was touched once.
      expect(objects.calls.touch).toBe(parts.length);
      expect(await restored(archive, T, 's')).toEqual(fileBytes(200_000, 'two'));
    });

    it('an object the prune deletes before the publish touches it is missing: 422, no manifest', async () => {
      await publishFile(archive, T, 's', 'c1', null, fileBytes(70_000, 'one'));
      const { objects: parts, file } = splitFile('events.jsonl', fileBytes(200_000, 'two'), 'g2', 'c2');
      for (const [key, bytes] of parts) await archive.putObject(T, 's', key, bytes);
      await ageBeyondTheGrace('s/blocks/g2/0');
      for (const [key, bytes] of parts) await archive.putObject(T, 's', key, bytes);
      // The prune runs whole between the publish's check and its first touch.
      const touch = objects.touch.bind(objects);
      vi.spyOn(objects, 'touch').mockImplementationOnce(async (key) => {
        await world.pruner({ graceMs: HOUR, fullPassEveryMs: 0, now: () => Date.now() + shift }).run(silent);
        return touch(key);
      });
      await expect(
        archive.publishCheckpoint(T, 's', { checkpointId: 'c2', parent: 'c1', files: [file], data: null }),
      ).rejects.toBeInstanceOf(MissingObjectsError);
      expect(await world.sessionObjects.head('s/checkpoints/c2')).toBeNull();
      expect(await restored(archive, T, 's')).toEqual(fileBytes(70_000, 'one'));
    });
  },
);
