import { randomBytes } from 'node:crypto';

import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

import { CairnError, StorageUnavailableError } from '../../shared/protocol/errors';
import {
  idIndexKey,
  manifestKey,
  parentKey,
  signatureKey,
} from '../../shared/protocol/snapshots/identifiers';
import { emptyCounts, PruneBudget } from '../../shared/retention/budget';
import {
  collectSnapshotGarbage,
  readSnapshots,
  unreferencedSnapshotObjects,
} from '../../shared/snapshots/snapshotRetention';
import { TrustedSnapshotKeys } from '../../shared/snapshots/trustedKeys';
import { GRACE_MS, WorkspaceSnapshots } from '../../shared/snapshots/workspaceSnapshots';
import type { ImmutableObjectStore } from '../../shared/storage/immutableObjectStore';
import { LocalKeyValueStoreFactory } from '../../shared/storage/local/localKeyValueStore';
import { HookedObjectStore, type PutHook, storeBackends } from '../support/archiveTestKit';
import { azurite } from '../support/azurite';
import { tempDir } from '../support/cleanup';
import { buildSnapshot, newKeyPair } from '../support/snapshotTestKit';

/**
 * A publish stores the id entry, the parent record and the signature before its manifest; the
 * daily prune collects such objects once no manifest names them and they are older than the grace
 * (shared/snapshots/snapshotRetention.ts). A publish retried long after an attempt that stopped
 * before its manifest finds them stored already (`created: false`, their old storage time): it
 * must touch them (putKept), or a prune between those puts and the manifest's deletes them, and
 * the acknowledged snapshot has no signature (not readable) and no id entry (not found by id).
 *
 * As in snapshotCollectionRace.test.ts, the storage's clock cannot be moved (on Blob it is
 * Azurite's), so "long ago" is made by moving the instances' clocks (the publisher's `now`,
 * performance.now, the prune's `now`) on by the grace less 1.5 s, after waiting until the
 * orphans are more than 2 s old: untouched, they are older than the grace to the prune; touched
 * now, they are not (Blob keeps times to the second).
 */
describe.each(storeBackends(() => azurite().blobEndpoint))(
  'a snapshot publish retried after the grace, racing the prune ($name)',
  (backend) => {
    let inner: ImmutableObjectStore;
    let destroy: () => Promise<void>;
    /** How far the instances' clocks are moved on. */
    let shift = 0;

    beforeEach(async () => {
      shift = 0;
      const real = performance.now.bind(performance);
      vi.spyOn(performance, 'now').mockImplementation(() => real() + shift);
      const created = await backend.create();
      inner = created.store;
      destroy = created.destroy;
    });
    afterEach(async () => {
      vi.restoreAllMocks();
      await destroy();
    });

    /** The real collection of the prune's snapshot part, with the prune's clock moved on as the others. */
    async function prune(): Promise<number> {
      const counts = emptyCounts();
      const complete = await collectSnapshotGarbage({
        store: inner,
        graceMs: GRACE_MS,
        now: Date.now() + shift,
        budget: PruneBudget.of(1000, 60_000),
        counts,
      });
      expect(complete).toBe(true);
      return counts.objectsDeleted;
    }

    it('an acknowledged retry keeps its signature, parent record and id entry', async () => {
      const hook: PutHook = { matches: (key) => key.endsWith('/manifest.json'), before: null };
      const store = new HookedObjectStore(inner, hook);
      const keys = new TrustedSnapshotKeys(
        new Map(),
        new LocalKeyValueStoreFactory(tempDir('kv'), 1024 * 1024),
      );
      const snapshots = new WorkspaceSnapshots({ forTenant: () => store }, keys, {
        now: () => new Date(Date.now() + shift),
      });
      const built = buildSnapshot(
        'w1',
        [{ path: 'a.bin', bytes: randomBytes(3000) }],
        newKeyPair().privateKey,
      );
      for (const [sha256, part, bytes] of built.parts) {
        await snapshots.putPart('alpha', 'w1', sha256, String(part), bytes);
      }
      const publish = () =>
        snapshots.publish('alpha', 'w1', {
          manifest: built.manifest,
          signature: built.signature,
          parent: null,
          allowExternalSymlinks: false,
        });
      const orphans = [idIndexKey(built.id), parentKey('w1', built.id), signatureKey('w1', built.id)];

      // 1. The first attempt stores the id entry, the parent record and the signature, then fails
      // at its manifest's put.
      hook.before = () => Promise.reject(new StorageUnavailableError('injected fault: the manifest put'));
      await expect(publish()).rejects.toThrow(/injected fault/);
      expect(await inner.head(manifestKey('w1', built.id))).toBeNull();
      for (const key of orphans) expect(await inner.head(key)).not.toBeNull();

      // 2. Every clock moves past the grace: the prune would now collect those orphans.
      const storedAt = Math.max(
        ...(await Promise.all(
          orphans.map(async (key) => (await inner.head(key))?.storedAt.getTime() ?? NaN),
        )),
      );
      while (Date.now() < storedAt + 2050) await new Promise((resolve) => setTimeout(resolve, 50));
      shift = GRACE_MS - 1500;
      const cutoff = Date.now() + shift - GRACE_MS;
      const collectable = unreferencedSnapshotObjects(await readSnapshots(inner))
        .filter((info) => info.storedAt.getTime() < cutoff)
        .map((info) => info.key);
      expect(collectable).toEqual(expect.arrayContaining(orphans));

      // 3. The same publish again, while the prune runs just before its manifest's put.
      let pruned: number | undefined;
      hook.before = async () => {
        pruned = await prune();
      };
      let acknowledged: { id: string; latest: string } | null = null;
      try {
        acknowledged = await publish();
      } catch (error) {
        // Refused: acceptable, as long as nothing was acknowledged (checked below).
        if (!(error instanceof CairnError)) throw error;
      }
      expect(pruned).toBeDefined();

      // 4. Refused (no snapshot is acknowledged) or acknowledged and whole.
      if (acknowledged === null) {
        await expect(snapshots.read('alpha', 'w1', 'latest')).rejects.toThrow(/has no snapshot/);
      } else {
        expect(acknowledged).toEqual({ id: built.id, latest: built.id });
        const read = await snapshots.read('alpha', 'w1', 'latest');
        expect(read.manifest.equals(built.manifest)).toBe(true);
        expect(read.signature.equals(built.signature)).toBe(true);
        const found = await snapshots.find('alpha', built.id);
        expect(found.workspaceId).toBe('w1');
        const stored = await Promise.all(orphans.map(async (key) => [key, (await inner.head(key)) !== null]));
        expect(stored).toEqual(orphans.map((key) => [key, true]));
        for (const [sha256, part, bytes] of built.parts) {
          expect((await snapshots.getPart('alpha', 'w1', sha256, String(part))).equals(bytes)).toBe(true);
        }
      }
    });
  },
);
