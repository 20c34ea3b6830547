import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import { SESSION_TOMBSTONE } from '../../shared/archive/sessionRetention';
import { objectKey } from '../../shared/protocol/snapshots/identifiers';
import { keysOf } from '../../shared/threads/layout';
import {
  decodeCheckpointRecord,
  decodeThreadRecord,
  encodeCheckpointRecord,
} from '../../shared/threads/records';
import { azurite } from '../support/azurite';
import { allItems, fileBytes, publishFile, put, putLine } from '../support/retentionSeed';
import { type Backend, createRetentionWorld, type RetentionWorld } from '../support/retentionWorld';
import { buildSnapshot, newKeyPair } from '../support/snapshotTestKit';

/**
 * `cairn verify` on both backends: nothing on a clean store; a deleted block, a truncated object, a
 * dangling `latest` and a planted orphan found (and their thread and snapshot equivalents); bytes
 * changed in place found by hashing.
 */

const T = 'tenant-v';

describe.each<Backend>(['local', 'blob'])('verify on the %s backend', (backend) => {
  let world: RetentionWorld;
  let snapshotId: string;
  let snapshotPart: [string, number, Buffer];

  beforeEach(async () => {
    world = await createRetentionWorld(backend, azurite());
    // Threads with a rewind and a namespace; a session of two checkpoints; a snapshot.
    await putLine(world.threads, T, 't', 4);
    await world.threads.rewind(T, 't', { ns: '', checkpointId: 'c002' });
    await world.threads.putCheckpoint(T, 't', put('c005', 'c002', { version: 9 }));
    await putLine(world.threads, T, 't', 2, { prefix: 's', ns: 'sub' });
    await publishFile(world.archive, T, 's1', 'c1', null, fileBytes(70_000, 's1'));
    await publishFile(world.archive, T, 's1', 'c2', 'c1', fileBytes(140_000, 's1'));
    await publishFile(world.archive, T, 's2', 'c1', null, fileBytes(500, 's2'));
    const built = buildSnapshot(
      'w1',
      [
        { path: 'a.txt', bytes: Buffer.from('alpha') },
        { path: 'b.bin', bytes: fileBytes(3 * 1024 * 1024, 'big') },
      ],
      newKeyPair().privateKey,
    );
    for (const [sha, part, bytes] of built.parts)
      await world.snapshots.putPart(T, 'w1', sha, String(part), bytes);
    await world.snapshots.publish(T, 'w1', {
      manifest: built.manifest,
      signature: built.signature,
      parent: null,
      allowExternalSymlinks: false,
    });
    snapshotId = built.id;
    snapshotPart = built.parts.find(([, , bytes]) => bytes.length === 5)!;
  });
  afterEach(async () => world.destroy());

  it('finds nothing on a clean store, says how it sampled, and that the audit chain was not checked', async () => {
    const sampled = await world.verifier().verifyTenant(T, { readData: false });
    expect(sampled).toMatchObject({
      tenant: T,
      ok: true,
      findings: [],
      findingCount: 0,
      orphans: [],
      orphanCount: 0,
      audit: { status: 'not_checked', reason: 'auditing off' },
    });
    expect(sampled.checked).toMatchObject({
      threads: 1,
      checkpoints: 7,
      sessions: 2,
      manifests: 3,
      snapshots: 1,
    });
    expect(sampled.checked.hashed).toBeGreaterThan(0);
    expect(sampled.sampling).toMatch(/1 in 16/);
    const full = await world.verifier().verifyTenant(T, { readData: true });
    expect(full).toMatchObject({ ok: true, findingCount: 0, orphanCount: 0 });
    expect(full.checked.hashed).toBeGreaterThan(sampled.checked.hashed);
    expect(full.checked.bytesHashed).toBeGreaterThanOrEqual(140_000 + 70_000 + 500 + 3 * 1024 * 1024);
    expect(full.sampling).toMatch(/every byte/);
  });

  it('finds a deleted block, a truncated object, a dangling latest and a planted orphan', async () => {
    await world.sessionObjects.delete('s1/blocks/g1/1');
    // Truncated: the tail of c2 replaced by fewer bytes.
    const tail = (await world.sessionObjects.get('s1/tails/c2/g1'))!;
    await world.sessionObjects.delete('s1/tails/c2/g1');
    await world.sessionObjects.put('s1/tails/c2/g1', tail.subarray(0, tail.length - 10));
    await world.sessionObjects.swapPointer('s2/latest', 'c1', 'c9');
    await world.sessionObjects.put('s2/blocks/planted/0', fileBytes(65_536, 'orphan'));

    const report = await world.verifier().verifyTenant(T, { readData: false });
    expect(report.ok).toBe(false);
    const found = report.findings.map(({ domain, kind, key }) => [domain, kind, key]);
    expect(found).toEqual(
      expect.arrayContaining([
        ['sessions', 'missing', 's1/blocks/g1/1'],
        ['sessions', 'wrong_size', 's1/tails/c2/g1'],
        ['sessions', 'dangling_latest', 's2/latest'],
      ]),
    );
    expect(report.orphans).toEqual([
      expect.objectContaining({
        domain: 'sessions',
        key: 's2/blocks/planted/0',
        size: 65_536,
        collectable: true,
      }),
    ]);
    // With an hour's grace the planted orphan is young: listed, not collectable, not a problem by itself.
    const young = await world.verifier({ graceMs: 3_600_000 }).verifyTenant(T, { readData: false });
    expect(young.collectableOrphans).toBe(0);
    expect(young.orphanCount).toBe(1);
  });

  it('finds a thread value that is gone, a head whose record is gone, and bytes changed in place (hashing every byte)', async () => {
    const space = world.threadSpace(T);
    const thread = decodeThreadRecord((await space.read('t/t'))!.value, 't');
    const keys = keysOf(thread);
    const record = thread.heads.get('')!.record;
    // The head's `messages` value is held in its record (c005's), `static` in c001's, where it was
    // stored. Without c005's record, its value is gone too.
    const messages = keys.value('', record.valueSources['messages']!, 'messages');
    await space.delete(keys.record('c005', ''));
    // A value of the same size, other bytes (the record stored again around it): only a hash
    // finds it.
    const holder = keys.record('c001', '');
    const stored = decodeCheckpointRecord((await space.read(holder))!.value, 'c001');
    const inline = Object.fromEntries(
      Object.entries(stored.inline ?? {}).map(([channel, bytes]) => [
        channel,
        Buffer.from(bytes.toString('utf8').replace('true', 'eurt')),
      ]),
    );
    expect(inline).not.toEqual(stored.inline);
    await space.write(holder, encodeCheckpointRecord({ ...stored, inline }));

    const report = await world.verifier().verifyTenant(T, { readData: true });
    const found = report.findings.map(({ domain, kind, key }) => [domain, kind, key]);
    expect(found).toEqual(
      expect.arrayContaining([
        ['threads', 'missing', messages],
        ['threads', 'dangling_head', keys.record('c005', '')],
        ['threads', 'wrong_hash', holder],
      ]),
    );
    // Data no thread names (another incarnation) is an orphan.
    await space.write('d/t/lost-incarnation/n/n', Buffer.alloc(0));
    const orphans = (await world.verifier().verifyTenant(T, { readData: false })).orphans.map((o) => o.key);
    expect(orphans).toContain('d/t/lost-incarnation/n/n');
    expect((await allItems(space, 'd/t/lost')).length).toBe(1);
  });

  it('finds a snapshot part that is gone or truncated, a dangling latest and unreferenced parts', async () => {
    const store = world.snapshotStores.forTenant(T);
    const [sha] = snapshotPart;
    const alpha = (await store.get(objectKey(sha, 0)))!;
    await store.delete(objectKey(sha, 0));
    await store.put(objectKey(sha, 0), alpha.subarray(0, 3));
    const parts: string[] = [];
    for await (const item of store.list('objects/')) if (item.size === 2 * 1024 * 1024) parts.push(item.key);
    await store.delete(parts[0]!);
    await store.put('objects/' + 'f'.repeat(64) + '/0', Buffer.from('nobody references me'));
    await store.swapPointer('workspaces/w1/latest', snapshotId, 'e'.repeat(64));

    const report = await world.verifier().verifyTenant(T, { readData: false });
    const found = report.findings.map(({ domain, kind, key }) => [domain, kind, key]);
    expect(found).toEqual(
      expect.arrayContaining([
        ['snapshots', 'wrong_size', objectKey(sha, 0)],
        ['snapshots', 'missing', parts[0]],
        ['snapshots', 'dangling_latest', 'workspaces/w1/latest'],
      ]),
    );
    expect(report.orphans.map((orphan) => orphan.key)).toEqual([`objects/${'f'.repeat(64)}/0`]);
  });

  it('skips a session being deleted', async () => {
    await world.sessionObjects.swapPointer('s2/latest', 'c1', SESSION_TOMBSTONE);
    const report = await world.verifier().verifyTenant(T, { readData: false });
    expect(report.findings).toEqual([]);
    expect(report.checked.sessions).toBe(1);
  });
});
