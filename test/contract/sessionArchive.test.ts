import { randomBytes } from 'node:crypto';

import type { TableClient } from '@azure/data-tables';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import { plainArchiveStorage } from '../../shared/archive/sealedArchive';
import { SessionArchive } from '../../shared/archive/sessionArchive';
import { BLOCK_BYTES } from '../../shared/protocol/archive/identifiers';
import type { PublishRequest } from '../../shared/protocol/archive/manifest';
import {
  ConflictError,
  ForbiddenError,
  IntegrityError,
  InvalidArgumentError,
  MissingObjectsError,
  NotFoundError,
  StorageUnavailableError,
} from '../../shared/protocol/errors';
import { readAllBytes } from '../../shared/protocol/streams';
import { TableSessionIndex } from '../../shared/storage/azure/sessionIndexTable';
import { ObjectExistsError } from '../../shared/storage/immutableObjectStore';
import {
  FaultySessionIndex,
  ObservedObjectStore,
  restoreBytes,
  sha256,
  storeBackends,
  uploadFiles,
} from '../support/archiveTestKit';
import { azurite } from '../support/azurite';
import { azuriteTable } from '../support/tables';
import { STORAGE_TIMEOUT_MS } from '../support/timeouts';

/**
 * The archive domain on real stores (local filesystem and Azurite) with the session index on
 * Azurite tables: publish order, crash consistency at each step (faults injected by wrappers around
 * the real stores), idempotent retries, stale publishers, tenancy, integrity, validation cost.
 */
describe.each(storeBackends(() => azurite().blobEndpoint))('SessionArchive on the $name store', (backend) => {
  let store: ObservedObjectStore;
  let index: FaultySessionIndex;
  let archive: SessionArchive;
  let table: TableClient;
  let tamper: (key: string, bytes: Buffer) => Promise<void>;
  let httpRequests: () => number;
  let destroy: () => Promise<void>;
  const alpha = 'alpha';
  const beta = 'beta';

  beforeEach(async () => {
    const created = await backend.create();
    store = new ObservedObjectStore(created.store);
    ({ tamper, httpRequests, destroy } = created);
    table = azuriteTable(azurite().tableEndpoint);
    index = new FaultySessionIndex(new TableSessionIndex(table, STORAGE_TIMEOUT_MS));
    archive = new SessionArchive(plainArchiveStorage(store, index));
  });
  afterEach(async () => {
    await destroy();
    await table.deleteTable();
  });

  /** Publishes `events.jsonl` = `bytes` as `checkpointId` on `parent`, uploading its objects first. */
  async function publishEvents(
    sessionId: string,
    checkpointId: string,
    parent: string | null,
    bytes: Buffer,
    generation = 'g1',
  ): Promise<PublishRequest> {
    const files = await uploadFiles(archive, alpha, sessionId, checkpointId, [
      { path: 'events.jsonl', bytes, generation },
    ]);
    const request = { checkpointId, parent, files, data: { turn: checkpointId } };
    expect(await archive.publishCheckpoint(alpha, sessionId, request)).toEqual({
      checkpointId,
      latest: checkpointId,
    });
    return request;
  }

  /**
   * Publishes `request` (c2 on c1) while `failWhen` injects a storage fault: the publish fails, and
   * c1 (`previous`) is still the latest, what restores and what the index shows (`whileCrashed`
   * checks more); then the same request again completes c2 (`next`).
   */
  async function crashThenRetry(
    request: PublishRequest,
    failWhen: ObservedObjectStore['failWhen'],
    bytes: { previous: Buffer; next: Buffer },
    whileCrashed: () => Promise<void> = async () => {},
  ): Promise<void> {
    store.failWhen = failWhen;
    await expect(archive.publishCheckpoint(alpha, 's1', request)).rejects.toBeInstanceOf(
      StorageUnavailableError,
    );
    store.failWhen = () => false;
    expect((await archive.readManifest(alpha, 's1', 'latest')).checkpointId).toBe('c1');
    expect((await restoreBytes(archive, alpha, 's1', 'latest', 'events.jsonl')).equals(bytes.previous)).toBe(
      true,
    );
    await whileCrashed();
    expect((await archive.getSession(alpha, 's1')).checkpointId).toBe('c1');

    expect(await archive.publishCheckpoint(alpha, 's1', request)).toEqual({
      checkpointId: 'c2',
      latest: 'c2',
    });
    expect((await restoreBytes(archive, alpha, 's1', 'latest', 'events.jsonl')).equals(bytes.next)).toBe(
      true,
    );
    expect((await archive.getSession(alpha, 's1')).checkpointId).toBe('c2');
  }

  it('publishes several files and restores each byte for byte; the index shows the checkpoint', async () => {
    const events = randomBytes(3 * BLOCK_BYTES + 1234);
    const native = randomBytes(BLOCK_BYTES);
    const small = Buffer.from('{"turn":1}\n');
    const files = await uploadFiles(archive, alpha, 's1', 'c1', [
      { path: 'events.jsonl', bytes: events, generation: 'g1' },
      { path: 'native/a/state.bin', bytes: native, generation: 'g2' },
      { path: 'native/empty', bytes: Buffer.alloc(0), generation: 'g3' },
      { path: 'native/small.json', bytes: small, generation: 'g4' },
    ]);
    await archive.publishCheckpoint(alpha, 's1', {
      checkpointId: 'c1',
      parent: null,
      files,
      data: { title: 'first' },
    });

    const manifest = await archive.readManifest(alpha, 's1', 'latest');
    expect(manifest).toMatchObject({ checkpointId: 'c1', parent: null, files, data: { title: 'first' } });
    expect(new Date(manifest.createdAt).toISOString()).toBe(manifest.createdAt);
    expect(await archive.readManifest(alpha, 's1', 'c1')).toEqual(manifest);
    expect((await restoreBytes(archive, alpha, 's1', 'c1', 'events.jsonl')).equals(events)).toBe(true);
    expect((await restoreBytes(archive, alpha, 's1', 'latest', 'native/a/state.bin')).equals(native)).toBe(
      true,
    );
    expect((await restoreBytes(archive, alpha, 's1', 'c1', 'native/empty')).length).toBe(0);
    expect((await restoreBytes(archive, alpha, 's1', 'c1', 'native/small.json')).equals(small)).toBe(true);
    expect(await archive.getSession(alpha, 's1')).toMatchObject({
      id: 's1',
      checkpointId: 'c1',
      data: { title: 'first' },
    });
    expect((await archive.listSessions(alpha, { limit: 10 })).sessions.map((s) => s.id)).toEqual(['s1']);
  });

  it('a crash after the blocks, before the manifest: the previous checkpoint restores, a retry completes', async () => {
    const v1 = randomBytes(2 * BLOCK_BYTES + 100);
    await publishEvents('s1', 'c1', null, v1);
    const v2 = Buffer.concat([v1, randomBytes(BLOCK_BYTES)]);
    const files = await uploadFiles(archive, alpha, 's1', 'c2', [
      { path: 'events.jsonl', bytes: v2, generation: 'g1' },
    ]);
    const request = { checkpointId: 'c2', parent: 'c1', files, data: null };

    await crashThenRetry(
      request,
      (method, key) => method === 'put' && key === 's1/checkpoints/c2',
      { previous: v1, next: v2 },
      async () => {
        await expect(archive.readManifest(alpha, 's1', 'c2')).rejects.toBeInstanceOf(NotFoundError);
      },
    );
  });

  it('a crash after the manifest, before latest: the previous checkpoint restores, a retry completes', async () => {
    const v1 = randomBytes(BLOCK_BYTES + 7);
    await publishEvents('s1', 'c1', null, v1);
    const v2 = Buffer.concat([v1, Buffer.from('one more line\n')]);
    const files = await uploadFiles(archive, alpha, 's1', 'c2', [
      { path: 'events.jsonl', bytes: v2, generation: 'g1' },
    ]);
    const request = { checkpointId: 'c2', parent: 'c1', files, data: null };

    await crashThenRetry(request, (method) => method === 'swapPointer', { previous: v1, next: v2 });
  });

  it('a crash after latest, before the index: the new checkpoint restores, a retry updates the index', async () => {
    const v1 = randomBytes(100);
    await publishEvents('s1', 'c1', null, v1);
    const v2 = Buffer.concat([v1, randomBytes(100)]);
    const files = await uploadFiles(archive, alpha, 's1', 'c2', [
      { path: 'events.jsonl', bytes: v2, generation: 'g1' },
    ]);
    const request = { checkpointId: 'c2', parent: 'c1', files, data: { n: 2 } };

    index.failUpdates = true;
    await expect(archive.publishCheckpoint(alpha, 's1', request)).rejects.toBeInstanceOf(
      StorageUnavailableError,
    );
    index.failUpdates = false;
    expect((await restoreBytes(archive, alpha, 's1', 'latest', 'events.jsonl')).equals(v2)).toBe(true);
    expect((await archive.getSession(alpha, 's1')).checkpointId).toBe('c1');

    expect(await archive.publishCheckpoint(alpha, 's1', request)).toEqual({
      checkpointId: 'c2',
      latest: 'c2',
    });
    expect(await archive.getSession(alpha, 's1')).toMatchObject({ checkpointId: 'c2', data: { n: 2 } });
  });

  it('answers a retry as the first publish; another manifest under the id, or a stale parent, is a conflict', async () => {
    const request = await publishEvents('s1', 'c1', null, randomBytes(10));
    const manifest = await archive.readManifest(alpha, 's1', 'c1');
    expect(await archive.publishCheckpoint(alpha, 's1', request)).toEqual({
      checkpointId: 'c1',
      latest: 'c1',
    });
    expect(await archive.readManifest(alpha, 's1', 'c1')).toEqual(manifest);

    const changed = { ...request, data: { other: true } };
    await expect(archive.publishCheckpoint(alpha, 's1', changed)).rejects.toBeInstanceOf(ConflictError);

    // A second "first" checkpoint is stale: latest is c1.
    const second = await uploadFiles(archive, alpha, 's1', 'c9', [
      { path: 'events.jsonl', bytes: randomBytes(10), generation: 'g9' },
    ]);
    const stale = await archive
      .publishCheckpoint(alpha, 's1', { checkpointId: 'c9', parent: null, files: second, data: null })
      .catch((e: unknown) => e);
    expect(stale).toBeInstanceOf(ConflictError);
    expect((stale as ConflictError).details).toEqual({ latest: 'c1' });
    await expect(archive.readManifest(alpha, 's1', 'c9')).rejects.toBeInstanceOf(NotFoundError);
    expect((await archive.readManifest(alpha, 's1', 'latest')).checkpointId).toBe('c1');
  });

  it('of 12 concurrent publishers on the same parent exactly one wins; the others are told who', async () => {
    await publishEvents('s1', 'c0', null, randomBytes(10));
    const requests = await Promise.all(
      Array.from({ length: 12 }, async (_, i) => {
        const files = await uploadFiles(archive, alpha, 's1', `c${i + 1}`, [
          { path: 'events.jsonl', bytes: randomBytes(50), generation: `g${i + 1}` },
        ]);
        return { checkpointId: `c${i + 1}`, parent: 'c0', files, data: null };
      }),
    );
    const outcomes = await Promise.allSettled(
      requests.map((request) => archive.publishCheckpoint(alpha, 's1', request)),
    );
    const winners = outcomes.flatMap((outcome) =>
      outcome.status === 'fulfilled' ? [outcome.value.checkpointId] : [],
    );
    expect(winners).toHaveLength(1);
    for (const outcome of outcomes) {
      if (outcome.status === 'rejected') {
        expect(outcome.reason).toBeInstanceOf(ConflictError);
        expect((outcome.reason as ConflictError).details).toEqual({ latest: winners[0] });
      }
    }
    expect((await archive.readManifest(alpha, 's1', 'latest')).checkpointId).toBe(winners[0]);
    expect((await archive.getSession(alpha, 's1')).checkpointId).toBe(winners[0]);
  });

  it('refuses a checkpoint whose objects are absent or of the wrong size, naming them, and writes nothing', async () => {
    const bytes = randomBytes(3 * BLOCK_BYTES + 10);
    const [file] = await uploadFiles(archive, alpha, 's1', 'c1', [
      { path: 'events.jsonl', bytes, generation: 'g1' },
    ]);
    // Claim the references of a longer file than was uploaded, and another file never uploaded.
    const request: PublishRequest = {
      checkpointId: 'c1',
      parent: null,
      files: [
        { ...file!, size: 4 * BLOCK_BYTES + 20 },
        { path: 'native/x', generation: 'g2', size: BLOCK_BYTES, sha256: sha256(Buffer.alloc(0)) },
      ],
      data: null,
    };
    const error = await archive.publishCheckpoint(alpha, 's1', request).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MissingObjectsError);
    expect((error as MissingObjectsError).details['missing']).toEqual([
      'blocks/g1/3',
      'blocks/g2/0',
      'tails/c1/g1',
    ]);
    await expect(archive.readManifest(alpha, 's1', 'c1')).rejects.toBeInstanceOf(NotFoundError);
    await expect(archive.readManifest(alpha, 's1', 'latest')).rejects.toBeInstanceOf(NotFoundError);
    await expect(archive.getSession(alpha, 's1')).rejects.toBeInstanceOf(NotFoundError);
  });

  it('refuses a first checkpoint that references objects before claiming the session', async () => {
    const huge = 2 ** 50;
    const error = await archive
      .publishCheckpoint(alpha, 'new', {
        checkpointId: 'c1',
        parent: null,
        files: [{ path: 'events.jsonl', generation: 'g1', size: huge + 1, sha256: sha256(Buffer.alloc(0)) }],
        data: null,
      })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MissingObjectsError);
    // Every reference is counted; the first 1,000 are listed, whatever size the manifest claims.
    expect((error as MissingObjectsError).details['missingCount']).toBe(huge / BLOCK_BYTES + 1);
    expect((error as MissingObjectsError).details['missing']).toHaveLength(1000);
    // Nothing was written: the session is still free for anyone.
    expect(await archive.putObject(beta, 'new', 'blocks/g1/0', randomBytes(BLOCK_BYTES))).toEqual({
      created: true,
    });
    // An owned session with a few blocks: the count stays exact and cheap for a huge claimed size.
    const counted = await archive
      .publishCheckpoint(beta, 'new', {
        checkpointId: 'c1',
        parent: null,
        files: [{ path: 'events.jsonl', generation: 'g1', size: huge, sha256: sha256(Buffer.alloc(0)) }],
        data: null,
      })
      .catch((e: unknown) => e);
    expect((counted as MissingObjectsError).details['missingCount']).toBe(huge / BLOCK_BYTES - 1);
    expect((counted as MissingObjectsError).details['missing']).toHaveLength(1000);
  });

  it('validates object keys and sizes before anything is stored', async () => {
    for (const key of [
      'blocks/g1/01',
      'blocks/g1/-1',
      'blocks/g1/x',
      'blocks/../0',
      'tails/c1',
      'other/g1/0',
      'blocks/g1/0/1',
    ]) {
      await expect(archive.putObject(alpha, 's1', key, randomBytes(BLOCK_BYTES)), key).rejects.toBeInstanceOf(
        InvalidArgumentError,
      );
    }
    await expect(
      archive.putObject(alpha, 's1', 'blocks/g1/0', randomBytes(BLOCK_BYTES - 1)),
    ).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(archive.putObject(alpha, 's1', 'tails/c1/g1', Buffer.alloc(0))).rejects.toBeInstanceOf(
      InvalidArgumentError,
    );
    await expect(
      archive.putObject(alpha, 's1', 'tails/c1/g1', randomBytes(BLOCK_BYTES)),
    ).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(
      archive.putObject(alpha, '..', 'blocks/g1/0', randomBytes(BLOCK_BYTES)),
    ).rejects.toBeInstanceOf(InvalidArgumentError);
    expect(store.calls.put).toBe(0);
    // A valid object is stored once; the same bytes again are a retry, others a conflict.
    const block = randomBytes(BLOCK_BYTES);
    expect(await archive.putObject(alpha, 's1', 'blocks/g1/0', block)).toEqual({ created: true });
    expect(await archive.putObject(alpha, 's1', 'blocks/g1/0', block)).toEqual({ created: false });
    await expect(
      archive.putObject(alpha, 's1', 'blocks/g1/0', randomBytes(BLOCK_BYTES)),
    ).rejects.toBeInstanceOf(ObjectExistsError);
    expect((await archive.getObject(alpha, 's1', 'blocks/g1/0')).equals(block)).toBe(true);
  });

  it("keeps sessions apart: another tenant's write is 403 before any byte lands, its read 404", async () => {
    await publishEvents('s1', 'c1', null, randomBytes(BLOCK_BYTES + 1));
    store.resetCounts();
    const forbidden = await archive
      .putObject(beta, 's1', 'blocks/g7/0', randomBytes(BLOCK_BYTES))
      .catch((e: unknown) => e);
    expect(forbidden).toBeInstanceOf(ForbiddenError);
    expect((forbidden as ForbiddenError).message).toBe('tenant mismatch');
    await expect(
      archive.publishCheckpoint(beta, 's1', { checkpointId: 'c2', parent: 'c1', files: [], data: null }),
    ).rejects.toBeInstanceOf(ForbiddenError);
    expect(store.calls.put + store.calls.swapPointer).toBe(0);
    await expect(archive.getObject(beta, 's1', 'blocks/g1/0')).rejects.toBeInstanceOf(NotFoundError);
    await expect(archive.readManifest(beta, 's1', 'latest')).rejects.toBeInstanceOf(NotFoundError);
    await expect(archive.readManifest(beta, 's1', 'c1')).rejects.toBeInstanceOf(NotFoundError);
    await expect(archive.restoreFile(beta, 's1', 'c1', 'events.jsonl')).rejects.toBeInstanceOf(NotFoundError);
    await expect(archive.getSession(beta, 's1')).rejects.toBeInstanceOf(NotFoundError);
    expect((await archive.listSessions(beta, { limit: 10 })).sessions).toEqual([]);
    expect(store.calls.get + store.calls.readPointer + store.calls.list).toBe(0);
  });

  it('fails a restore of damaged bytes with an integrity error, never silently', async () => {
    const bytes = randomBytes(2 * BLOCK_BYTES + 5);
    await publishEvents('s1', 'c1', null, bytes);
    const damaged = Buffer.from(bytes.subarray(BLOCK_BYTES, 2 * BLOCK_BYTES));
    damaged[100] = (damaged[100] ?? 0) ^ 0xff;
    await tamper('s1/blocks/g1/1', damaged);
    await expect(restoreBytes(archive, alpha, 's1', 'c1', 'events.jsonl')).rejects.toBeInstanceOf(
      IntegrityError,
    );
    // A later block of the wrong size fails the stream when it is reached (the answer has begun).
    await tamper('s1/blocks/g1/1', randomBytes(10));
    const { stream } = await archive.restoreFile(alpha, 's1', 'c1', 'events.jsonl');
    await expect(readAllBytes(stream)).rejects.toBeInstanceOf(IntegrityError);
    // The first one is read before the stream is handed out: a file whose objects are gone fails
    // before its answer starts.
    await tamper('s1/blocks/g1/0', randomBytes(10));
    await expect(archive.restoreFile(alpha, 's1', 'c1', 'events.jsonl')).rejects.toBeInstanceOf(
      IntegrityError,
    );
  });

  it('reports a storage fault as unavailable, never as absent', async () => {
    await publishEvents('s1', 'c1', null, randomBytes(10));
    store.failWhen = (method) => method === 'get' || method === 'readPointer';
    await expect(archive.readManifest(alpha, 's1', 'latest')).rejects.toBeInstanceOf(StorageUnavailableError);
    await expect(archive.readManifest(alpha, 's1', 'c1')).rejects.toBeInstanceOf(StorageUnavailableError);
    await expect(archive.getObject(alpha, 's1', 'tails/c1/g1')).rejects.toBeInstanceOf(
      StorageUnavailableError,
    );
    await expect(archive.restoreFile(alpha, 's1', 'c1', 'events.jsonl')).rejects.toBeInstanceOf(
      StorageUnavailableError,
    );
  });

  it('checks a manifest of 2,000 blocks with fewer than 10 storage requests', async () => {
    const block = randomBytes(BLOCK_BYTES);
    const keys = Array.from({ length: 2000 }, (_, i) => `blocks/g1/${i}`);
    // Uploaded through another instance: this one has to ask the storage about every block.
    const uploader = new SessionArchive(plainArchiveStorage(store, index));
    for (let start = 0; start < keys.length; start += 32) {
      await Promise.all(
        keys.slice(start, start + 32).map((key) => uploader.putObject(alpha, 's1', key, block)),
      );
    }
    const request: PublishRequest = {
      checkpointId: 'c1',
      parent: null,
      files: [{ path: 'events.jsonl', generation: 'g1', size: 2000 * BLOCK_BYTES, sha256: sha256(block) }],
      data: null,
    };
    store.resetCounts();
    const before = httpRequests();
    await archive.publishCheckpoint(alpha, 's1', request);
    const calls = Object.values(store.calls).reduce((sum, count) => sum + count, 0);
    // The whole publish (manifest lookup, latest, listing, manifest, swap, index check) stays small.
    expect(store.calls.list).toBe(1);
    expect(store.calls.head).toBe(0);
    expect(calls).toBeLessThan(10);
    if (backend.name === 'blob') {
      // Counted by a pipeline policy on the real HTTP requests (so the listing pages count too).
      expect(httpRequests() - before).toBeGreaterThan(3);
      expect(httpRequests() - before).toBeLessThan(10);
    }

    // The next checkpoint checks only what its parent did not: one new block, probed.
    await uploader.putObject(alpha, 's1', 'blocks/g1/2000', block);
    store.resetCounts();
    await archive.publishCheckpoint(alpha, 's1', {
      checkpointId: 'c2',
      parent: 'c1',
      files: [{ path: 'events.jsonl', generation: 'g1', size: 2001 * BLOCK_BYTES, sha256: sha256(block) }],
      data: null,
    });
    expect(store.calls.list).toBe(0);
    expect(store.calls.head).toBe(1);
    // A missing new block is still found.
    store.resetCounts();
    const missing = await archive
      .publishCheckpoint(alpha, 's1', {
        checkpointId: 'c3',
        parent: 'c2',
        files: [{ path: 'events.jsonl', generation: 'g1', size: 2003 * BLOCK_BYTES, sha256: sha256(block) }],
        data: null,
      })
      .catch((e: unknown) => e);
    expect((missing as MissingObjectsError).details['missing']).toEqual(['blocks/g1/2001', 'blocks/g1/2002']);
  });
  it('asks the storage only about the objects this instance did not store itself', async () => {
    const block = randomBytes(BLOCK_BYTES);
    const tail = randomBytes(100);
    const uploader = new SessionArchive(plainArchiveStorage(store, index));
    // Blocks 0-9 and the tail through this instance, 10-19 through another.
    for (let i = 0; i < 20; i++) {
      await (i < 10 ? archive : uploader).putObject(alpha, 's1', `blocks/g1/${i}`, block);
    }
    await archive.putObject(alpha, 's1', 'tails/c1/g1', tail);
    const file = (blocks: number) => ({
      path: 'events.jsonl',
      generation: 'g1',
      size: blocks * BLOCK_BYTES + tail.length,
      sha256: sha256(Buffer.concat([...Array.from({ length: blocks }, () => block), tail])),
    });
    const publish = (checkpointId: string, blocks: number) =>
      archive.publishCheckpoint(alpha, 's1', {
        checkpointId,
        parent: null,
        files: [file(blocks)],
        data: null,
      });

    // All its objects stored here: published without one storage request about them.
    store.resetCounts();
    await publish('c1', 10);
    expect(store.calls.list).toBe(0);
    expect(store.calls.head).toBe(0);
    // A restore lists nothing either: it checks each object as it reads it.
    store.resetCounts();
    expect((await restoreBytes(archive, alpha, 's1', 'c1', 'events.jsonl')).length).toBe(file(10).size);
    expect(store.calls.list).toBe(0);

    // Blocks 10-19 were stored elsewhere: listed (the tail of c2 too, which nobody stored).
    store.resetCounts();
    const missing = await archive
      .publishCheckpoint(alpha, 's1', { checkpointId: 'c2', parent: 'c1', files: [file(22)], data: null })
      .catch((e: unknown) => e);
    expect(store.calls.list).toBe(2);
    expect((missing as MissingObjectsError).details['missing']).toEqual([
      'blocks/g1/20',
      'blocks/g1/21',
      'tails/c2/g1',
    ]);
  });
});
