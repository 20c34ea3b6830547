import { randomBytes, randomUUID } from 'node:crypto';
import { rm } from 'node:fs/promises';

import { BlobServiceClient, StorageSharedKeyCredential } from '@azure/storage-blob';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import type { SealingCodec } from '../../shared/crypto/encryption';
import { namespaceDigest } from '../../shared/memory/layout';
import { MemoryFacts } from '../../shared/memory/memory';
import { memoryRewrapTarget } from '../../shared/memory/memoryRewrap';
import type { MemoryStore } from '../../shared/memory/memoryStore';
import type { MemorySnapshotStore } from '../../shared/memory/searchSnapshot';
import { StorageUnavailableError } from '../../shared/protocol/errors';
import { BlobMemorySnapshots } from '../../shared/storage/azure/blobMemorySnapshots';
import { TableMemoryStore } from '../../shared/storage/azure/tableMemoryStore';
import { LocalMemorySnapshots } from '../../shared/storage/local/localMemorySnapshots';
import { LocalMemoryStore } from '../../shared/storage/local/localMemoryStore';
import { azurite } from '../support/azurite';
import { tempDir } from '../support/cleanup';
import { DelegatingMemoryStore } from '../support/delegatingMemoryStore';
import { azuriteTable } from '../support/tables';
import { STORAGE_TIMEOUT_MS } from '../support/timeouts';
import { sealingCodec } from './memoryStore.contract';

/**
 * Search snapshots (docs/memory.md, "Snapshots"), on each backend: a fresh instance restores a
 * searched subtree from its snapshot instead of reading the rows, and still sees exactly what the
 * change feed says changed since; a snapshot that is damaged, too old, unreadable, sealed for
 * another place or another tenant's is never used (the rows are read); forgetting deletes the
 * snapshots that may hold the fact, and the rewrap drops them.
 */

const A = { tenant: 'snap-tenant-a' };
const B = { tenant: 'snap-tenant-b' };

interface Backend {
  readonly store: MemoryStore;
  /** Another instance's store over the same storage. */
  readonly another: () => MemoryStore;
  readonly snapshots: MemorySnapshotStore;
  destroy(): Promise<void>;
}

const backends: { name: string; create(): Promise<Backend> }[] = [
  {
    name: 'local filesystem',
    async create() {
      const dir = tempDir('memory-snapshots');
      return {
        store: new LocalMemoryStore(dir),
        // The local feed lives in the process's store object: another instance of one process.
        another: () => new LocalMemoryStore(dir),
        snapshots: new LocalMemorySnapshots(dir),
        destroy: () => rm(dir, { recursive: true, force: true }),
      };
    },
  },
  {
    name: 'Azure Table Storage and Blob (Azurite)',
    async create() {
      const table = azuriteTable(azurite().tableEndpoint);
      const service = new BlobServiceClient(
        azurite().blobEndpoint,
        new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY),
      );
      const container = service.getContainerClient(`m${randomUUID().replaceAll('-', '').slice(0, 20)}`);
      return {
        store: new TableMemoryStore(table, STORAGE_TIMEOUT_MS),
        another: () =>
          new TableMemoryStore(azuriteTable(azurite().tableEndpoint, table.tableName), STORAGE_TIMEOUT_MS),
        snapshots: new BlobMemorySnapshots(container, STORAGE_TIMEOUT_MS),
        async destroy() {
          await table.deleteTable();
          await container.deleteIfExists();
        },
      };
    },
  },
];

/** Counts the scans (cold reads of rows) of the memory facts over it. */
class ScanCounting extends DelegatingMemoryStore {
  scans = 0;
  override scan(...args: Parameters<MemoryStore['scan']>) {
    this.scans++;
    return super.scan(...args);
  }
}

/** A snapshot store whose reads fail as a storage fault does. */
class FailingReads implements MemorySnapshotStore {
  constructor(private readonly inner: MemorySnapshotStore) {}
  read(): Promise<Buffer | null> {
    return Promise.reject(new StorageUnavailableError('injected'));
  }
  write(...args: Parameters<MemorySnapshotStore['write']>) {
    return this.inner.write(...args);
  }
  delete(...args: Parameters<MemorySnapshotStore['delete']>) {
    return this.inner.delete(...args);
  }
  list(...args: Parameters<MemorySnapshotStore['list']>) {
    return this.inner.list(...args);
  }
}

const vector = (x: number) => [x, 1 - x, 0, 0];

for (const backend of backends) {
  describe(`memory search snapshots: ${backend.name}`, () => {
    let world: Backend;
    let clock: number;
    beforeEach(async () => {
      world = await backend.create();
      clock = Date.UTC(2026, 0, 1);
    });
    afterEach(async () => world.destroy());

    const facts = (
      store: MemoryStore,
      options: { snapshots?: MemorySnapshotStore | null; codec?: SealingCodec; minFacts?: number } = {},
    ) =>
      new MemoryFacts({
        store,
        now: () => clock,
        // Snapshots of these small subtrees are stored (by default a subtree needs 1,000 facts).
        snapshotMinFacts: options.minFacts ?? 1,
        ...(options.snapshots === null ? {} : { snapshots: options.snapshots ?? world.snapshots }),
        ...(options.codec === undefined ? {} : { codec: options.codec }),
      });
    /** The facts a search finds, once the snapshot it may have started to write is stored. */
    const keys = async (memory: MemoryFacts, namespace: string, tenant = A) => {
      const found = await memory.search(tenant, { namespace, limit: 100 });
      await memory.snapshotsSaved();
      return found.items
        .map((item) => `${item.namespace.join('/')}:${item.key}=${JSON.stringify(item.value)}`)
        .sort();
    };

    /** Writes three facts under `notes`, searches them on one instance and waits for its snapshot. */
    const searchedOnce = async (options: { codec?: SealingCodec } = {}) => {
      const writer = facts(world.store, { ...options, snapshots: null });
      await writer.remember(A, 'notes', 'one', { text: 'green tea' }, { vectors: { text: vector(1) } });
      await writer.remember(A, 'notes/x', 'two', { text: 'black coffee' }, { vectors: { text: vector(0) } });
      await writer.remember(A, 'notes', 'three', { text: 'white tea' });
      const first = facts(world.another(), options);
      expect(await keys(first, 'notes')).toHaveLength(3);
      await first.snapshotsSaved();
      expect((await world.snapshots.list(A.tenant)).map((each) => each.digest)).toEqual([
        namespaceDigest('notes'),
      ]);
      return writer;
    };

    it('stores no snapshot of a subtree smaller than the minimum, and still answers its search', async () => {
      const writer = facts(world.store, { snapshots: null });
      await writer.remember(A, 'small', 'one', { text: 'green tea' });
      await writer.remember(A, 'small', 'two', { text: 'white tea' });
      const reader = facts(world.another(), { minFacts: 3 });
      expect(await keys(reader, 'small')).toHaveLength(2);
      expect(await world.snapshots.list(A.tenant)).toEqual([]);
      await writer.remember(A, 'small', 'three', { text: 'black tea' });
      const third = facts(world.another(), { minFacts: 3 });
      expect(await keys(third, 'small')).toHaveLength(3);
      expect((await world.snapshots.list(A.tenant)).map((each) => each.digest)).toEqual([
        namespaceDigest('small'),
      ]);
    });

    it('restores a fresh instance from the snapshot, caught up with what changed after it', async () => {
      const writer = await searchedOnce();
      // Changes after the snapshot, by an instance that keeps no snapshots (the feed still has them).
      clock += 10;
      await writer.remember(A, 'notes', 'late', { text: 'written after the snapshot' });
      await writer.remember(A, 'notes', 'one', { text: 'oolong tea' }, { vectors: { text: vector(0.5) } });
      await writer.forget(A, 'notes/x', 'two');

      const counting = new ScanCounting(world.another());
      const fresh = facts(counting);
      expect(await keys(fresh, 'notes')).toEqual([
        'notes:late={"text":"written after the snapshot"}',
        'notes:one={"text":"oolong tea"}',
        'notes:three={"text":"white tea"}',
      ]);
      expect(counting.scans).toBe(0);
      // The vectors came from the snapshot (three) and from the catch-up (one).
      const near = await fresh.search(A, { namespace: 'notes', vector: vector(0.5), limit: 1 });
      expect(near.items.map((item) => [item.key, item.vectorFields])).toEqual([['one', ['text']]]);
      expect(near.items[0]?.score).toBeCloseTo(1, 5);
      const words = await fresh.search(A, { namespace: 'notes', text: 'tea' });
      expect(words.items.map((item) => item.key).sort()).toEqual(['one', 'three']);
      expect(counting.scans).toBe(0);
    });

    it('reads the rows when the snapshot is damaged, too old, or cannot be read', async () => {
      await searchedOnce();
      const expected = [
        'notes/x:two={"text":"black coffee"}',
        'notes:one={"text":"green tea"}',
        'notes:three={"text":"white tea"}',
      ];
      const digest = namespaceDigest('notes');
      const stored = (await world.snapshots.read(A.tenant, digest, Infinity)) as Buffer;

      // Unreadable (a storage fault): the rows, and the same answer.
      const failing = new ScanCounting(world.another());
      expect(await keys(facts(failing, { snapshots: new FailingReads(world.snapshots) }), 'notes')).toEqual(
        expected,
      );
      expect(failing.scans).toBeGreaterThan(0);

      // Older than the search cache's maximum age (ten minutes): not used.
      clock += 11 * 60 * 1000;
      const aged = new ScanCounting(world.another());
      expect(await keys(facts(aged), 'notes')).toEqual(expected);
      expect(aged.scans).toBeGreaterThan(0);
      clock -= 11 * 60 * 1000;

      // One byte changed, or cut short: not used.
      for (const damaged of [
        Buffer.concat([stored.subarray(0, 100), Buffer.from([(stored[100] ?? 0) ^ 1]), stored.subarray(101)]),
        stored.subarray(0, stored.length - 4),
      ]) {
        await world.snapshots.write(A.tenant, digest, damaged);
        const counting = new ScanCounting(world.another());
        expect(await keys(facts(counting), 'notes')).toEqual(expected);
        expect(counting.scans).toBeGreaterThan(0);
      }

      // The intact one again: used.
      await world.snapshots.write(A.tenant, digest, stored);
      const restored = new ScanCounting(world.another());
      expect(await keys(facts(restored), 'notes')).toEqual(expected);
      expect(restored.scans).toBe(0);
    });

    it("never uses another tenant's snapshot, even stored in its place", async () => {
      await searchedOnce();
      const digest = namespaceDigest('notes');
      const stolen = (await world.snapshots.read(A.tenant, digest, Infinity)) as Buffer;
      await facts(world.store, { snapshots: null }).remember(B, 'notes', 'own', 'b');
      await world.snapshots.write(B.tenant, digest, stolen);
      const counting = new ScanCounting(world.another());
      expect(await keys(facts(counting), 'notes', B)).toEqual(['notes:own="b"']);
      expect(counting.scans).toBeGreaterThan(0);
    });

    it('seals the snapshot: no plaintext in storage, and bound to its tenant', async () => {
      const codec = await sealingCodec([{ id: 'k1', key: randomBytes(32) }]);
      await searchedOnce({ codec });
      const digest = namespaceDigest('notes');
      const stored = (await world.snapshots.read(A.tenant, digest, Infinity)) as Buffer;
      for (const plain of ['green tea', 'black coffee', 'white tea', 'notes/x', 'CMSNAP1']) {
        expect(stored.includes(Buffer.from(plain))).toBe(false);
      }
      const restored = new ScanCounting(world.another());
      expect(await keys(facts(restored, { codec }), 'notes')).toHaveLength(3);
      expect(restored.scans).toBe(0);

      // Copied to another tenant: it does not open there.
      await facts(world.store, { snapshots: null, codec }).remember(B, 'notes', 'own', 'b');
      await world.snapshots.write(B.tenant, digest, stored);
      const other = new ScanCounting(world.another());
      expect(await keys(facts(other, { codec }), 'notes', B)).toEqual(['notes:own="b"']);
      expect(other.scans).toBeGreaterThan(0);
    });

    it('deletes the snapshots that may hold a fact when it is forgotten, and the rewrap drops them all', async () => {
      await searchedOnce();
      const memory = facts(world.store);
      await memory.forget(A, 'notes/x', 'two');
      expect(await world.snapshots.list(A.tenant)).toEqual([]);

      // Searched again, then a namespace below it forgotten whole.
      expect(await keys(facts(world.another()), 'notes')).toHaveLength(2);
      const again = facts(world.another());
      expect(await keys(again, 'notes')).toHaveLength(2);
      await again.snapshotsSaved();
      expect(await world.snapshots.list(A.tenant)).toHaveLength(1);
      await memory.forgetAll(A, 'notes');
      expect(await world.snapshots.list(A.tenant)).toEqual([]);

      await memory.remember(A, 'notes', 'back', 'again');
      const third = facts(world.another());
      expect(await keys(third, '')).toEqual(['notes:back="again"']);
      await third.snapshotsSaved();
      expect((await world.snapshots.list(A.tenant)).map((each) => each.digest)).toEqual(['']);
      const codec = await sealingCodec([{ id: 'k1', key: randomBytes(32) }]);
      const target = memoryRewrapTarget(world.store, codec, (tenant) => memory.dropAllSnapshots(tenant));
      await target.rewrapPage(A.tenant, null, 100);
      expect(await world.snapshots.list(A.tenant)).toEqual([]);
    });
  });
}
