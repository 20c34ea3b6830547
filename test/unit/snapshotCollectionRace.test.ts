import { randomBytes } from 'node:crypto';

import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

import { TrustedSnapshotKeys } from '../../shared/snapshots/trustedKeys';
import { GRACE_MS, WorkspaceSnapshots } from '../../shared/snapshots/workspaceSnapshots';
import type { ImmutableObjectStore } from '../../shared/storage/immutableObjectStore';
import { LocalKeyValueStoreFactory } from '../../shared/storage/local/localKeyValueStore';
import { HookedObjectStore, type PutHook, storeBackends } from '../support/archiveTestKit';
import { azurite } from '../support/azurite';
import { tempDir } from '../support/cleanup';
import { buildSnapshot, type BuiltSnapshot, newKeyPair } from '../support/snapshotTestKit';

/**
 * A part stored long ago is found by a publish's check, while a delete of the snapshot that
 * referenced it collects what no stored manifest references. The publish must touch such a part
 * before it writes (docs/snapshots.md), so that the delete leaves it.
 *
 * The storage's clock cannot be moved (on Blob, Last-Modified is Azurite's), so "long ago" is made
 * by moving the instances' clocks (Date and performance.now) on by the grace, less 1.5 s, after
 * waiting until the part is more than 2 s old: the untouched part is then older than the grace to
 * the delete, and a part touched now is not (Blob keeps times to the second).
 */
describe.each(storeBackends(() => azurite().blobEndpoint))(
  'snapshot publish racing a delete that collects shared parts ($name)',
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

    function world() {
      const hook: PutHook = { matches: (key) => key.startsWith('ids/'), before: null };
      const store = new HookedObjectStore(inner, hook);
      const stores = { forTenant: () => store };
      const keys = new TrustedSnapshotKeys(
        new Map(),
        new LocalKeyValueStoreFactory(tempDir('kv'), 1024 * 1024),
      );
      const snapshots = new WorkspaceSnapshots(stores, keys, { now: () => new Date(Date.now() + shift) });
      const upload = async (built: BuiltSnapshot, workspaceId: string) => {
        for (const [sha256, part, bytes] of built.parts) {
          await snapshots.putPart('alpha', workspaceId, sha256, String(part), bytes);
        }
      };
      const publish = (built: BuiltSnapshot, workspaceId: string) =>
        snapshots.publish('alpha', workspaceId, {
          manifest: built.manifest,
          signature: built.signature,
          parent: null,
          allowExternalSymlinks: false,
        });
      return { hook, store, snapshots, upload, publish };
    }

    /** Waits until `key` was stored more than 2 s ago, then moves the clocks on by the grace less 1.5 s. */
    async function ageBeyondTheGrace(key: string): Promise<void> {
      const storedAt = (await inner.head(key))?.storedAt.getTime() ?? NaN;
      while (Date.now() < storedAt + 2050) await new Promise((resolve) => setTimeout(resolve, 50));
      shift = GRACE_MS - 1500;
    }

    it('a published snapshot keeps every part it references', async () => {
      const { hook, store, snapshots, upload, publish } = world();
      const key = newKeyPair();
      const shared = { path: 'shared.bin', bytes: randomBytes(3000) };
      const old = buildSnapshot('w2', [shared], key.privateKey);
      await upload(old, 'w2');
      await publish(old, 'w2');
      const [sharedHash] = old.parts[0]!;
      // The part is stored long before the delete (the grace protects only parts stored recently).
      await ageBeyondTheGrace(`objects/${sharedHash}/0`);

      // w1 publishes a snapshot holding the same file: uploading its part again answers "stored".
      const next = buildSnapshot(
        'w1',
        [shared, { path: 'new.txt', bytes: randomBytes(100) }],
        key.privateKey,
      );
      await upload(next, 'w1');
      // Meanwhile w2's snapshot is deleted, between the publish's check of its parts and its manifest.
      let report: Awaited<ReturnType<WorkspaceSnapshots['delete']>> | undefined;
      hook.before = async () => {
        report = await snapshots.delete('alpha', 'w2', old.id);
      };
      store.resetCounts();
      expect(await publish(next, 'w1')).toEqual({ id: next.id, latest: next.id });
      expect(report).toMatchObject({ objectsDeleted: 0, collectionComplete: true });
      // Only the old part was touched: new.txt's part was stored by this instance just now.
      expect(store.calls.touch).toBe(1);

      // The publish was acknowledged: every part of its snapshot must still be there.
      for (const [sha256, part, bytes] of next.parts) {
        expect((await snapshots.getPart('alpha', 'w1', sha256, String(part))).equals(bytes)).toBe(true);
      }
    });

    it('a part deleted before the publish touches it is missing: 422, nothing written', async () => {
      const { store, snapshots, upload, publish } = world();
      const key = newKeyPair();
      const shared = { path: 'shared.bin', bytes: randomBytes(3000) };
      const old = buildSnapshot('w2', [shared], key.privateKey);
      await upload(old, 'w2');
      await publish(old, 'w2');
      const [sharedHash] = old.parts[0]!;
      await ageBeyondTheGrace(`objects/${sharedHash}/0`);
      const next = buildSnapshot('w1', [shared], key.privateKey);
      await upload(next, 'w1');
      // The delete lands between the publish's check and its touch.
      const touch = store.touch.bind(store);
      vi.spyOn(store, 'touch').mockImplementationOnce(async (name) => {
        await snapshots.delete('alpha', 'w2', old.id);
        return touch(name);
      });
      store.resetCounts();
      await expect(publish(next, 'w1')).rejects.toMatchObject({ missing: [`${sharedHash}/0`] });
      // Nothing written (the delete's own move of w2's latest aside).
      expect(store.calls.put).toBe(0);
      await expect(snapshots.find('alpha', next.id)).rejects.toThrow(/no snapshot/);
      await expect(snapshots.read('alpha', 'w1', 'latest')).rejects.toThrow(/has no snapshot/);
    });

    it('a publish whose parts are young or vouched for touches nothing', async () => {
      const { store, upload, publish } = world();
      const key = newKeyPair();
      const shared = { path: 'shared.bin', bytes: randomBytes(3000) };
      const old = buildSnapshot('w2', [shared], key.privateKey);
      await upload(old, 'w2');
      store.resetCounts();
      await publish(old, 'w2');
      // Vouched for: no request about the part at all.
      expect(store.calls.head + store.calls.list + store.calls.touch).toBe(0);
      // Young, stored by "another instance" (this one forgot it): checked, not touched.
      const next = buildSnapshot('w1', [shared], key.privateKey);
      const other = world();
      store.resetCounts();
      expect(await other.publish(next, 'w1')).toEqual({ id: next.id, latest: next.id });
      expect(other.store.calls.head).toBe(1);
      expect(other.store.calls.touch).toBe(0);
    });
  },
);
