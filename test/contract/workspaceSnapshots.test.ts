import { randomBytes, randomUUID } from 'node:crypto';
import path from 'node:path';

import { BlobServiceClient, StorageSharedKeyCredential } from '@azure/storage-blob';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import {
  ConflictError,
  InvalidArgumentError,
  MissingObjectsError,
  NotFoundError,
  StorageUnavailableError,
} from '../../shared/protocol/errors';
import { PART_BYTES } from '../../shared/protocol/snapshots/identifiers';
import { TrustedSnapshotKeys } from '../../shared/snapshots/trustedKeys';
import { GRACE_MS, type SnapshotStores, WorkspaceSnapshots } from '../../shared/snapshots/workspaceSnapshots';
import { BlobImmutableObjectStore } from '../../shared/storage/azure/blobImmutableObjectStore';
import type { ImmutableObjectStore } from '../../shared/storage/immutableObjectStore';
import { LocalImmutableObjectStore } from '../../shared/storage/local/localImmutableObjectStore';
import { LocalKeyValueStoreFactory } from '../../shared/storage/local/localKeyValueStore';
import { ObservedObjectStore } from '../support/archiveTestKit';
import { azurite } from '../support/azurite';
import { tempDir } from '../support/cleanup';
import {
  buildSnapshot,
  type BuiltSnapshot,
  type MemoryFile,
  newKeyPair,
  rawBase64,
} from '../support/snapshotTestKit';
import { STORAGE_TIMEOUT_MS } from '../support/timeouts';

/**
 * The snapshot domain on real stores (local filesystem and Azurite): publish order and crash
 * consistency (faults injected by a wrapper around the real store), retries, stale publishers,
 * missing parts, tenancy, trusted keys, and delete with the collection of unreferenced parts.
 */

interface Backend {
  readonly name: string;
  create(): Promise<{ stores: (tenant: string) => ImmutableObjectStore; destroy: () => Promise<void> }>;
}

const backends: Backend[] = [
  {
    name: 'local',
    async create() {
      const dir = tempDir('snapshots');
      return {
        stores: (tenant) =>
          new LocalImmutableObjectStore(
            path.join(dir, 'snapshots', tenant),
            path.join(dir, 'tmp'),
            path.join(dir, 'snapshots-long', tenant),
          ),
        destroy: async () => {},
      };
    },
  },
  {
    name: 'blob',
    async create() {
      const service = new BlobServiceClient(
        azurite().blobEndpoint,
        new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY),
      );
      const container = service.getContainerClient(`s${randomUUID().replaceAll('-', '').slice(0, 20)}`);
      return {
        stores: (tenant) =>
          new BlobImmutableObjectStore(container, `snapshots/${tenant}/`, STORAGE_TIMEOUT_MS, 3),
        destroy: async () => {
          await container.deleteIfExists();
        },
      };
    },
  },
];

const alpha = 'alpha';
const beta = 'beta';
const HOUR = 60 * 60 * 1000;

describe.each(backends)('WorkspaceSnapshots on the $name store', (backend) => {
  let observed: Map<string, ObservedObjectStore>;
  let stores: SnapshotStores;
  let snapshots: WorkspaceSnapshots;
  let keys: TrustedSnapshotKeys;
  let destroy: () => Promise<void>;
  const key = newKeyPair();

  beforeEach(async () => {
    const created = await backend.create();
    destroy = created.destroy;
    observed = new Map();
    stores = {
      forTenant: (tenant) => {
        let store = observed.get(tenant);
        if (store === undefined) {
          store = new ObservedObjectStore(created.stores(tenant));
          observed.set(tenant, store);
        }
        return store;
      },
    };
    keys = new TrustedSnapshotKeys(new Map(), new LocalKeyValueStoreFactory(tempDir('kv'), 1024 * 1024));
    snapshots = new WorkspaceSnapshots(stores, keys);
  });
  afterEach(async () => destroy());

  const storeOf = (tenant: string) => stores.forTenant(tenant) as ObservedObjectStore;

  async function upload(tenant: string, built: BuiltSnapshot, via = snapshots): Promise<void> {
    for (const [sha256, part, bytes] of built.parts) {
      await via.putPart(tenant, 'w1', sha256, String(part), bytes);
    }
  }

  async function publish(
    built: BuiltSnapshot,
    parent: string | null,
    options: { tenant?: string; workspaceId?: string; via?: WorkspaceSnapshots } = {},
  ) {
    return (options.via ?? snapshots).publish(options.tenant ?? alpha, options.workspaceId ?? 'w1', {
      manifest: built.manifest,
      signature: built.signature,
      parent,
      allowExternalSymlinks: false,
    });
  }

  /** Uploads and publishes `files` as the next snapshot of w1. */
  async function save(
    files: MemoryFile[],
    parent: string | null,
    workspaceId = 'w1',
  ): Promise<BuiltSnapshot> {
    const built = buildSnapshot(workspaceId, files, key.privateKey);
    await upload(alpha, built);
    expect(await publish(built, parent, { workspaceId })).toEqual({ id: built.id, latest: built.id });
    return built;
  }

  /** Every part of `built` is stored with its bytes. */
  async function expectWhole(built: BuiltSnapshot, tenant = alpha): Promise<void> {
    for (const [sha256, part, bytes] of built.parts) {
      expect((await snapshots.getPart(tenant, 'w1', sha256, String(part))).equals(bytes)).toBe(true);
    }
  }

  it('publishes, reads by id, by latest and by id alone, lists; a retry answers as the first time', async () => {
    const big = randomBytes(PART_BYTES + 1000);
    const built = await save(
      [
        { path: 'a.txt', bytes: Buffer.from('alpha\n') },
        { path: 'dir/big.bin', bytes: big, mode: 0o755 },
        { path: 'empty', bytes: Buffer.alloc(0) },
      ],
      null,
    );
    expect(built.parts).toHaveLength(3);
    const read = await snapshots.read(alpha, 'w1', built.id);
    expect(read).toEqual({
      id: built.id,
      workspaceId: 'w1',
      manifest: built.manifest,
      signature: built.signature,
    });
    expect(await snapshots.read(alpha, 'w1', 'latest')).toEqual(read);
    expect(await snapshots.find(alpha, built.id)).toEqual(read);
    await expectWhole(built);
    expect(await publish(built, null)).toEqual({ id: built.id, latest: built.id });
    expect(await publish(built, built.id)).toEqual({ id: built.id, latest: built.id });
    const page = await snapshots.list(alpha, 'w1', { limit: 10 });
    expect(page).toEqual({
      snapshots: [
        { id: built.id, publishedAt: expect.any(String) as string, manifestBytes: built.manifest.length },
      ],
      latest: built.id,
      next: null,
    });
    // Uploading a part again is idempotent.
    const [sha256, part, bytes] = built.parts[0]!;
    expect(await snapshots.putPart(alpha, 'w1', sha256, String(part), bytes)).toEqual({ created: false });
  });

  it('pages the list newest first', async () => {
    const ids: string[] = [];
    let parent: string | null = null;
    for (let index = 0; index < 5; index++) {
      const built = await save([{ path: 'n', bytes: Buffer.from(String(index)) }], parent);
      ids.unshift(built.id);
      parent = built.id;
      // Blob storage keeps times to the second: publish in distinct seconds.
      if (backend.name === 'blob') await new Promise((resolve) => setTimeout(resolve, 1100));
    }
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await snapshots.list(alpha, 'w1', {
        limit: 2,
        ...(cursor === undefined ? {} : { cursor }),
      });
      expect(page.latest).toBe(ids[0]);
      seen.push(...page.snapshots.map((item) => item.id));
      cursor = page.next ?? undefined;
    } while (cursor !== undefined);
    expect(seen).toEqual(ids);
    await expect(snapshots.list(alpha, 'w1', { limit: 2, cursor: 'nonsense' })).rejects.toBeInstanceOf(
      InvalidArgumentError,
    );
    expect(await snapshots.list(alpha, 'other', { limit: 2 })).toEqual({
      snapshots: [],
      latest: null,
      next: null,
    });
  });

  it('names missing and wrongly sized parts (422) and writes nothing', async () => {
    const big = randomBytes(PART_BYTES + 10);
    const built = buildSnapshot(
      'w1',
      [
        { path: 'big', bytes: big },
        { path: 'small', bytes: Buffer.from('s') },
      ],
      key.privateKey,
    );
    const [first] = built.parts;
    await snapshots.putPart(alpha, 'w1', first![0], '0', first![2]);
    // Part 1 of the big file stored with the wrong size.
    await snapshots.putPart(alpha, 'w1', first![0], '1', Buffer.from('x'));
    storeOf(alpha).resetCounts();
    const error = await publish(built, null).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MissingObjectsError);
    const smallHash = built.files.find((file) => file.path === 'small')!.sha256;
    expect((error as MissingObjectsError).missing).toEqual([`${first![0]}/1`, `${smallHash}/0`].sort());
    expect(storeOf(alpha).calls.put + storeOf(alpha).calls.swapPointer).toBe(0);
    await expect(snapshots.read(alpha, 'w1', 'latest')).rejects.toBeInstanceOf(NotFoundError);
    await expect(snapshots.find(alpha, built.id)).rejects.toBeInstanceOf(NotFoundError);
  });

  it('tells a stale publisher the latest before writing; of concurrent publishers on one parent one wins', async () => {
    const base = await save([{ path: 'f', bytes: Buffer.from('0') }], null);
    const stale = buildSnapshot('w1', [{ path: 'f', bytes: Buffer.from('stale') }], key.privateKey);
    await upload(alpha, stale);
    const error = await publish(stale, null).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConflictError);
    expect((error as ConflictError).details).toEqual({ latest: base.id });
    await expect(snapshots.read(alpha, 'w1', stale.id)).rejects.toBeInstanceOf(NotFoundError);

    const rivals = Array.from({ length: 6 }, (_, index) =>
      buildSnapshot('w1', [{ path: 'f', bytes: Buffer.from(`rival ${index}`) }], key.privateKey),
    );
    for (const rival of rivals) await upload(alpha, rival);
    const outcomes = await Promise.allSettled(rivals.map((rival) => publish(rival, base.id)));
    const winners = outcomes.flatMap((outcome, index) =>
      outcome.status === 'fulfilled' ? [rivals[index]!.id] : [],
    );
    expect(winners).toHaveLength(1);
    for (const outcome of outcomes) {
      if (outcome.status === 'rejected') {
        expect(outcome.reason).toBeInstanceOf(ConflictError);
        expect((outcome.reason as ConflictError).details).toEqual({ latest: winners[0] });
      }
    }
    expect((await snapshots.read(alpha, 'w1', 'latest')).id).toBe(winners[0]);
  });

  it.each([
    [
      'after the parts, before the signature',
      (method: string, key: string) => method === 'put' && key.endsWith('manifest.sig'),
    ],
    [
      'after the parts, before the id',
      (method: string, key: string) => method === 'put' && key.startsWith('ids/'),
    ],
    ['after the manifest, before latest', (method: string) => method === 'swapPointer'],
  ])('a crash %s leaves the previous snapshot loadable; the retry completes', async (_, failWhen) => {
    const previous = await save([{ path: 'f', bytes: Buffer.from('previous') }], null);
    const next = buildSnapshot('w1', [{ path: 'f', bytes: randomBytes(3000) }], key.privateKey);
    await upload(alpha, next);
    storeOf(alpha).failWhen = failWhen;
    await expect(publish(next, previous.id)).rejects.toBeInstanceOf(StorageUnavailableError);
    storeOf(alpha).failWhen = () => false;

    const latest = await snapshots.read(alpha, 'w1', 'latest');
    expect(latest.id).toBe(previous.id);
    expect(latest.manifest.equals(previous.manifest)).toBe(true);
    await expectWhole(previous);

    expect(await publish(next, previous.id)).toEqual({ id: next.id, latest: next.id });
    expect((await snapshots.read(alpha, 'w1', 'latest')).id).toBe(next.id);
    await expectWhole(next);
  });

  it('keeps tenants apart: another tenant reads and deletes nothing of it (404)', async () => {
    const built = await save([{ path: 'secret', bytes: Buffer.from('alpha only') }], null);
    await expect(snapshots.find(beta, built.id)).rejects.toBeInstanceOf(NotFoundError);
    await expect(snapshots.read(beta, 'w1', built.id)).rejects.toBeInstanceOf(NotFoundError);
    await expect(snapshots.read(beta, 'w1', 'latest')).rejects.toBeInstanceOf(NotFoundError);
    const [sha256] = built.parts[0]!;
    await expect(snapshots.getPart(beta, 'w1', sha256, '0')).rejects.toBeInstanceOf(NotFoundError);
    await expect(snapshots.delete(beta, 'w1', built.id)).rejects.toBeInstanceOf(NotFoundError);
    // Beta publishing the very same manifest needs its own parts: nothing of alpha's counts.
    const error = await publish(built, null, { tenant: beta }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MissingObjectsError);
    expect((await snapshots.read(alpha, 'w1', built.id)).id).toBe(built.id);
  });

  it('checks a whole-file part against its SHA-256 at upload; refuses bad names and empty parts', async () => {
    const bytes = Buffer.from('content');
    const wrong = 'b'.repeat(64);
    await expect(snapshots.putPart(alpha, 'w1', wrong, '0', bytes)).rejects.toThrow(
      /body: holds a whole file/,
    );
    await expect(snapshots.putPart(alpha, 'w1', 'ABC', '0', bytes)).rejects.toThrow(/^sha256: /);
    await expect(snapshots.putPart(alpha, 'w1', wrong, '01', bytes)).rejects.toThrow(/^part: /);
    await expect(snapshots.putPart(alpha, '..', wrong, '1', bytes)).rejects.toThrow(/^workspaceId: /);
    await expect(snapshots.putPart(alpha, 'w1', wrong, '1', Buffer.alloc(0))).rejects.toThrow(/^body: /);
    // A later part cannot be checked alone; other bytes under a stored part are refused and stay.
    expect(await snapshots.putPart(alpha, 'w1', wrong, '1', bytes)).toEqual({ created: true });
    await expect(snapshots.putPart(alpha, 'w1', wrong, '1', Buffer.from('other'))).rejects.toBeInstanceOf(
      ConflictError,
    );
  });

  it('publishes only signatures of a trusted key when the tenant has one; nothing is written otherwise', async () => {
    const trusted = newKeyPair();
    snapshots = new WorkspaceSnapshots(
      stores,
      new TrustedSnapshotKeys(
        new Map([[alpha, [rawBase64(trusted.publicKey)]]]),
        new LocalKeyValueStoreFactory(tempDir('kv'), 1024 * 1024),
      ),
    );
    const untrusted = buildSnapshot('w1', [{ path: 'f', bytes: Buffer.from('x') }], key.privateKey);
    await upload(alpha, untrusted);
    storeOf(alpha).resetCounts();
    await expect(publish(untrusted, null)).rejects.toThrow(/^signature: does not verify/);
    expect(storeOf(alpha).calls.put).toBe(0);
    const signed = buildSnapshot('w1', [{ path: 'f', bytes: Buffer.from('x') }], trusted.privateKey);
    expect((await publish(signed, null)).id).toBe(signed.id);

    // Keys set at run time count too, and can be cleared.
    const runtime = newKeyPair();
    const runtimeKeys = new TrustedSnapshotKeys(
      new Map(),
      new LocalKeyValueStoreFactory(tempDir('kv'), 1024 * 1024),
    );
    snapshots = new WorkspaceSnapshots(stores, runtimeKeys);
    await runtimeKeys.setRuntime(alpha, [rawBase64(runtime.publicKey)]);
    await expect(publish(untrusted, signed.id)).rejects.toThrow(/^signature: /);
    await runtimeKeys.clearRuntime(alpha);
    expect((await publish(untrusted, signed.id)).id).toBe(untrusted.id);
    await expect(runtimeKeys.setRuntime(alpha, ['nope'])).rejects.toThrow(/^keys\.0: /);
  });

  it('delete moves latest to the newest remaining snapshot, keeps parts still referenced, spares young ones', async () => {
    const shared = { path: 'shared', bytes: randomBytes(5000) };
    const first = await save([shared, { path: 'only-first', bytes: randomBytes(100) }], null);
    const second = await save([shared, { path: 'only-second', bytes: randomBytes(100) }], first.id);
    // Another workspace of the tenant holds `shared` too.
    const other = await save([shared], null, 'w2');
    const later = new WorkspaceSnapshots(stores, keys, { now: () => new Date(Date.now() + GRACE_MS + HOUR) });

    // Deleting the latest moves latest to the remaining one; its own parts are young: they stay.
    const report = await snapshots.delete(alpha, 'w1', second.id);
    expect(report).toEqual({ id: second.id, latest: first.id, objectsDeleted: 0, collectionComplete: true });
    expect((await snapshots.read(alpha, 'w1', 'latest')).id).toBe(first.id);
    await expect(snapshots.read(alpha, 'w1', second.id)).rejects.toBeInstanceOf(NotFoundError);
    await expect(snapshots.find(alpha, second.id)).rejects.toBeInstanceOf(NotFoundError);
    const onlySecond = second.parts.find(([, , bytes]) => bytes.length === 100)!;
    expect((await snapshots.getPart(alpha, 'w1', onlySecond[0], '0')).length).toBe(100);

    // An hour later: deleting the last snapshot of w1 removes latest and the parts nothing references,
    // while `shared` stays for w2.
    const last = await later.delete(alpha, 'w1', first.id);
    expect(last).toEqual({ id: first.id, latest: null, objectsDeleted: 1, collectionComplete: true });
    await expect(snapshots.read(alpha, 'w1', 'latest')).rejects.toBeInstanceOf(NotFoundError);
    const onlyFirst = first.parts.find(([, , bytes]) => bytes.length === 100)!;
    await expect(snapshots.getPart(alpha, 'w1', onlyFirst[0], '0')).rejects.toBeInstanceOf(NotFoundError);
    await expectWhole(other);
    await expect(later.delete(alpha, 'w1', first.id)).rejects.toBeInstanceOf(NotFoundError);

    // The first snapshot of a workspace whose latest is gone is published on null.
    const again = await save([shared], null);
    expect((await snapshots.read(alpha, 'w1', 'latest')).id).toBe(again.id);
  });

  it('a delete whose collection hits a storage fault still deletes the snapshot and says so', async () => {
    const first = await save([{ path: 'f', bytes: Buffer.from('1') }], null);
    storeOf(alpha).failWhen = (method, listed) => method === 'list' && listed === 'workspaces/';
    const report = await snapshots.delete(alpha, 'w1', first.id);
    storeOf(alpha).failWhen = () => false;
    expect(report).toMatchObject({ id: first.id, latest: null, collectionComplete: false });
    await expect(snapshots.read(alpha, 'w1', first.id)).rejects.toBeInstanceOf(NotFoundError);
  });
});
