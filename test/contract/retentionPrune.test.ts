import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';

import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import { plainArchiveStorage } from '../../shared/archive/sealedArchive';
import { SessionArchive } from '../../shared/archive/sessionArchive';
import { noTransactionalAuditLog } from '../../shared/audit/pending';
import type { PruneReport, TenantPruneReport } from '../../shared/jobs/retentionPrune';
import { MemoryFacts } from '../../shared/memory/memory';
import { ConflictError, NotFoundError } from '../../shared/protocol/errors';
import { keysOf, parseDataKey } from '../../shared/threads/layout';
import { decodeCheckpointRecord, encodeCheckpointRecord, withoutInline } from '../../shared/threads/records';
import { ThreadStore } from '../../shared/threads/threadStore';
import { azurite } from '../support/azurite';
import { allItems, fileBytes, publishFile, put, putLine, restored } from '../support/retentionSeed';
import {
  type Backend,
  createRetentionWorld,
  MAX_VALUE_BYTES,
  RequestCounter,
  type RetentionWorld,
  silent,
} from '../support/retentionWorld';
import { buildSnapshot, newKeyPair } from '../support/snapshotTestKit';

/**
 * The retention rules (docs/retention.md), each on both backends, against the real stores: the
 * policy's deletions, what is kept byte for byte, the garbage collected and the young garbage
 * spared, the counts of the report.
 */

const HOUR = 3_600_000;
const T = 'tenant-a';

function only(report: PruneReport, tenant = T): TenantPruneReport {
  const found = report.tenants.find((entry) => entry.tenant === tenant);
  if (found === undefined) throw new Error(`no report for ${tenant}: ${JSON.stringify(report)}`);
  return found;
}

const idOf = (key: string) => {
  const item = parseDataKey(key)?.item;
  return item?.kind === 'record' ? item.checkpointId : undefined;
};

describe.each<Backend>(['local', 'blob'])('retention prune on the %s backend', (backend) => {
  let world: RetentionWorld;

  beforeEach(async () => {
    world = await createRetentionWorld(backend, azurite());
  });
  afterEach(async () => world.destroy());

  const recordIds = async (tenant = T) =>
    (await allItems(world.threadSpace(tenant), 'd/'))
      .map((item) => idOf(item.key))
      .filter((id) => id !== undefined)
      .sort();

  it('keeps everything by default and removes only expired memory facts', async () => {
    await putLine(world.threads, T, 't1', 4);
    await world.kvStores.forTenant(T).write('interactions/2020-01-01.jsonl', Buffer.from('{}\n'));
    const pastMemory = new MemoryFacts({ store: world.memoryStore, now: () => Date.now() - HOUR });
    await pastMemory.remember({ tenant: T }, 'users/1', 'old', 'expired', { ttl: 60 });
    await pastMemory.remember({ tenant: T }, 'users/1', 'older', 'expired', { ttl: 60 });
    await world.memory.remember({ tenant: T }, 'users/1', 'kept', 'lives', { ttl: 3600 });
    await world.memory.remember({ tenant: T }, 'users/1', 'forever', 'lives');
    const before = await allItems(world.threadSpace(T));

    const report = only(await world.pruner().run(silent));
    expect(report).toMatchObject({
      threadsDeleted: 0,
      threadsBusy: 0,
      checkpointsDeleted: 0,
      memoryItemsDeleted: 2,
      sessionsDeleted: 0,
      objectsDeleted: 0,
      bytesFreed: 0,
      more: false,
    });
    expect((await allItems(world.threadSpace(T))).map((item) => item.key)).toEqual(
      before.map((item) => item.key),
    );
    expect(await world.memory.recall({ tenant: T }, 'users/1', 'kept')).not.toBeNull();
    expect(await world.memory.recall({ tenant: T }, 'users/1', 'forever')).not.toBeNull();
    expect(await world.kvStores.forTenant(T).head('interactions/2020-01-01.jsonl')).not.toBeNull();
  });

  it('deletes threads past their time to live with all their data, skips one a live run holds, and counts each', async () => {
    const old = new ThreadStore({
      storeOf: (tenant) => world.kvStores.forSpace('threads', tenant),
      maxValueBytes: MAX_VALUE_BYTES,
      now: () => Date.now() - 2 * HOUR,
    });
    await putLine(old, T, 'expired-1', 3);
    await putLine(old, T, 'expired-2', 2);
    await putLine(world.threads, T, 'held', 2);
    await world.threads.startRun(T, 'held', { onBusy: 'reject', busyTimeoutMs: 0, leaseMs: 600_000 });
    // No wait: `fresh` is written, and the policy runs, on a clock 1.5 s ahead of the one that
    // changed `held` last. The policy's clock stops here: `fresh` changed just now, `held` over a
    // second ago.
    const ahead = new ThreadStore({
      storeOf: (tenant) => world.kvStores.forSpace('threads', tenant),
      maxValueBytes: MAX_VALUE_BYTES,
      now: () => Date.now() + 1500,
    });
    await putLine(ahead, T, 'fresh', 2);
    const now = Date.now() + 1500;
    const items = await allItems(world.threadSpace(T));
    const ofThread = (id: string) =>
      items.filter((item) => item.key === `t/${id}` || item.key.startsWith(`d/${id}/`));
    const expiredItems = [...ofThread('expired-1'), ...ofThread('expired-2')];

    await world.policies.set(T, { threadTtlSeconds: 1 });
    const report = only(await world.pruner({ now: () => now }).run(silent));
    expect(report).toMatchObject({
      threadsDeleted: 2,
      threadsBusy: 1,
      checkpointsDeleted: 0,
      objectsDeleted: expiredItems.length,
      bytesFreed: expiredItems.reduce((sum, item) => sum + item.size, 0),
      more: false,
    });
    await expect(world.threads.getThread(T, 'expired-1')).rejects.toBeInstanceOf(NotFoundError);
    const left = (await allItems(world.threadSpace(T))).map((item) => item.key);
    expect(left.filter((key) => key.includes('expired'))).toEqual([]);
    expect((await world.threads.getCheckpoint(T, 'fresh', '')).checkpointId).toBe('c002');
    expect((await world.threads.getThread(T, 'held')).run?.status).toBe('running');
    expect((await world.states.read(T)).threadIntents).toEqual([]);
    // A thread created again under the name starts empty.
    await world.threads.createThread(T, 'expired-1');
    await expect(world.threads.getCheckpoint(T, 'expired-1', '')).rejects.toBeInstanceOf(NotFoundError);
  });

  it('keepCheckpoints keeps each head and its n - 1 ancestors per namespace, drops branches, and keeps inherited values', async () => {
    // c001 → c002 → c003 → c004; rewind to c002; c005 → c006 on c002. Namespace sub: s001 → s002 → s003.
    await putLine(world.threads, T, 't', 4);
    await world.threads.rewind(T, 't', { ns: '', checkpointId: 'c002' });
    await world.threads.putCheckpoint(T, 't', put('c005', 'c002', { version: 10 }));
    await world.threads.putCheckpoint(T, 't', put('c006', 'c005', { version: 11 }));
    await putLine(world.threads, T, 't', 3, { prefix: 's', ns: 'sub' });
    const before = await world.threads.getCheckpoint(T, 't', '', 'c005');

    await world.policies.set(T, { keepCheckpoints: 2 });
    const report = only(await world.pruner().run(silent));
    expect(report.checkpointsDeleted).toBe(5);
    expect(report.threadsDeleted).toBe(0);
    expect(await recordIds()).toEqual(['c005', 'c006', 's002', 's003']);
    // Values the kept checkpoints inherit (`static`, stored by c001) stay; c005 reads as before.
    const after = await world.threads.getCheckpoint(T, 't', '', 'c005');
    expect(after.values).toEqual(before.values);
    expect(after.values['static']?.data.toString()).toBe(JSON.stringify({ static: true }));
    // Values and writes of removed checkpoints are gone; nothing unreferenced is left.
    const verify = await world.verifier().verifyTenant(T, { readData: true });
    expect(verify).toMatchObject({ ok: true, findingCount: 0, orphanCount: 0 });
    // A second run finds nothing more.
    expect(only(await world.pruner().run(silent))).toMatchObject({
      checkpointsDeleted: 0,
      objectsDeleted: 0,
    });
  });

  it('values stored by what they add: pruning a branch whose pieces the other shares keeps every kept checkpoint byte for byte, and verify names the checkpoints a missing or damaged pack fails', async () => {
    const message = (seed: string) =>
      Buffer.concat(
        Array.from({ length: 10 }, (_, i) => createHash('sha256').update(`${seed}/${i}`).digest()),
      ).subarray(0, 300);
    const values = new Map<string, Buffer>();
    const store = async (id: string, parent: string | null, version: number, data: Buffer) => {
      values.set(id, data);
      await world.threads.putCheckpoint(T, 't', {
        checkpointId: id,
        ns: '',
        parent,
        v: 4,
        checkpoint: { type: 'json', data: Buffer.from('{}') },
        metadata: {},
        channelVersions: { m: version },
        values: { m: { type: 'bytes', data } },
      });
    };
    // Branch one: c001 → … → c006, each adding a message; branch two forks from c003: c007 → c008.
    let value = Buffer.concat(Array.from({ length: 40 }, (_, i) => message(`m${i}`)));
    await store('c001', null, 1, value);
    for (let i = 2; i <= 6; i++) {
      value = Buffer.concat([value, message(`one${i}`)]);
      await store(`c00${i}`, `c00${i - 1}`, i, value);
    }
    const fork = Buffer.concat([values.get('c003') as Buffer, message('two7')]);
    await store('c007', 'c003', 4, fork);
    await store('c008', 'c007', 5, Buffer.concat([fork, message('two8')]));
    const readBack = async (ids: readonly string[]) => {
      for (const id of ids) {
        const checkpoint = await world.threads.getCheckpoint(T, 't', '', id);
        expect(checkpoint.values['m']?.data.equals(values.get(id) as Buffer), id).toBe(true);
      }
    };
    const packKeys = async () =>
      (await allItems(world.threadSpace(T), 'd/')).filter(
        (item) => parseDataKey(item.key)?.item?.kind === 'pack',
      );

    // The abandoned branch goes; what the fork shares with it stays in the records kept.
    await world.policies.set(T, { dropBranches: true });
    expect(only(await world.pruner().run(silent)).checkpointsDeleted).toBe(3);
    expect(await recordIds()).toEqual(['c001', 'c002', 'c003', 'c007', 'c008']);
    await readBack(['c001', 'c002', 'c003', 'c007', 'c008']);
    // The removed records' packs stay apart, though no one names them, until the next run past
    // the grace (a rewind racing the removal could have named them).
    expect((await packKeys()).map((item) => item.key.split('/').at(-1)).sort()).toEqual([
      'c004',
      'c005',
      'c006',
    ]);
    const spilled = await world.verifier().verifyTenant(T, { readData: true });
    expect(spilled).toMatchObject({ findingCount: 0, orphanCount: 3 });
    expect(await world.verifier({ graceMs: HOUR }).verifyTenant(T, { readData: true })).toMatchObject({
      ok: true,
      collectableOrphans: 0,
    });
    expect(only(await world.pruner().run(silent))).toMatchObject({
      checkpointsDeleted: 0,
      objectsDeleted: 3,
    });
    expect(await packKeys()).toEqual([]);
    expect(await world.verifier().verifyTenant(T, { readData: true })).toMatchObject({
      ok: true,
      orphanCount: 0,
    });

    // Then the records the fork's pieces are in: their packs stay, apart, as long as c007 and c008 name them.
    await world.policies.set(T, { keepCheckpoints: 2 });
    expect(only(await world.pruner().run(silent)).checkpointsDeleted).toBe(3);
    expect(await recordIds()).toEqual(['c007', 'c008']);
    await readBack(['c007', 'c008']);
    // The next run collects the packs apart that c007 and c008 do not name.
    only(await world.pruner().run(silent));
    await readBack(['c007', 'c008']);
    const packs = await packKeys();
    expect(packs.length).toBeGreaterThan(0);
    expect(await world.verifier().verifyTenant(T, { readData: true })).toMatchObject({
      ok: true,
      findingCount: 0,
      orphanCount: 0,
    });
    expect(only(await world.pruner({ fullPassEveryMs: 0 }).run(silent)).objectsDeleted).toBe(0);
    await readBack(['c007', 'c008']);

    // Damage: a pack gone, another with a byte changed. Verify names the checkpoints that need them.
    const [gone, damaged] = packs;
    const goneBytes = (await world.threadSpace(T).read(gone!.key))!.value;
    await world.threadSpace(T).delete(gone!.key);
    const report = await world.verifier().verifyTenant(T, { readData: true });
    expect(report.ok).toBe(false);
    const missing = report.findings.find((finding) => finding.kind === 'missing');
    expect(missing?.key).toBe(gone!.key);
    expect(missing?.detail).toMatch(/checkpoint c00[78] channel m/);
    await world.threadSpace(T).write(gone!.key, goneBytes);
    expect((await world.verifier().verifyTenant(T, { readData: true })).ok).toBe(true);
    if (damaged !== undefined) {
      const bytes = Buffer.from((await world.threadSpace(T).read(damaged.key))!.value);
      bytes[0] = (bytes[0] as number) ^ 1;
      await world.threadSpace(T).write(damaged.key, bytes);
      const again = await world.verifier().verifyTenant(T, { readData: true });
      const wrong = again.findings.find((finding) => finding.kind === 'wrong_hash');
      expect(wrong?.detail).toMatch(/checkpoint c00[78]/);
    }
  });

  it('values stored by what they add: a record stored again without its pack (a head retention restored) reads from its pack apart, and verify counts only a stored pack', async () => {
    // What a rewind that lands while retention removes its target leaves: the target's pack
    // spilled to its pack key, its record written back from the head's copy, which has no pack.
    const message = (seed: string) =>
      Buffer.concat(
        Array.from({ length: 10 }, (_, i) => createHash('sha256').update(`restored ${seed}/${i}`).digest()),
      ).subarray(0, 300);
    const values = new Map<string, Buffer>();
    let value = Buffer.alloc(0);
    for (let i = 1; i <= 4; i++) {
      value = Buffer.concat([
        value,
        ...Array.from({ length: i === 1 ? 20 : 1 }, (_, j) => message(`${i}/${j}`)),
      ]);
      const id = `c00${i}`;
      values.set(id, value);
      await world.threads.putCheckpoint(T, 'restored', {
        checkpointId: id,
        ns: '',
        parent: i === 1 ? null : `c00${i - 1}`,
        v: 4,
        checkpoint: { type: 'json', data: Buffer.from('{}') },
        metadata: {},
        channelVersions: { m: i },
        values: { m: { type: 'bytes', data: value } },
      });
    }
    const space = world.threadSpace(T);
    const { incarnation } = (await world.threads.auditOutbox(T, 'restored'))!;
    const keys = keysOf({ threadId: 'restored', incarnation });
    const recordKey = keys.record('c002', '');
    const stored = decodeCheckpointRecord((await space.read(recordKey))!.value, recordKey);
    expect(stored.pack?.length).toBeGreaterThan(0);
    await space.write(keys.pack('', 'c002'), stored.pack!);
    await space.write(recordKey, encodeCheckpointRecord(withoutInline(stored)));

    const readBack = async () => {
      const reader = new ThreadStore({
        storeOf: (tenant) => world.kvStores.forSpace('threads', tenant),
        maxValueBytes: MAX_VALUE_BYTES,
      });
      for (const id of ['c002', 'c003', 'c004']) {
        const checkpoint = await reader.getCheckpoint(T, 'restored', '', id);
        expect(checkpoint.values['m']?.data.equals(values.get(id) as Buffer), id).toBe(true);
      }
    };
    await readBack();
    expect(await world.verifier().verifyTenant(T, { readData: true })).toMatchObject({
      ok: true,
      findingCount: 0,
      orphanCount: 0,
    });
    // Retention keeps the pack apart while the record, which names it, has none of its own.
    expect(only(await world.pruner({ fullPassEveryMs: 0 }).run(silent)).objectsDeleted).toBe(0);
    await readBack();

    // Without the pack apart, that record does not count as holding its pack.
    await space.delete(keys.pack('', 'c002'));
    const report = await world.verifier().verifyTenant(T, { readData: true });
    expect(report.ok).toBe(false);
    const missing = report.findings.find((finding) => finding.kind === 'missing');
    expect(missing?.key).toBe(keys.pack('', 'c002'));
    expect(missing?.detail).toMatch(/checkpoint c00[234] channel m/);
  });

  it('values stored by what they add: a rewind to a checkpoint retention is removing reads it whole, from packs kept apart until no record names them', async () => {
    const message = (seed: string) =>
      Buffer.concat(
        Array.from({ length: 10 }, (_, i) => createHash('sha256').update(`raced ${seed}/${i}`).digest()),
      ).subarray(0, 300);
    const values = new Map<string, Buffer>();
    let value = Buffer.concat(Array.from({ length: 40 }, (_, i) => message(`first${i}`)));
    for (let i = 1; i <= 10; i++) {
      if (i > 1) value = Buffer.concat([value, message(`m${i}`)]);
      const id = `c${String(i).padStart(3, '0')}`;
      values.set(id, value);
      await world.threads.putCheckpoint(T, 'raced', {
        checkpointId: id,
        ns: '',
        parent: i === 1 ? null : `c${String(i - 1).padStart(3, '0')}`,
        v: 4,
        checkpoint: { type: 'json', data: Buffer.from('{}') },
        metadata: {},
        channelVersions: { m: i },
        values: { m: { type: 'bytes', data: value } },
      });
    }
    // The kept c008..c010 name none of c005's packs (c008 merged its tier): only a rewind does.
    await world.policies.set(T, { keepCheckpoints: 3 });
    let rewound = false;
    const report = only(
      await world
        .pruner({
          beforeDelete: async (key) => {
            const item = parseDataKey(key)?.item;
            if (rewound || item?.kind !== 'record' || item.checkpointId !== 'c005') return;
            rewound = true;
            // The rewind lands after the run chose what to remove, just before it removes c005.
            await world.anotherThreadStore().rewind(T, 'raced', { ns: '', checkpointId: 'c005' });
          },
        })
        .run(silent),
    );
    expect(rewound).toBe(true);
    expect(report.checkpointsDeleted).toBe(7);
    // The run found c005 a head once it had removed it, and stored its record again.
    expect((await recordIds()).filter((id) => ['c005', 'c008', 'c009', 'c010'].includes(id))).toEqual([
      'c005',
      'c008',
      'c009',
      'c010',
    ]);
    const reader = world.anotherThreadStore();
    const head = await reader.getCheckpoint(T, 'raced', '');
    expect(head.checkpointId).toBe('c005');
    expect(head.values['m']?.data.equals(values.get('c005') as Buffer)).toBe(true);
    expect(await world.verifier({ graceMs: HOUR }).verifyTenant(T, { readData: true })).toMatchObject({
      ok: true,
      findingCount: 0,
    });
    // The packs of all seven removed records are apart; c005 names those of c001..c005.
    const packs = async () =>
      (await allItems(world.threadSpace(T), 'd/raced/'))
        .map((item) => parseDataKey(item.key)?.item)
        .map((item) => (item?.kind === 'pack' ? item.checkpointId : ''))
        .filter((id) => id !== '')
        .sort();
    expect(await packs()).toEqual(['c001', 'c002', 'c003', 'c004', 'c005', 'c006', 'c007']);
    // The next run removes the branch the rewind left (c008..c010), keeps the packs c005 names
    // and collects those no one names.
    only(await world.pruner({ fullPassEveryMs: 0 }).run(silent));
    expect(await recordIds()).toContain('c005');
    const after = await packs();
    expect(after.filter((id) => id <= 'c007')).toEqual(['c001', 'c002', 'c003', 'c004', 'c005']);
    expect(
      (await reader.getCheckpoint(T, 'raced', '')).values['m']?.data.equals(values.get('c005') as Buffer),
    ).toBe(true);
    expect(await world.verifier({ graceMs: HOUR }).verifyTenant(T, { readData: true })).toMatchObject({
      ok: true,
      findingCount: 0,
    });
  });

  it('dropBranches keeps every head chain and deletes what rewinds left behind', async () => {
    await putLine(world.threads, T, 't', 4);
    await world.threads.rewind(T, 't', { ns: '', checkpointId: 'c002' });
    await world.threads.putCheckpoint(T, 't', put('c005', 'c002', { version: 10 }));
    const writesBefore = (await world.threads.getCheckpoint(T, 't', '', 'c001')).pendingWrites;

    await world.policies.set(T, { dropBranches: true });
    const report = only(await world.pruner().run(silent));
    expect(report.checkpointsDeleted).toBe(2);
    expect(await recordIds()).toEqual(['c001', 'c002', 'c005']);
    expect((await world.threads.getCheckpoint(T, 't', '', 'c001')).pendingWrites).toEqual(writesBefore);
    await expect(world.threads.getCheckpoint(T, 't', '', 'c004')).rejects.toBeInstanceOf(NotFoundError);
    expect(await world.verifier().verifyTenant(T, { readData: true })).toMatchObject({
      ok: true,
      orphanCount: 0,
    });
  });

  it('collects the values a refused put left once they are older than the grace, and spares younger ones', async () => {
    await putLine(world.threads, T, 't', 1);
    // A refused put whose values went inline leaves nothing (they go with its record). One whose
    // values were too big to go inline stored them apart first, and its refusal leaves them: as here,
    // a value of c002 no record names.
    const { incarnation } = (await world.threads.auditOutbox(T, 't'))!;
    await world
      .threadSpace(T)
      .write(
        keysOf({ threadId: 't', incarnation }).value('', 'c002/left', 'messages'),
        Buffer.from('json\n"x"'),
      );
    const orphans = (await allItems(world.threadSpace(T), 'd/')).filter((item) =>
      item.key.includes('/c002/'),
    );
    expect(orphans).toHaveLength(1);

    const young = only(await world.pruner({ graceMs: HOUR }).run(silent));
    expect(young.objectsDeleted).toBe(0);
    expect((await world.verifier({ graceMs: HOUR }).verifyTenant(T, { readData: false })).ok).toBe(true);
    expect((await world.verifier().verifyTenant(T, { readData: false })).collectableOrphans).toBe(1);

    const full = only(await world.pruner({ fullPassEveryMs: 0 }).run(silent));
    expect(full).toMatchObject({ objectsDeleted: 1, bytesFreed: orphans[0]!.size, checkpointsDeleted: 0 });
    expect((await world.threads.getCheckpoint(T, 't', '')).checkpointId).toBe('c001');
  });

  it('deletes sessions past their time to live, leaks none of their objects, and keeps the id with its tenant', async () => {
    const pastArchive = new SessionArchive(
      plainArchiveStorage(world.sessionObjects, world.sessionIndex),
      noTransactionalAuditLog,
      () => Date.now() - 2 * HOUR,
    );
    await publishFile(pastArchive, T, 'old', 'c1', null, fileBytes(70_000, 'one'));
    await publishFile(pastArchive, T, 'old', 'c2', 'c1', fileBytes(140_000, 'one'));
    await publishFile(world.archive, T, 'new', 'c1', null, fileBytes(1000, 'new'));
    const oldObjects: { key: string; size: number }[] = [];
    for await (const item of world.sessionObjects.list('old/'))
      if (item.key !== 'old/latest') oldObjects.push(item);

    await world.policies.set(T, { sessionTtlSeconds: 3600 });
    const report = only(await world.pruner().run(silent));
    expect(report).toMatchObject({
      sessionsDeleted: 1,
      objectsDeleted: oldObjects.length,
      bytesFreed: oldObjects.reduce((sum, item) => sum + item.size, 0),
      more: false,
    });
    const left: string[] = [];
    for await (const item of world.sessionObjects.list('old/')) left.push(item.key);
    expect(left).toEqual([]);
    await expect(world.archive.getSession(T, 'old')).rejects.toBeInstanceOf(NotFoundError);
    await expect(world.archive.readManifest(T, 'old', 'latest')).rejects.toBeInstanceOf(NotFoundError);
    expect((await world.archive.listSessions(T, { limit: 10 })).sessions.map((s) => s.id)).toEqual(['new']);
    expect(await restored(world.archive, T, 'new')).toEqual(fileBytes(1000, 'new'));
    // The id stays the tenant's: another tenant cannot take it; the tenant starts it anew.
    await expect(world.archive.putObject('tenant-b', 'old', 'tails/c1/g1', Buffer.from('x'))).rejects.toThrow(
      'tenant mismatch',
    );
    await publishFile(world.archive, T, 'old', 'c9', null, fileBytes(10, 'again'));
    expect(await restored(world.archive, T, 'old')).toEqual(fileBytes(10, 'again'));
  });

  it('a session being deleted refuses publishes and reads as absent until its young objects can go', async () => {
    const pastArchive = new SessionArchive(
      plainArchiveStorage(world.sessionObjects, world.sessionIndex),
      noTransactionalAuditLog,
      () => Date.now() - 2 * HOUR,
    );
    await publishFile(pastArchive, T, 's', 'c1', null, fileBytes(70_000, 'one'));
    await world.policies.set(T, { sessionTtlSeconds: 3600 });
    // The objects are younger than an hour's grace: the session is deleted, its objects wait.
    const first = only(await world.pruner({ graceMs: HOUR }).run(silent));
    expect(first.sessionsDeleted).toBe(1);
    await expect(world.archive.readManifest(T, 's', 'latest')).rejects.toBeInstanceOf(NotFoundError);
    await expect(
      world.archive.publishCheckpoint(T, 's', { checkpointId: 'c2', parent: null, files: [], data: null }),
    ).rejects.toBeInstanceOf(ConflictError);
    expect((await world.states.read(T)).sessionIntents.map((intent) => intent.sessionId)).toEqual(['s']);
    // Once old enough (a grace of 0 here), the next run finishes it: nothing is left, publishing works.
    expect(first.objectsDeleted).toBe(1);
    const second = only(await world.pruner().run(silent));
    expect(second).toMatchObject({ sessionsDeleted: 0, objectsDeleted: 2 });
    expect((await world.states.read(T)).sessionIntents).toEqual([]);
    await world.archive.publishCheckpoint(T, 's', {
      checkpointId: 'c2',
      parent: null,
      files: [],
      data: null,
    });
  });

  it("deletes the interaction log's days older than the policy keeps", async () => {
    const store = world.kvStores.forTenant(T);
    const day = (offset: number) => new Date(Date.now() - offset * 86_400_000).toISOString().slice(0, 10);
    for (const offset of [0, 1, 2, 40])
      await store.write(`interactions/${day(offset)}.jsonl`, Buffer.from(`{"d":${offset}}\n`));
    await world.policies.set(T, { interactionDays: 2 });
    const report = only(await world.pruner().run(silent));
    expect(report).toMatchObject({ objectsDeleted: 2, bytesFreed: '{"d":2}\n'.length + '{"d":40}\n'.length });
    const left = (await allItems(store, 'interactions/')).map((item) => item.key);
    expect(left).toEqual([`interactions/${day(1)}.jsonl`, `interactions/${day(0)}.jsonl`]);
  });

  it('a full pass collects unreferenced archive objects and snapshot parts, manifests before objects, and nothing a kept one needs', async () => {
    await publishFile(world.archive, T, 's', 'c1', null, fileBytes(70_000, 'one'));
    await publishFile(world.archive, T, 's', 'c2', 'c1', fileBytes(140_000, 'one'));
    // Uploaded, never published; and a manifest that lost its race.
    await world.archive.putObject(T, 's', 'blocks/abandoned/0', fileBytes(65_536, 'x'));
    await world.archive.putObject(T, 's', 'tails/c3/g1', Buffer.from('tail'));
    await world.sessionObjects.put(
      's/checkpoints/lost',
      Buffer.from(
        JSON.stringify({
          checkpointId: 'lost',
          parent: 'c1',
          createdAt: new Date().toISOString(),
          files: [],
          data: null,
        }),
      ),
    );
    const { privateKey } = newKeyPair();
    const snapshot = buildSnapshot('w1', [{ path: 'a.txt', bytes: Buffer.from('kept') }], privateKey);
    for (const [sha, part, bytes] of snapshot.parts)
      await world.snapshots.putPart(T, 'w1', sha, String(part), bytes);
    await world.snapshots.publish(T, 'w1', {
      manifest: snapshot.manifest,
      signature: snapshot.signature,
      parent: null,
      allowExternalSymlinks: false,
    });
    const stray = buildSnapshot('w1', [{ path: 'b.txt', bytes: Buffer.from('never published') }], privateKey);
    for (const [sha, part, bytes] of stray.parts)
      await world.snapshots.putPart(T, 'w1', sha, String(part), bytes);

    // The first run of a tenant is a full pass.
    const first = only(await world.pruner().run(silent));
    expect(first.objectsDeleted).toBe(3 + 1);
    expect(await restored(world.archive, T, 's')).toEqual(fileBytes(140_000, 'one'));
    expect(await restored(world.archive, T, 's', 'c1')).toEqual(fileBytes(70_000, 'one'));
    expect((await world.snapshots.read(T, 'w1', 'latest')).id).toBe(snapshot.id);
    const [part] = snapshot.parts;
    expect(await world.snapshots.getPart(T, 'w1', part![0], '0')).toEqual(Buffer.from('kept'));
    await expect(world.snapshots.getPart(T, 'w1', stray.parts[0]![0], '0')).rejects.toBeInstanceOf(
      NotFoundError,
    );
    expect(await world.verifier().verifyTenant(T, { readData: true })).toMatchObject({
      ok: true,
      orphanCount: 0,
    });
  });

  it('collects nothing of a session whose latest names a manifest that is not stored (damage is left for a human)', async () => {
    await publishFile(world.archive, T, 's', 'c1', null, fileBytes(70_000, 'one'));
    await world.sessionObjects.swapPointer('s/latest', 'c1', 'c9');
    expect(only(await world.pruner({ fullPassEveryMs: 0 }).run(silent)).objectsDeleted).toBe(0);
    expect(await restored(world.archive, T, 's', 'c1')).toEqual(fileBytes(70_000, 'one'));
  });

  it('a second run right after a complete one reads no thread: one listing of the thread records', async () => {
    for (let index = 0; index < 5; index++) await putLine(world.threads, T, `t${index}`, 3);
    await world.policies.set(T, { keepCheckpoints: 1 });
    // Blob's modification times are whole seconds: a second apart, the seeding is surely "before".
    await sleep(1100);
    expect(only(await world.pruner({ clockMarginMs: 1000 }).run(silent)).checkpointsDeleted).toBe(10);
    const counter = new RequestCounter();
    const report = only(await world.pruner({ counter, clockMarginMs: 1000 }).run(silent));
    expect(report).toMatchObject({ checkpointsDeleted: 0, objectsDeleted: 0 });
    expect(Object.fromEntries(counter.byMethod)).toEqual({ list: 1 });
    // A thread that changes is visited again.
    await world.threads.putCheckpoint(T, 't0', put('c004', 'c003', { version: 9 }));
    expect(only(await world.pruner({ clockMarginMs: 1000 }).run(silent)).checkpointsDeleted).toBe(1);
  });

  it('stops at its budget, says what it left, and the next runs go on where it stopped', async () => {
    for (let index = 0; index < 6; index++) await putLine(world.threads, T, `t${index}`, 4);
    await world.policies.set(T, { keepCheckpoints: 1 });
    const totals = { checkpointsDeleted: 0, objectsDeleted: 0, runs: 0 };
    for (;;) {
      const report = only(await world.pruner({ maxDeletes: 10 }).run(silent));
      totals.checkpointsDeleted += report.checkpointsDeleted;
      totals.objectsDeleted += report.objectsDeleted;
      totals.runs += 1;
      if (!report.more) break;
      expect(report.left).toContain('threads');
      expect(totals.runs).toBeLessThan(50);
    }
    expect(totals.runs).toBeGreaterThan(2);
    // 6 threads × 3 removed checkpoints, each with its record (holding its value) and pending writes.
    expect(totals).toMatchObject({ checkpointsDeleted: 18, objectsDeleted: 18 * 2 });
    expect(await world.verifier().verifyTenant(T, { readData: false })).toMatchObject({
      ok: true,
      orphanCount: 0,
    });
  });

  it('prunes one tenant when asked, and every tenant of the directory otherwise', async () => {
    await putLine(world.threads, 'tenant-a', 't', 3);
    await putLine(world.threads, 'tenant-b', 't', 3);
    await world.policies.set('tenant-a', { keepCheckpoints: 1 });
    await world.policies.set('tenant-b', { keepCheckpoints: 2 });
    const one = await world.pruner().run(silent, { tenant: 'tenant-b' });
    expect(one.tenants.map((entry) => [entry.tenant, entry.checkpointsDeleted])).toEqual([['tenant-b', 1]]);
    const all = await world.pruner().run(silent);
    expect(all.tenants.map((entry) => [entry.tenant, entry.checkpointsDeleted])).toEqual([
      ['tenant-a', 2],
      ['tenant-b', 0],
    ]);
  });
});
