import { setTimeout as sleep } from 'node:timers/promises';

import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import { plainArchiveStorage } from '../../shared/archive/sealedArchive';
import { SessionArchive } from '../../shared/archive/sessionArchive';
import { noTransactionalAuditLog } from '../../shared/audit/pending';
import type { PruneReport } from '../../shared/jobs/retentionPrune';
import { createLogger } from '../../shared/logging';
import { MemoryFacts } from '../../shared/memory/memory';
import { ConflictError, MissingObjectsError } from '../../shared/protocol/errors';
import type { PruneCounts } from '../../shared/retention/budget';
import { channelSegment } from '../../shared/threads/identifiers';
import { parseDataKey } from '../../shared/threads/layout';
import { ThreadStore } from '../../shared/threads/threadStore';
import { azurite } from '../support/azurite';
import { allItems, fileBytes, publishFile, put, putLine, restored } from '../support/retentionSeed';
import {
  type Backend,
  createRetentionWorld,
  MAX_VALUE_BYTES,
  type RetentionWorld,
  silent,
  StorageFault,
} from '../support/retentionWorld';
import { buildSnapshot, newKeyPair } from '../support/snapshotTestKit';

/**
 * Retention under concurrency and failure, on both backends: overlapping runs delete each item once
 * and their counts add up to one run's; a run whose storage fails halfway leaves a state the next
 * run finishes; puts and publishes racing a prune stay readable byte for byte.
 */

const HOUR = 3_600_000;
const COUNT_FIELDS = [
  'threadsDeleted',
  'threadsBusy',
  'checkpointsDeleted',
  'memoryItemsDeleted',
  'sessionsDeleted',
  'objectsDeleted',
  'bytesFreed',
] as const satisfies readonly (keyof PruneCounts)[];

type Counts = Record<(typeof COUNT_FIELDS)[number], number>;

function sumOf(reports: readonly PruneReport[], tenant: string): Counts {
  const sum = Object.fromEntries(COUNT_FIELDS.map((field) => [field, 0])) as Counts;
  for (const report of reports) {
    const entry = report.tenants.find((candidate) => candidate.tenant === tenant);
    if (entry === undefined) continue;
    for (const field of COUNT_FIELDS) sum[field] += entry[field];
  }
  return sum;
}

/**
 * One tenant's data, of which a known part must go under the policy set here: two threads past
 * their time to live, two kept threads of 5 checkpoints (keepCheckpoints 2), an expired session and
 * a kept one, two old days of interaction log, two expired memory facts. Returns what the prune
 * must count, computed from the stored keys.
 */
async function seedTenant(
  world: RetentionWorld,
  tenant: string,
): Promise<{ expected: Counts; kept: string[] }> {
  const past = () => Date.now() - 2 * HOUR;
  const old = new ThreadStore({
    storeOf: (t) => world.kvStores.forSpace('threads', t),
    maxValueBytes: MAX_VALUE_BYTES,
    now: past,
  });
  for (const id of ['gone-1', 'gone-2']) await putLine(old, tenant, id, 3);
  for (const id of ['keep-1', 'keep-2']) await putLine(world.threads, tenant, id, 5);
  const pastArchive = new SessionArchive(
    plainArchiveStorage(world.sessionObjects, world.sessionIndex),
    noTransactionalAuditLog,
    past,
  );
  await publishFile(pastArchive, tenant, `${tenant}-old`, 'c1', null, fileBytes(70_000, tenant));
  await publishFile(world.archive, tenant, `${tenant}-new`, 'c1', null, fileBytes(1000, tenant));
  const kv = world.kvStores.forTenant(tenant);
  await kv.write('interactions/2020-01-01.jsonl', Buffer.from('{"a":1}\n'));
  await kv.write('interactions/2020-01-02.jsonl', Buffer.from('{"a":22}\n'));
  await kv.write(`interactions/${new Date().toISOString().slice(0, 10)}.jsonl`, Buffer.from('{"a":3}\n'));
  const pastMemory = new MemoryFacts({ store: world.memoryStore, now: past });
  await pastMemory.remember({ tenant }, 'users/1', 'a', 1, { ttl: 60 });
  await pastMemory.remember({ tenant }, 'users/1', 'b', 2, { ttl: 60 });
  await world.memory.remember({ tenant }, 'users/1', 'c', 3);
  await world.policies.set(tenant, {
    threadTtlSeconds: 3600,
    keepCheckpoints: 2,
    sessionTtlSeconds: 3600,
    interactionDays: 2,
  });

  const threadItems = await allItems(world.threadSpace(tenant));
  const removed = new Set(['c001', 'c002', 'c003']);
  const doomedThreadItems = threadItems.filter((item) => {
    if (/^(t|d)\/gone-/.test(item.key)) return true;
    // keep-*: the records (with the values they hold inline), pending writes and `messages`
    // values of c001-c003; c001's `static` value stays (the kept checkpoints inherit it).
    const parsed = parseDataKey(item.key);
    if (parsed === null || !parsed.threadId.startsWith('keep-')) return false;
    const data = parsed.item;
    if (data?.kind === 'record' || data?.kind === 'writes') return removed.has(data.checkpointId);
    return (
      data?.kind === 'value' &&
      removed.has(data.producer) &&
      data.channelSegment === channelSegment('messages')
    );
  });
  const sessionItems: { key: string; size: number }[] = [];
  for await (const item of world.sessionObjects.list(`${tenant}-old/`)) {
    if (!item.key.endsWith('/latest')) sessionItems.push(item);
  }
  const interactionBytes = '{"a":1}\n'.length + '{"a":22}\n'.length;
  const objects = doomedThreadItems.length + sessionItems.length + 2;
  const bytes =
    doomedThreadItems.reduce((sum, item) => sum + item.size, 0) +
    sessionItems.reduce((sum, item) => sum + item.size, 0) +
    interactionBytes;
  return {
    expected: {
      threadsDeleted: 2,
      threadsBusy: 0,
      checkpointsDeleted: 6,
      memoryItemsDeleted: 2,
      sessionsDeleted: 1,
      objectsDeleted: objects,
      bytesFreed: bytes,
    },
    kept: threadItems.filter((item) => !doomedThreadItems.includes(item)).map((item) => item.key),
  };
}

async function expectPruned(world: RetentionWorld, tenant: string, kept: readonly string[]): Promise<void> {
  // c001's `static` value, which the kept checkpoints inherit, was held inline in c001's record:
  // before the record went, it was stored at its value key (`.../v/.../~<digest>`), once per thread.
  const now = (await allItems(world.threadSpace(tenant))).map((item) => item.key);
  const spilled = now.filter((key) => /\/v\/[^/]+\/c001\/[^/]+\/~[^/]+$/.test(key));
  const keptThreads = new Set(
    kept.filter((key) => key.startsWith('d/keep-')).map((key) => key.split('/')[1]),
  );
  expect(spilled.map((key) => key.split('/')[1]).sort()).toEqual([...keptThreads].sort());
  expect(now.filter((key) => !spilled.includes(key)).sort()).toEqual([...kept].sort());
  const left: string[] = [];
  for await (const item of world.sessionObjects.list(`${tenant}-old/`)) left.push(item.key);
  expect(left).toEqual([]);
  expect(await restored(world.archive, tenant, `${tenant}-new`)).toEqual(fileBytes(1000, tenant));
  expect((await world.threads.getCheckpoint(tenant, 'keep-1', '', 'c004')).values['static']).toBeDefined();
  const state = await world.states.read(tenant);
  expect([state.threadIntents, state.sessionIntents]).toEqual([[], []]);
  const verify = await world.verifier().verifyTenant(tenant, { readData: true });
  expect(verify.findings).toEqual([]);
  expect(verify.orphanCount).toBe(0);
}

describe.each<Backend>(['local', 'blob'])(
  'retention under concurrency and failure on the %s backend',
  (backend) => {
    let world: RetentionWorld;

    beforeEach(async () => {
      world = await createRetentionWorld(backend, azurite());
    });
    afterEach(async () => world.destroy());

    it('8 overlapping runs over 5 tenants delete each item once; their counts add up to one run’s, exactly', async () => {
      const tenants = Array.from({ length: 5 }, (_, index) => `tenant-${index}`);
      const seeded = new Map<string, Awaited<ReturnType<typeof seedTenant>>>();
      for (const tenant of tenants) seeded.set(tenant, await seedTenant(world, tenant));

      const reports = await Promise.all(Array.from({ length: 8 }, () => world.pruner().run(silent)));
      for (const report of reports) {
        for (const entry of report.tenants)
          expect(entry.error, `${entry.tenant}: ${entry.error}`).toBeUndefined();
      }
      for (const tenant of tenants) {
        const { expected, kept } = seeded.get(tenant)!;
        expect(sumOf(reports, tenant), tenant).toEqual(expected);
        await expectPruned(world, tenant, kept);
      }
      // And a ninth run finds nothing left.
      const again = await world.pruner().run(silent);
      for (const tenant of tenants) expect(sumOf([again], tenant).objectsDeleted).toBe(0);
    });

    it.each([4, 13, 30])(
      'a run whose storage fails after %i deletions leaves a state the next run finishes, counts adding up',
      async (deletions) => {
        const tenant = 'tenant-k';
        const { expected, kept } = await seedTenant(world, tenant);
        const lines: string[] = [];
        const log = createLogger('info', (line) => lines.push(line));
        const failed = await world.pruner({ fault: new StorageFault(deletions) }).run(log);
        const entry = failed.tenants.find((candidate) => candidate.tenant === tenant)!;
        expect(entry.error).toMatch(/storage went away/);
        // The log names the failure (the logger summarises the error once, with its type).
        const warnings = lines
          .map((line) => JSON.parse(line) as { msg: string; tenant?: string; err?: unknown })
          .filter((line) => line.msg === 'retention prune failed for a domain' && line.tenant === tenant);
        expect(warnings.length).toBeGreaterThan(0);
        for (const warning of warnings) {
          expect(warning.err).toMatchObject({
            type: 'StorageUnavailableError',
            message: 'injected: the storage went away',
          });
        }
        expect(entry.more).toBe(true);
        expect(sumOf([failed], tenant).objectsDeleted).toBeLessThanOrEqual(deletions);
        const next = await world.pruner().run(silent);
        expect(next.tenants.find((candidate) => candidate.tenant === tenant)?.error).toBeUndefined();
        expect(sumOf([failed, next], tenant)).toEqual(expected);
        await expectPruned(world, tenant, kept);
      },
    );

    it('puts and forks racing prune runs stay readable byte for byte (a fork of a removed checkpoint is refused)', async () => {
      const tenant = 'tenant-r';
      const grace = 2500;
      await putLine(world.threads, tenant, 'line', 5);
      await putLine(world.threads, tenant, 'forks', 8, { prefix: 'f' });
      await world.policies.set(tenant, { keepCheckpoints: 2 });
      await sleep(grace + 1000);
      let running = true;
      const runs: PruneReport[] = [];
      const pruning = (async () => {
        while (running) runs.push(await world.pruner({ graceMs: grace, fullPassEveryMs: 0 }).run(silent));
      })();
      const writer = world.anotherThreadStore();
      const written: string[] = [];
      const refused: string[] = [];
      try {
        let parent = 'c005';
        for (let index = 6; index <= 30; index++) {
          const id = `c${String(index).padStart(3, '0')}`;
          await writer.putCheckpoint(tenant, 'line', put(id, parent, { version: index + 10 }));
          const read = await world.threads.getCheckpoint(tenant, 'line', '');
          expect(read.checkpointId).toBe(id);
          expect(read.values['messages']?.data.toString()).toContain(`"checkpointId":"${id}"`);
          expect(read.values['static']?.data.toString()).toBe(JSON.stringify({ static: true }));
          parent = id;
          // A fork from an older checkpoint of the other thread: stored whole, or refused (409).
          const from = `f${String(1 + (index % 8)).padStart(3, '0')}`;
          const fork = `x${String(index).padStart(3, '0')}`;
          try {
            await writer.putCheckpoint(tenant, 'forks', put(fork, from, { version: 100 + index }));
            written.push(fork);
            const tuple = await world.threads.getCheckpoint(tenant, 'forks', '', fork);
            expect(tuple.values['messages']?.data.toString()).toContain(`"checkpointId":"${fork}"`);
            expect(tuple.values['static']?.data.toString()).toBe(JSON.stringify({ static: true }));
          } catch (error) {
            if (!(error instanceof ConflictError)) throw error;
            refused.push(fork);
          }
        }
      } finally {
        running = false;
        await pruning;
      }
      expect(runs.length).toBeGreaterThan(0);
      expect(written.length + refused.length).toBe(25);
      const latest = await world.threads.getCheckpoint(tenant, 'line', '');
      expect(latest.checkpointId).toBe('c030');
      expect(latest.values['static']?.data.toString()).toBe(JSON.stringify({ static: true }));
      const verify = await world.verifier({ graceMs: grace }).verifyTenant(tenant, { readData: true });
      expect(verify.findings).toEqual([]);
    });

    it('publishes of session checkpoints and snapshots racing prune runs restore byte for byte', async () => {
      const tenant = 'tenant-p';
      const grace = 2500;
      // A session of 3 checkpoints (one file growing), with garbage; a snapshot.
      let bytes = fileBytes(100_000, 'grow');
      await publishFile(world.archive, tenant, 's', 'c1', null, bytes);
      await world.archive.putObject(tenant, 's', 'blocks/abandoned/0', fileBytes(65_536, 'garbage'));
      const { privateKey } = newKeyPair();
      const shared = Buffer.from('shared file, in every snapshot');
      let snapshot = buildSnapshot('w', [{ path: 'shared.txt', bytes: shared }], privateKey);
      for (const [sha, part, data] of snapshot.parts)
        await world.snapshots.putPart(tenant, 'w', sha, String(part), data);
      await world.snapshots.publish(tenant, 'w', {
        manifest: snapshot.manifest,
        signature: snapshot.signature,
        parent: null,
        allowExternalSymlinks: false,
      });
      await sleep(grace + 1000);

      let running = true;
      const runs: PruneReport[] = [];
      const pruning = (async () => {
        while (running) runs.push(await world.pruner({ graceMs: grace, fullPassEveryMs: 0 }).run(silent));
      })();
      let retries = 0;
      try {
        let parent = 'c1';
        for (let index = 2; index <= 12; index++) {
          const id = `c${index}`;
          bytes = Buffer.concat([bytes, fileBytes(30_000, `grow-${index}`)]);
          for (;;) {
            try {
              await publishFile(world.archive, tenant, 's', id, parent, bytes);
              break;
            } catch (error) {
              // Objects uploaded longer ago than the grace may be collected before the publish: it is
              // refused (422), never accepted with objects missing; upload again.
              if (!(error instanceof MissingObjectsError)) throw error;
              retries += 1;
            }
          }
          parent = id;
          expect(await restored(world.archive, tenant, 's')).toEqual(bytes);
          const next = buildSnapshot(
            'w',
            [
              { path: 'shared.txt', bytes: shared },
              { path: `n${index}.txt`, bytes: fileBytes(5000, `snap-${index}`) },
            ],
            privateKey,
          );
          for (const [sha, part, data] of next.parts)
            await world.snapshots.putPart(tenant, 'w', sha, String(part), data);
          await world.snapshots.publish(tenant, 'w', {
            manifest: next.manifest,
            signature: next.signature,
            parent: snapshot.id,
            allowExternalSymlinks: false,
          });
          snapshot = next;
          expect((await world.snapshots.read(tenant, 'w', 'latest')).id).toBe(next.id);
          for (const [sha, part, data] of next.parts) {
            expect(await world.snapshots.getPart(tenant, 'w', sha, String(part))).toEqual(data);
          }
        }
      } finally {
        running = false;
        await pruning;
      }
      expect(retries).toBeLessThan(11);
      // The runs collected garbage while the publishes went on (the abandoned block at least).
      expect(sumOf(runs, tenant).objectsDeleted).toBeGreaterThan(0);
      expect(await restored(world.archive, tenant, 's')).toEqual(bytes);
      const verify = await world.verifier({ graceMs: grace }).verifyTenant(tenant, { readData: true });
      expect(verify.findings).toEqual([]);
    });
  },
);
