import { randomBytes, randomUUID } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';

import type { TableClient } from '@azure/data-tables';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import { archiveRewrapTarget } from '../../shared/archive/archiveRewrap';
import {
  ARCHIVE_OBJECT_KIND,
  type ArchiveStorage,
  sealedArchiveStorage,
  SealedSessions,
} from '../../shared/archive/sealedArchive';
import { SessionArchive } from '../../shared/archive/sessionArchive';
import { pruneSessions, SESSION_TOMBSTONE } from '../../shared/archive/sessionRetention';
import { verifySessions } from '../../shared/archive/sessionVerify';
import { noTransactionalAuditLog } from '../../shared/audit/pending';
import { Encryption, type SealingCodec } from '../../shared/crypto/encryption';
import type { EncryptionKey } from '../../shared/crypto/encryptionKeys';
import { addCounts, emptyCounts, type RewrapCounts } from '../../shared/crypto/rewrap';
import { SEAL_OVERHEAD, sealedKeyId } from '../../shared/crypto/sealedFormat';
import { SealedObjectStore } from '../../shared/crypto/sealedObjectStore';
import { BLOCK_BYTES } from '../../shared/protocol/archive/identifiers';
import { IntegrityError, MissingObjectsError } from '../../shared/protocol/errors';
import { emptyCounts as emptyPruneCounts, PruneBudget } from '../../shared/retention/budget';
import { VerifyCollector } from '../../shared/retention/verifyReport';
import { TableSessionIndex } from '../../shared/storage/azure/sessionIndexTable';
import {
  type ImmutableObjectStore,
  MAX_OBJECT_BYTES,
  ObjectExistsError,
  type RewritableObjectStore,
} from '../../shared/storage/immutableObjectStore';
import { LocalKeyValueStoreFactory } from '../../shared/storage/local/localKeyValueStore';
import { restoreBytes, sha256, storeBackends, uploadFiles } from '../support/archiveTestKit';
import { azurite } from '../support/azurite';
import { tempDir } from '../support/cleanup';
import { azuriteTable } from '../support/tables';
import { STORAGE_TIMEOUT_MS } from '../support/timeouts';

/**
 * Session archives sealed at rest for the tenants whose policy asks for it, on both object stores
 * (local files, Azurite) with the index on Azurite tables: no stored byte of a sealed tenant's
 * archive holds its content, restores are byte for byte, retries stay idempotent, bytes moved or
 * stored plain fail with IntegrityError, and a key rotation with the rewrap job loses nothing.
 */

const SEALED = 'sealed';
const SEALED_TOO = 'sealed-too';
const PLAIN = 'plain';
const POLICY = new Set([SEALED, SEALED_TOO]);

const key = (id: string): EncryptionKey => ({ id, key: randomBytes(32) });

/** `size` bytes of text that repeats `marker`, so any stored fragment of it would show the marker. */
function textOf(marker: string, size: number): Buffer {
  return Buffer.from(`${marker} `.repeat(Math.ceil(size / (marker.length + 1)))).subarray(0, size);
}

describe.each(storeBackends(() => azurite().blobEndpoint))(
  'sealed session archives on the $name store',
  (backend) => {
    let raw: RewritableObjectStore;
    let tamper: (key: string, bytes: Buffer) => Promise<void>;
    let destroyStore: () => Promise<void>;
    let kvDir: string;
    let kvStores: LocalKeyValueStoreFactory;
    let table: TableClient;
    let index: TableSessionIndex;
    let sessions: SealedSessions;
    let marker: string;

    beforeEach(async () => {
      const created = await backend.create(MAX_OBJECT_BYTES + SEAL_OVERHEAD);
      ({ store: raw, tamper } = created);
      destroyStore = created.destroy;
      kvDir = tempDir('sealed-archive');
      kvStores = new LocalKeyValueStoreFactory(kvDir, 1024 * 1024);
      table = azuriteTable(azurite().tableEndpoint);
      index = new TableSessionIndex(table, STORAGE_TIMEOUT_MS);
      sessions = new SealedSessions(kvStores);
      marker = `MARKER${randomUUID().replaceAll('-', '')}`;
    });
    afterEach(async () => {
      await destroyStore();
      await table.deleteTable();
      await rm(kvDir, { recursive: true, force: true });
    });

    async function codecOf(keys: EncryptionKey[]): Promise<SealingCodec> {
      const encryption = new Encryption({ keys, kvStores, policy: POLICY });
      await encryption.check();
      return encryption.codec;
    }

    function storageOf(codec: SealingCodec): ArchiveStorage {
      return sealedArchiveStorage({ plain: raw, roomy: raw, index, codec, policy: POLICY, sessions });
    }

    /** Uploads one file and publishes it; returns its bytes. */
    async function publish(
      archive: SessionArchive,
      tenant: string,
      sessionId: string,
      checkpointId: string,
      parent: string | null,
      file: { path: string; size: number; generation: string },
    ): Promise<Buffer> {
      const bytes = textOf(marker, file.size);
      const files = await uploadFiles(archive, tenant, sessionId, checkpointId, [{ ...file, bytes }]);
      await archive.publishCheckpoint(tenant, sessionId, {
        checkpointId,
        parent,
        files,
        data: { note: marker },
      });
      return bytes;
    }

    /** Every stored object of a session but `latest`, as stored. */
    async function storedObjects(sessionId: string): Promise<Map<string, Buffer>> {
      const found = new Map<string, Buffer>();
      for await (const item of raw.list(`${sessionId}/`)) {
        if (item.key === `${sessionId}/latest`) continue;
        found.set(item.key, (await raw.get(item.key)) ?? Buffer.alloc(0));
      }
      return found;
    }

    async function rewrapAll(codec: SealingCodec, tenant: string): Promise<RewrapCounts> {
      const target = archiveRewrapTarget({ objects: raw, index, sessions }, codec, POLICY);
      const counts = emptyCounts();
      let cursor: string | null = null;
      let pages = 0;
      do {
        const page = await target.rewrapPage(tenant, cursor, 2);
        addCounts(counts, page);
        cursor = page.next;
        pages++;
      } while (cursor !== null);
      expect(pages).toBeGreaterThan(1);
      return counts;
    }

    it('stores no byte of a sealed tenant content, restores it byte for byte, and leaves other tenants plain', async () => {
      const archive = new SessionArchive(storageOf(await codecOf([key('k1')])));
      const size = 3 * BLOCK_BYTES + 1000;
      const bytes = await publish(archive, SEALED, 's1', 'c1', null, {
        path: 'notes/secret.txt',
        size,
        generation: 'g1',
      });
      const plainBytes = await publish(archive, PLAIN, 'p1', 'c1', null, {
        path: 'notes/open.txt',
        size,
        generation: 'g1',
      });

      expect(await restoreBytes(archive, SEALED, 's1', 'latest', 'notes/secret.txt')).toEqual(bytes);
      expect(await restoreBytes(archive, PLAIN, 'p1', 'latest', 'notes/open.txt')).toEqual(plainBytes);
      expect(
        (await archive.getObject(SEALED, 's1', 'tails/c1/g1')).equals(bytes.subarray(3 * BLOCK_BYTES)),
      ).toBe(true);
      const manifest = await archive.readManifest(SEALED, 's1', 'latest');
      expect(manifest.files).toEqual([
        { path: 'notes/secret.txt', generation: 'g1', size, sha256: sha256(bytes) },
      ]);
      expect(manifest.data).toEqual({ note: marker });
      expect((await archive.getSession(SEALED, 's1')).data).toEqual({ note: marker });
      expect((await archive.listSessions(SEALED, { limit: 10 })).sessions.map((s) => s.data)).toEqual([
        { note: marker },
      ]);

      // As stored: four objects and a manifest, each sealed with k1, none holding the marker or the path.
      const stored = await storedObjects('s1');
      expect([...stored.keys()].sort()).toEqual([
        's1/blocks/g1/0',
        's1/blocks/g1/1',
        's1/blocks/g1/2',
        's1/checkpoints/c1',
        's1/tails/c1/g1',
      ]);
      for (const [name, value] of stored) {
        expect(sealedKeyId(value), name).toBe('k1');
        expect(value.includes(marker), name).toBe(false);
        expect(value.includes('notes/secret.txt'), name).toBe(false);
      }
      expect(stored.get('s1/blocks/g1/0')?.length).toBe(BLOCK_BYTES + SEAL_OVERHEAD);
      const record = await index.get(SEALED, 's1');
      expect(JSON.stringify(record)).not.toContain(marker);
      expect(sealedKeyId(Buffer.from(String((record?.data as { sealed: string }).sealed), 'base64'))).toBe(
        'k1',
      );
      // The plain tenant's objects are its bytes as sent (the scan does see content).
      const plainStored = await storedObjects('p1');
      expect(plainStored.get('p1/blocks/g1/0')?.equals(plainBytes.subarray(0, BLOCK_BYTES))).toBe(true);
      expect(JSON.stringify(await index.get(PLAIN, 'p1'))).toContain(marker);
    });

    it('keeps retries idempotent although every seal differs, and refuses other bytes', async () => {
      const archive = new SessionArchive(storageOf(await codecOf([key('k1')])));
      const block = randomBytes(BLOCK_BYTES);
      expect(await archive.putObject(SEALED, 's1', 'blocks/g1/0', block)).toEqual({ created: true });
      const first = await raw.get('s1/blocks/g1/0');
      expect(await archive.putObject(SEALED, 's1', 'blocks/g1/0', block)).toEqual({ created: false });
      const retries = await Promise.all(
        Array.from({ length: 8 }, () => archive.putObject(SEALED, 's1', 'blocks/g1/1', block)),
      );
      expect(retries.filter((result) => result.created)).toHaveLength(1);
      await expect(
        archive.putObject(SEALED, 's1', 'blocks/g1/0', randomBytes(BLOCK_BYTES)),
      ).rejects.toBeInstanceOf(ObjectExistsError);
      expect((await raw.get('s1/blocks/g1/0'))?.equals(first ?? Buffer.alloc(0))).toBe(true);
      // A publish retried after it completed is the same checkpoint again.
      const request = {
        checkpointId: 'c1',
        parent: null,
        files: [
          {
            path: 'f',
            generation: 'g1',
            size: 2 * BLOCK_BYTES,
            sha256: sha256(Buffer.concat([block, block])),
          },
        ],
        data: null,
      };
      expect(await archive.publishCheckpoint(SEALED, 's1', request)).toEqual({
        checkpointId: 'c1',
        latest: 'c1',
      });
      expect(await archive.publishCheckpoint(SEALED, 's1', request)).toEqual({
        checkpointId: 'c1',
        latest: 'c1',
      });
      expect(await restoreBytes(archive, SEALED, 's1', 'c1', 'f')).toEqual(Buffer.concat([block, block]));
    });

    it('checks object sizes in plain terms: a missing block is named, a full one is not', async () => {
      const archive = new SessionArchive(storageOf(await codecOf([key('k1')])));
      const bytes = randomBytes(2 * BLOCK_BYTES + 10);
      await archive.putObject(SEALED, 's1', 'blocks/g1/0', bytes.subarray(0, BLOCK_BYTES));
      await archive.putObject(SEALED, 's1', 'tails/c1/g1', bytes.subarray(2 * BLOCK_BYTES));
      const request = {
        checkpointId: 'c1',
        parent: null,
        files: [{ path: 'f', generation: 'g1', size: bytes.length, sha256: sha256(bytes) }],
        data: null,
      };
      const refused = await archive.publishCheckpoint(SEALED, 's1', request).catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(MissingObjectsError);
      expect((refused as MissingObjectsError).details).toMatchObject({ missing: ['blocks/g1/1'] });
      await archive.putObject(SEALED, 's1', 'blocks/g1/1', bytes.subarray(BLOCK_BYTES, 2 * BLOCK_BYTES));
      await archive.publishCheckpoint(SEALED, 's1', request);
      expect(await restoreBytes(archive, SEALED, 's1', 'latest', 'f')).toEqual(bytes);
    });

    it('refuses bytes moved to another object, session or tenant, or stored plain: IntegrityError, never absent', async () => {
      const storage = storageOf(await codecOf([key('k1')]));
      const archive = new SessionArchive(storage);
      const file = { path: 'f.txt', size: 2 * BLOCK_BYTES + 100, generation: 'g1' };
      await publish(archive, SEALED, 's1', 'c1', null, file);
      await publish(archive, SEALED, 's2', 'c1', null, file);
      const other = await publish(archive, SEALED_TOO, 'o1', 'c1', null, file);
      const s1 = await storedObjects('s1');
      const sealedBlock = s1.get('s1/blocks/g1/0') ?? Buffer.alloc(0);

      // Block 0 of s1 over block 1 of s1, over block 0 of s2, and over block 0 of another tenant's session.
      await tamper('s1/blocks/g1/1', sealedBlock);
      await tamper('s2/blocks/g1/0', sealedBlock);
      await tamper('o1/blocks/g1/0', sealedBlock);
      for (const [tenant, sessionId] of [
        [SEALED, 's1'],
        [SEALED, 's2'],
        [SEALED_TOO, 'o1'],
      ] as const) {
        await expect(
          restoreBytes(archive, tenant, sessionId, 'c1', 'f.txt'),
          sessionId,
        ).rejects.toBeInstanceOf(IntegrityError);
      }
      await expect(archive.getObject(SEALED, 's1', 'blocks/g1/1')).rejects.toBeInstanceOf(IntegrityError);
      // A manifest moved to another session, and plain bytes where a sealed tail is expected.
      await tamper('s2/checkpoints/c1', s1.get('s1/checkpoints/c1') ?? Buffer.alloc(0));
      await expect(archive.readManifest(SEALED, 's2', 'c1')).rejects.toBeInstanceOf(IntegrityError);
      await tamper('o1/tails/c1/g1', other.subarray(2 * BLOCK_BYTES));
      await expect(archive.getObject(SEALED_TOO, 'o1', 'tails/c1/g1')).rejects.toBeInstanceOf(IntegrityError);
      // The objects in their own places still open.
      expect((await archive.getObject(SEALED, 's1', 'blocks/g1/0')).equals(textOf(marker, BLOCK_BYTES))).toBe(
        true,
      );

      // Verify reads them as `cairn verify` does: the object that does not open is a finding.
      const collector = new VerifyCollector(Date.now(), 0);
      await verifySessions(storage.objectsOf(SEALED), storage.index, SEALED, collector, {
        readData: true,
        oneIn: 1,
        random: Math.random,
      });
      expect(collector.findings.map((finding) => [finding.kind, finding.key]).sort()).toEqual([
        ['unreadable', 's1/blocks/g1/1'],
        ['unreadable', 's2/checkpoints/c1'],
      ]);
    });

    it('retention reads sealed sessions: an expired one goes whole, a kept one loses only its unreferenced objects', async () => {
      const storage = storageOf(await codecOf([key('k1')]));
      const hourAgo = Date.now() - 2 * 60 * 60 * 1000;
      const past = new SessionArchive(storage, noTransactionalAuditLog, () => hourAgo);
      const archive = new SessionArchive(storage);
      await publish(past, SEALED, 'old', 'c1', null, { path: 'a', size: BLOCK_BYTES + 3, generation: 'g1' });
      const kept = await publish(archive, SEALED, 'kept', 'c1', null, {
        path: 'a',
        size: 10,
        generation: 'g1',
      });
      // Uploaded and never referenced: garbage once older than the grace (0 here).
      await archive.putObject(SEALED, 'kept', 'blocks/g9/0', randomBytes(BLOCK_BYTES));
      const counts = emptyPruneCounts();
      const done = await pruneSessions({
        objects: storage.objectsOf(SEALED),
        index: storage.index,
        tenant: SEALED,
        ttlMs: 60 * 60 * 1000,
        graceMs: 0,
        now: Date.now() + 1000,
        budget: PruneBudget.of(1000, 60_000),
        counts,
        full: true,
        intents: [],
        intentLog: { add: async () => undefined, remove: async () => undefined },
      });
      expect(done).toBe(true);
      expect(counts).toMatchObject({ sessionsDeleted: 1, objectsDeleted: 4 });
      expect([...(await storedObjects('old')).keys()]).toEqual([]);
      expect([...(await storedObjects('kept')).keys()].sort()).toEqual([
        'kept/checkpoints/c1',
        'kept/tails/c1/g1',
      ]);
      expect(await restoreBytes(archive, SEALED, 'kept', 'latest', 'a')).toEqual(kept);
      expect(
        (await archive.listSessions(SEALED, { limit: 10 })).sessions.map((session) => session.id),
      ).toEqual(['kept']);
    });

    it("binds the index record's sealed data to its session and checkpoint: an older record's data put back fails", async () => {
      const storage = storageOf(await codecOf([key('k1')]));
      const archive = new SessionArchive(storage);
      await publish(archive, SEALED, 's1', 'c1', null, { path: 'a', size: 10, generation: 'g1' });
      const first = await index.get(SEALED, 's1');
      await archive.putObject(SEALED, 's1', 'tails/c2/g2', Buffer.from('second'));
      await archive.publishCheckpoint(SEALED, 's1', {
        checkpointId: 'c2',
        parent: 'c1',
        files: [{ path: 'b', generation: 'g2', size: 6, sha256: sha256(Buffer.from('second')) }],
        data: { note: 'second' },
      });
      expect((await archive.getSession(SEALED, 's1')).data).toEqual({ note: 'second' });
      // The first record's sealed data under the second checkpoint (a replayed row), as stored.
      await index.update(
        SEALED,
        's1',
        async (current) => current && { ...current, data: first?.data ?? null },
      );
      await expect(archive.getSession(SEALED, 's1')).rejects.toBeInstanceOf(IntegrityError);
      await expect(archive.listSessions(SEALED, { limit: 10 })).rejects.toBeInstanceOf(IntegrityError);
    });

    it('binds each object to its tenant: the same key read as another tenant does not open', async () => {
      const codec = await codecOf([key('k1')]);
      const archive = new SessionArchive(storageOf(codec));
      const block = randomBytes(BLOCK_BYTES);
      await archive.putObject(SEALED, 's1', 'blocks/g1/0', block);
      const as = (tenant: string) => new SealedObjectStore(raw, tenant, codec, ARCHIVE_OBJECT_KIND);
      expect((await as(SEALED).get('s1/blocks/g1/0'))?.equals(block)).toBe(true);
      await expect(as(SEALED_TOO).get('s1/blocks/g1/0')).rejects.toBeInstanceOf(IntegrityError);
    });

    it('retention finishes deleting a session only once every object is gone, also one re-sealed meanwhile', async () => {
      const storage = storageOf(await codecOf([key('k1')]));
      const past = new SessionArchive(
        storage,
        noTransactionalAuditLog,
        () => Date.now() - 2 * 60 * 60 * 1000,
      );
      await publish(past, SEALED, 'old', 'c1', null, { path: 'a', size: BLOCK_BYTES + 3, generation: 'g1' });
      // Blob keeps times to the second: the objects must be older than the grace when the prune runs.
      await sleep(2200);
      const objects = storage.objectsOf(SEALED);
      let rewrapped = false;
      // The rewrap job re-seals a block right after the prune listed the session (Blob moves its
      // Last-Modified to now; the local backend keeps the file's time).
      const racing: ImmutableObjectStore = {
        put: (name, bytes) => objects.put(name, bytes),
        get: (name) => objects.get(name),
        head: (name) => objects.head(name),
        readPointer: (name) => objects.readPointer(name),
        swapPointer: (name, expected, next) => objects.swapPointer(name, expected, next),
        delete: (name, options) => objects.delete(name, options),
        touch: (name) => objects.touch(name),
        async *list(prefix) {
          yield* objects.list(prefix);
          if (!rewrapped && prefix === 'old/') {
            rewrapped = true;
            await raw.rewrite('old/blocks/g1/0', (bytes) => Buffer.from(bytes));
          }
        },
      };
      const intents = new Set<string>();
      const prune = async (now: number) =>
        pruneSessions({
          objects: racing,
          index: storage.index,
          tenant: SEALED,
          ttlMs: 60 * 60 * 1000,
          graceMs: 1000,
          now,
          budget: PruneBudget.of(1000, 60_000),
          counts: emptyPruneCounts(),
          full: false,
          intents: [...intents],
          intentLog: {
            add: async (sessionId) => void intents.add(sessionId),
            remove: async (sessionId) => void intents.delete(sessionId),
          },
        });
      await prune(Date.now());
      expect(rewrapped).toBe(true);
      const left = [...(await storedObjects('old')).keys()];
      if (backend.name === 'blob') {
        // The re-sealed block is younger than the grace now: it stays, and so do the tombstone and
        // the intent, so that a later run finishes the deletion.
        expect(left).toEqual(['old/blocks/g1/0']);
        expect(await raw.readPointer('old/latest')).toBe(SESSION_TOMBSTONE);
        expect([...intents]).toEqual(['old']);
        await prune(Date.now() + 2 * 60 * 60 * 1000);
      } else {
        expect(left).toEqual([]);
      }
      expect([...(await storedObjects('old')).keys()]).toEqual([]);
      expect(await raw.readPointer('old/latest')).toBeNull();
      expect([...intents]).toEqual([]);
    });

    it('rotates keys: new objects sealed with the new first key, rewrap re-seals every object and index record, the old key goes and nothing is lost', async () => {
      const [k1, k2] = [key('k1'), key('k2')];
      let archive = new SessionArchive(storageOf(await codecOf([k1])));
      const first = await publish(archive, SEALED, 's1', 'c1', null, {
        path: 'a',
        size: 2 * BLOCK_BYTES + 5,
        generation: 'g1',
      });
      // Uploaded, not published yet: not in the index, reached through the registry of sealed sessions.
      const pending = textOf(marker, BLOCK_BYTES + 7);
      const pendingFiles = await uploadFiles(archive, SEALED, 's2', 'c1', [
        { path: 'b', bytes: pending, generation: 'g1' },
      ]);
      await publish(archive, PLAIN, 'p1', 'c1', null, { path: 'p', size: 100, generation: 'g1' });
      const third = await publish(archive, SEALED, 's3', 'c1', null, {
        path: 'd',
        size: 100,
        generation: 'g1',
      });

      const rotated = await codecOf([k2, k1]);
      archive = new SessionArchive(storageOf(rotated));
      expect(await restoreBytes(archive, SEALED, 's1', 'c1', 'a')).toEqual(first);
      const second = await publish(archive, SEALED, 's1', 'c2', 'c1', {
        path: 'c',
        size: BLOCK_BYTES + 1,
        generation: 'g2',
      });
      const ids = async (sessionId: string) =>
        [...(await storedObjects(sessionId)).values()].map((bytes) => sealedKeyId(bytes)).sort();
      expect(await ids('s1')).toEqual(['k1', 'k1', 'k1', 'k1', 'k2', 'k2', 'k2']);

      const counts = await rewrapAll(rotated, SEALED);
      expect(counts.errors).toEqual([]);
      // s1: 4 objects under k1, 3 objects and the index record (moved on by c2) under k2; s2: 2
      // objects under k1; s3: a tail, a manifest and the index record under k1.
      expect(counts.sealedWith).toEqual({ k1: 9, k2: 4 });
      expect(counts.resealed).toBe(9);
      expect(counts.remaining).toEqual({});
      expect(await ids('s1')).toEqual(Array(7).fill('k2'));
      expect(await ids('s2')).toEqual(['k2', 'k2']);
      expect(await ids('s3')).toEqual(['k2', 'k2']);
      const record = await index.get(SEALED, 's3');
      expect(sealedKeyId(Buffer.from((record?.data as { sealed: string }).sealed, 'base64'))).toBe('k2');
      // Idempotent; and a tenant the policy does not seal has nothing to re-seal.
      expect((await rewrapAll(rotated, SEALED)).resealed).toBe(0);
      expect(
        await archiveRewrapTarget({ objects: raw, index, sessions }, rotated, POLICY).rewrapPage(
          PLAIN,
          null,
          2,
        ),
      ).toMatchObject({
        examined: 0,
        next: null,
      });

      archive = new SessionArchive(storageOf(await codecOf([k2])));
      expect(await restoreBytes(archive, SEALED, 's1', 'c1', 'a')).toEqual(first);
      expect(await restoreBytes(archive, SEALED, 's1', 'c2', 'c')).toEqual(second);
      expect((await archive.getSession(SEALED, 's1')).data).toEqual({ note: marker });
      await archive.publishCheckpoint(SEALED, 's2', {
        checkpointId: 'c1',
        parent: null,
        files: pendingFiles,
        data: null,
      });
      expect(await restoreBytes(archive, SEALED, 's2', 'c1', 'b')).toEqual(pending);
      expect(await restoreBytes(archive, SEALED, 's3', 'c1', 'd')).toEqual(third);
      expect((await archive.getSession(SEALED, 's3')).data).toEqual({ note: marker });
      expect((await restoreBytes(archive, PLAIN, 'p1', 'c1', 'p')).length).toBe(100);
    });
  },
);
