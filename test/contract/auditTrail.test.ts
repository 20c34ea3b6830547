import { createHash, generateKeyPairSync, randomUUID } from 'node:crypto';
import path from 'node:path';

import type { TableClient } from '@azure/data-tables';
import { BlobServiceClient, StorageSharedKeyCredential } from '@azure/storage-blob';
import { beforeEach, describe, expect, it } from 'vitest';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import { plainArchiveStorage } from '../../shared/archive/sealedArchive';
import { archiveRepairCheck, SessionArchive } from '../../shared/archive/sessionArchive';
import type { AuditEvent } from '../../shared/audit/auditLog';
import type { AuditStore } from '../../shared/audit/auditStore';
import { AuditTrail } from '../../shared/audit/auditTrail';
import type { RepairCheck } from '../../shared/audit/pending';
import type { Logger } from '../../shared/logging';
import { MemoryFacts, memoryRepairCheck } from '../../shared/memory/memory';
import type { MemoryStore } from '../../shared/memory/memoryStore';
import {
  type AuditRecord,
  ChainVerifier,
  GENESIS_HASH,
  type UnhashedRecord,
  withHash,
} from '../../shared/protocol/audit/chain';
import { checkKeptHeads } from '../../shared/protocol/audit/headChain';
import { type SignedHead, verifyHeadSignature } from '../../shared/protocol/audit/headSignature';
import { ConflictError, StorageUnavailableError } from '../../shared/protocol/errors';
import { TrustedSnapshotKeys } from '../../shared/snapshots/trustedKeys';
import { snapshotRepairCheck, WorkspaceSnapshots } from '../../shared/snapshots/workspaceSnapshots';
import { BlobKeyValueStoreFactory } from '../../shared/storage/azure/blobKeyValueStore';
import { TableSessionIndex } from '../../shared/storage/azure/sessionIndexTable';
import { TableAuditStore } from '../../shared/storage/azure/tableAuditStore';
import { TableMemoryStore } from '../../shared/storage/azure/tableMemoryStore';
import type {
  KeyValueStore,
  KeyValueStoreFactory,
  WriteConditions,
} from '../../shared/storage/keyValueStore';
import { LocalImmutableObjectStore } from '../../shared/storage/local/localImmutableObjectStore';
import { LocalKeyValueStoreFactory } from '../../shared/storage/local/localKeyValueStore';
import { LocalMemoryStore } from '../../shared/storage/local/localMemoryStore';
import { threadRepairCheck } from '../../shared/threads/threadAudit';
import { ThreadStore } from '../../shared/threads/threadStore';
import { ObservedObjectStore } from '../support/archiveTestKit';
import { azurite } from '../support/azurite';
import { tempDir } from '../support/cleanup';
import { DelegatingMemoryStore } from '../support/delegatingMemoryStore';
import { buildSnapshot, type BuiltSnapshot, newKeyPair } from '../support/snapshotTestKit';
import { azuriteTable } from '../support/tables';
import { STORAGE_TIMEOUT_MS } from '../support/timeouts';

/**
 * The audit trail on Azure Table Storage (Azurite): gapless seq under concurrent writers on two
 * instances, the hash chain and what verify detects, stable ids recorded once, and the repair of a
 * crash between an action and its record, injected at each step by a wrapper that fails the
 * storage there (the thread store on both key/value backends, memory facts on both of theirs,
 * session archives and workspace snapshots).
 */

const T = 'tenant-a';

type Step = keyof AuditStore;

/** The table store, with a fault injected at a chosen call: the step fails as a crash would leave it. */
class FaultyAuditStore implements AuditStore {
  private readonly faults = new Map<Step, (args: unknown[]) => boolean>();
  constructor(private readonly inner: AuditStore) {}

  /** The next call of `step` for which `when` holds fails (before it reaches the storage). */
  failOnce(step: Step, when: (args: unknown[]) => boolean = () => true): void {
    this.faults.set(step, when);
  }

  private check(step: Step, args: unknown[]): void {
    const when = this.faults.get(step);
    if (when !== undefined && when(args)) {
      this.faults.delete(step);
      throw new StorageUnavailableError(`injected fault at ${step}`);
    }
  }

  createRecord(...args: Parameters<AuditStore['createRecord']>) {
    this.check('createRecord', args);
    return this.inner.createRecord(...args);
  }
  readRecord(...args: Parameters<AuditStore['readRecord']>) {
    return this.inner.readRecord(...args);
  }
  listRecords(...args: Parameters<AuditStore['listRecords']>) {
    return this.inner.listRecords(...args);
  }
  createReceipt(...args: Parameters<AuditStore['createReceipt']>) {
    this.check('createReceipt', args);
    return this.inner.createReceipt(...args);
  }
  readReceipt(...args: Parameters<AuditStore['readReceipt']>) {
    return this.inner.readReceipt(...args);
  }
  putMarker(...args: Parameters<AuditStore['putMarker']>) {
    this.check('putMarker', args);
    return this.inner.putMarker(...args);
  }
  readMarker(...args: Parameters<AuditStore['readMarker']>) {
    return this.inner.readMarker(...args);
  }
  listMarkers(...args: Parameters<AuditStore['listMarkers']>) {
    return this.inner.listMarkers(...args);
  }
  claimMarker(...args: Parameters<AuditStore['claimMarker']>) {
    return this.inner.claimMarker(...args);
  }
  deleteMarker(...args: Parameters<AuditStore['deleteMarker']>) {
    this.check('deleteMarker', args);
    return this.inner.deleteMarker(...args);
  }
  readHeadHint(...args: Parameters<AuditStore['readHeadHint']>) {
    return this.inner.readHeadHint(...args);
  }
  writeHeadHint(...args: Parameters<AuditStore['writeHeadHint']>) {
    return this.inner.writeHeadHint(...args);
  }
  putSignedHead(...args: Parameters<AuditStore['putSignedHead']>) {
    return this.inner.putSignedHead(...args);
  }
  listSignedHeads(...args: Parameters<AuditStore['listSignedHeads']>) {
    return this.inner.listSignedHeads(...args);
  }
  registerTenant(...args: Parameters<AuditStore['registerTenant']>) {
    return this.inner.registerTenant(...args);
  }
  tenants() {
    return this.inner.tenants();
  }
}

/** A thread space whose next write of the thread record fails (the storage failed at the commit point). */
class FailingRecordWrite implements KeyValueStore {
  static armed = false;
  constructor(private readonly inner: KeyValueStore) {}
  read(key: string) {
    return this.inner.read(key);
  }
  head(key: string) {
    return this.inner.head(key);
  }
  async write(key: string, value: Buffer, conditions?: WriteConditions) {
    if (FailingRecordWrite.armed && key.startsWith('t/')) {
      FailingRecordWrite.armed = false;
      throw new StorageUnavailableError('injected fault at the thread record write');
    }
    return this.inner.write(key, value, conditions);
  }
  append(key: string, bytes: Buffer, conditions?: WriteConditions) {
    return this.inner.append(key, bytes, conditions);
  }
  delete(key: string, conditions?: Pick<WriteConditions, 'ifMatch'>) {
    return this.inner.delete(key, conditions);
  }
  list(options: Parameters<KeyValueStore['list']>[0]) {
    return this.inner.list(options);
  }
  listItems(options: Parameters<KeyValueStore['listItems']>[0]) {
    return this.inner.listItems(options);
  }
}

const GRACE_MS = 60_000;

let table: TableClient;
let tableName: string;
beforeEach(() => {
  warnings.length = 0;
  tableName = `audit${randomUUID().replaceAll('-', '').slice(0, 20)}`;
  table = azuriteTable(azurite().tableEndpoint, tableName);
});

/**
 * A trail as one app instance has it, on its own table client. Crash tests move a clock of their
 * own past the repair grace period instead of waiting for it.
 */
const warnings: unknown[] = [];
const log = {
  warn: (fields: unknown) => warnings.push(fields),
  info: () => {},
} as unknown as Logger;

function instance(
  store?: AuditStore,
  now: () => number = Date.now,
  repairChecks: readonly RepairCheck[] = [],
): AuditTrail {
  return new AuditTrail({
    log,
    now,
    store: store ?? new TableAuditStore(azuriteTable(azurite().tableEndpoint, tableName), STORAGE_TIMEOUT_MS),
    repairGraceMs: GRACE_MS,
    repairIntervalMs: 0,
    repairChecks,
  });
}

const event = (action: string, extra: Partial<AuditEvent> = {}): AuditEvent => ({
  tenant: T,
  action,
  outcome: 'ok',
  ...extra,
});

async function allRecords(trail: AuditTrail, tenant = T): Promise<AuditRecord[]> {
  const records: AuditRecord[] = [];
  for (let after = 0; ;) {
    const page = await trail.records(tenant, { afterSeq: after, limit: 1000 });
    records.push(...page);
    if (page.length < 1000) return records;
    after = page.at(-1)?.seq ?? after;
  }
}

async function rowJson(seq: number): Promise<AuditRecord> {
  const entity = await table.getEntity<{ json: string }>(`t:${T}`, `r:${String(seq).padStart(12, '0')}`);
  return JSON.parse(entity.json) as AuditRecord;
}

async function replaceRow(seq: number, record: AuditRecord | string): Promise<void> {
  await table.updateEntity(
    {
      partitionKey: `t:${T}`,
      rowKey: `r:${String(seq).padStart(12, '0')}`,
      json: typeof record === 'string' ? record : JSON.stringify(record),
    },
    'Merge',
  );
}

describe('audit trail on Table Storage (Azurite)', () => {
  it('appends records 1, 2, 3 … chained by hash; reads them oldest first, filtered and paged', async () => {
    const trail = instance();
    for (let index = 0; index < 12; index++) {
      await trail.record(
        event(index % 3 === 0 ? 'run.started' : 'run.finished', {
          threadId: index % 2 === 0 ? 't-even' : 't-odd',
          runId: `run-${index}`,
          details: { index },
        }),
      );
    }
    const records = await allRecords(trail);
    expect(records.map((record) => record.seq)).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
    expect(records[0]?.prevHash).toBe('0'.repeat(64));
    for (const [index, record] of records.entries()) {
      expect(withHash({ ...record, hash: undefined } as unknown as AuditRecord).hash).toBe(record.hash);
      if (index > 0) expect(record.prevHash).toBe(records[index - 1]?.hash);
    }
    const even = await trail.records(T, { afterSeq: 0, limit: 100, threadId: 't-even' });
    expect(even.map((record) => record.seq)).toEqual([1, 3, 5, 7, 9, 11]);
    const started = await trail.records(T, {
      afterSeq: 0,
      limit: 100,
      action: 'run.started',
      threadId: 't-odd',
    });
    expect(started.map((record) => record.runId)).toEqual(['run-3', 'run-9']);
    expect((await trail.records(T, { afterSeq: 4, limit: 3 })).map((record) => record.seq)).toEqual([
      5, 6, 7,
    ]);
    expect(await instance().verify(T)).toEqual({
      ok: true,
      records: 12,
      firstBroken: null,
      head: [12, records[11]?.hash],
      problems: [],
    });
    // Another tenant's trail is its own.
    expect(await trail.records('tenant-b', { afterSeq: 0, limit: 10 })).toEqual([]);
  });

  it('gives gapless seq to 16 concurrent writers on two instances, each event exactly once', async () => {
    const instances = [instance(), instance()];
    const perWriter = 20;
    await Promise.all(
      Array.from({ length: 16 }, async (_, writer) => {
        const trail = instances[writer % 2] as AuditTrail;
        for (let index = 0; index < perWriter; index++) {
          // As a caller of the route does: a 503 (the trail changed too fast for this append to
          // win a seq within its budget, which a loaded machine can make happen) is retried with
          // the same event id, which the trail records once.
          const next = event('memory.written', {
            id: `w${writer}-${index}`,
            subject: `w${writer}-${index}`,
          });
          for (;;) {
            const outcome = await trail.record(next).then(
              () => 'recorded' as const,
              (error: unknown) => {
                if (error instanceof StorageUnavailableError) return 'retry' as const;
                throw error;
              },
            );
            if (outcome === 'recorded') break;
          }
        }
      }),
    );
    const records = await allRecords(instances[0] as AuditTrail);
    expect(records.map((record) => record.seq)).toEqual(
      Array.from({ length: 16 * perWriter }, (_, i) => i + 1),
    );
    expect(new Set(records.map((record) => record.subject)).size).toBe(16 * perWriter);
    expect(new Set(records.map((record) => record.eventId)).size).toBe(16 * perWriter);
    expect(await instance().verify(T)).toMatchObject({
      ok: true,
      records: 16 * perWriter,
      firstBroken: null,
    });
  });

  it('records an event with a stable id once, also when recorded again on another instance', async () => {
    const [one, two] = [instance(), instance()];
    await one.record(event('admin.rewrap.started', { id: 'admin.rewrap.started:job-1' }));
    await one.record(event('run.started'));
    await two.record(event('admin.rewrap.started', { id: 'admin.rewrap.started:job-1' }));
    await one.record(event('admin.rewrap.started', { id: 'admin.rewrap.started:job-1' }));
    const records = await allRecords(one);
    expect(records.map((record) => record.action)).toEqual(['admin.rewrap.started', 'run.started']);
  });

  describe('verify', () => {
    let trail: AuditTrail;
    let head: [number, string];
    beforeEach(async () => {
      trail = instance();
      for (let index = 0; index < 8; index++) {
        await trail.record(
          event('run.started', { threadId: 't1', runId: `r${index}`, details: { n: index } }),
        );
      }
      head = (await trail.verify(T)).head;
      expect(head[0]).toBe(8);
    });

    it.each([
      ['action', (record: AuditRecord) => ({ ...record, action: 'run.finished' })],
      ['atMs', (record: AuditRecord) => ({ ...record, atMs: record.atMs + 1 })],
      ['threadId', (record: AuditRecord) => ({ ...record, threadId: 't2' })],
      ['details', (record: AuditRecord) => ({ ...record, details: { n: 99 } })],
      ['outcome', (record: AuditRecord) => ({ ...record, outcome: 'conflict' })],
      ['prevHash', (record: AuditRecord) => ({ ...record, prevHash: 'f'.repeat(64) })],
      ['hash', (record: AuditRecord) => ({ ...record, hash: 'e'.repeat(64) })],
      ['seq', (record: AuditRecord) => ({ ...record, seq: 9 })],
      ['an added field', (record: AuditRecord) => ({ ...record, actor: 'someone' })],
      // JSON.parse makes `__proto__` an own property of the record: a field like any other.
      [
        'an added field named __proto__',
        (record: AuditRecord) => JSON.stringify(record).replace(/^\{/, '{"__proto__":{"actor":"someone"},'),
      ],
    ])('finds record k broken when its %s was changed', async (_field, change) => {
      await replaceRow(5, change(await rowJson(5)));
      expect(await instance().verify(T)).toMatchObject({ ok: false, records: 8, firstBroken: 5 });
    });

    it('finds record k broken when it was deleted, when k and k+1 were swapped, or when it is not JSON', async () => {
      const [four, five] = [await rowJson(4), await rowJson(5)];
      await replaceRow(4, five);
      await replaceRow(5, four);
      expect(await instance().verify(T)).toMatchObject({ ok: false, firstBroken: 4 });
      await replaceRow(4, four);
      await replaceRow(5, five);
      expect((await instance().verify(T)).ok).toBe(true);
      await replaceRow(6, '{"not": "a record"');
      expect(await instance().verify(T)).toMatchObject({ ok: false, firstBroken: 6 });
      await replaceRow(6, await rowJson(6).catch(() => five));
      await table.deleteEntity(`t:${T}`, `r:${'3'.padStart(12, '0')}`);
      expect(await instance().verify(T)).toMatchObject({ ok: false, records: 7, firstBroken: 3 });
    });

    it('catches a cut tail and a chain rebuilt from scratch only with the expected head', async () => {
      for (const seq of [8, 7, 6]) await table.deleteEntity(`t:${T}`, `r:${String(seq).padStart(12, '0')}`);
      const cut = await instance().verify(T);
      expect(cut).toMatchObject({ ok: true, records: 5, firstBroken: null });
      expect(await instance().verify(T, { seq: head[0], hash: head[1] })).toMatchObject({
        ok: false,
        firstBroken: 6,
      });

      // Every record rewritten with other content and recomputed hashes: a consistent chain.
      let prevHash = '0'.repeat(64);
      for (let seq = 1; seq <= 8; seq++) {
        const record = withHash({
          seq,
          atMs: 1,
          action: 'run.started',
          outcome: 'ok',
          eventId: `forged-${seq}`,
          prevHash,
        });
        await table.upsertEntity(
          {
            partitionKey: `t:${T}`,
            rowKey: `r:${String(seq).padStart(12, '0')}`,
            json: JSON.stringify(record),
            action: record.action,
          },
          'Replace',
        );
        prevHash = record.hash;
      }
      expect(await instance().verify(T)).toMatchObject({ ok: true, records: 8 });
      expect(await instance().verify(T, { seq: head[0], hash: head[1] })).toMatchObject({
        ok: false,
        firstBroken: 8,
      });
    });
  });
});

describe('signed heads on Table Storage (Azurite)', () => {
  const keys = generateKeyPairSync('ed25519');
  const signer = (): AuditTrail =>
    new AuditTrail({
      log,
      store: new TableAuditStore(azuriteTable(azurite().tableEndpoint, tableName), STORAGE_TIMEOUT_MS),
      repairGraceMs: GRACE_MS,
      repairIntervalMs: 0,
      signingKey: keys.privateKey,
    });
  const pad = (seq: number) => String(seq).padStart(12, '0');
  const heads = async () => signer().signedHeads(T, 0, 1000);
  const append = async (trail: AuditTrail, count: number) => {
    for (let index = 0; index < count; index++)
      await trail.record(event('run.started', { details: { index } }));
  };
  const refusals = () =>
    warnings.filter((fields) => (fields as { alert?: string }).alert === 'audit_head_not_signed');

  /** Every record 1..count replaced by a consistent forged chain, record 1 edited (the probe's rebuild). */
  async function rebuild(count: number): Promise<void> {
    let prevHash = GENESIS_HASH;
    for (let seq = 1; seq <= count; seq++) {
      const original = await rowJson(seq);
      const record = withHash({
        ...original,
        ...(seq === 1 ? { actor: 'someone-else' } : {}),
        prevHash,
        hash: undefined,
      } as unknown as UnhashedRecord);
      await table.upsertEntity(
        {
          partitionKey: `t:${T}`,
          rowKey: `r:${pad(seq)}`,
          json: JSON.stringify(record),
          action: record.action,
        },
        'Replace',
      );
      prevHash = record.hash;
    }
  }

  it('signs a head once, naming the signed head it extends; the timer signs only a head that moved', async () => {
    const trail = signer();
    await append(trail, 3);
    const first = await trail.verify(T);
    expect(first).toMatchObject({
      ok: true,
      problems: [],
      signedHead: { seq: 3, prevSeq: 0, prevHash: GENESIS_HASH },
    });
    expect(verifyHeadSignature(keys.publicKey, first.signedHead as SignedHead)).toBe(true);
    // Verified again, unchanged: the head already signed is the answer, not a new signature.
    expect((await signer().verify(T)).signedHead).toEqual(first.signedHead);
    await append(trail, 2);
    expect(await signer().signHeads()).toMatchObject({ signed: 1, refused: [], failed: [] });
    expect(await signer().signHeads()).toMatchObject({ signed: 0, refused: [], failed: [] });
    const kept = await heads();
    expect(kept.map((head) => [head.seq, head.prevSeq])).toEqual([
      [3, 0],
      [5, 3],
    ]);
    expect(kept[1]?.prevHash).toBe(first.signedHead?.hash);
    expect(verifyHeadSignature(keys.publicKey, kept[1] as SignedHead)).toBe(true);
    expect(refusals()).toEqual([]);
  });

  it('refuses to sign a chain that does not verify, on verify and on the timer, and says so', async () => {
    const trail = signer();
    await append(trail, 4);
    expect((await trail.verify(T)).signedHead?.seq).toBe(4);
    await replaceRow(2, { ...(await rowJson(2)), actor: 'someone-else' });
    await append(trail, 1);
    const answer = await signer().verify(T);
    expect(answer).toMatchObject({ ok: false, firstBroken: 2, head: [5, expect.any(String)] });
    expect(answer.signedHead).toBeUndefined();
    expect(answer.notSigned).toMatch(/^the head at seq 5 is not signed: record 2 /);
    expect(answer.problems[0]).toMatch(/^record 2 /);
    const timer = signer();
    expect(await timer.signHeads()).toMatchObject({ signed: 0, refused: [T], failed: [] });
    expect(timer.headsRefused).toBe(1);
    expect((await heads()).map((head) => head.seq)).toEqual([4]);
    expect(refusals()).toHaveLength(2);
    expect(refusals()[0]).toMatchObject({ tenant: T, seq: 5, firstBroken: 2 });
  });

  it('refuses to sign a trail rebuilt from scratch or cut while a signed head stands; signs a rebuilt one anew once every signed head is gone', async () => {
    const trail = signer();
    await append(trail, 6);
    const signed = (await trail.verify(T)).signedHead as SignedHead;
    expect(signed.seq).toBe(6);

    await rebuild(6);
    const rebuilt = await signer().verify(T);
    expect(rebuilt).toMatchObject({ ok: false, firstBroken: 6 });
    expect(rebuilt.signedHead).toBeUndefined();
    expect(rebuilt.problems).toEqual([
      'record 6 no longer has the hash of the head at seq 6 (the chain was rewritten)',
    ]);
    expect(await signer().signHeads()).toMatchObject({ signed: 0, refused: [T] });
    // Also on the instance that appended the records (it knows the head as it wrote it).
    expect(await trail.signHeads()).toMatchObject({ signed: 0, refused: [T] });

    // Every signed head removed as well: the service cannot tell, and signs the rebuilt head as a
    // first head (prevSeq 0); a head kept elsewhere catches it.
    await table.deleteEntity(`t:${T}`, `s:${pad(6)}`);
    const fresh = await signer().verify(T);
    expect(fresh).toMatchObject({ ok: true, signedHead: { seq: 6, prevSeq: 0 } });
    const kept = checkKeptHeads([signed], keys.publicKey, 6);
    const verifier = new ChainVerifier(kept.expected);
    for (const record of await allRecords(trail)) verifier.add(record);
    expect(verifier.result()).toMatchObject({ ok: false, firstBroken: 6 });

    // A cut tail below the signed head, then appended to again: refused, and refused again.
    for (const seq of [6, 5]) await table.deleteEntity(`t:${T}`, `r:${pad(seq)}`);
    const cut = await signer().verify(T);
    expect(cut).toMatchObject({
      ok: false,
      firstBroken: 5,
      problems: ['the trail ends at seq 4, before the head at seq 6 (its tail was cut)'],
    });
    expect(cut.notSigned).toMatch(/^the head at seq 4 is not signed: the trail ends at seq 4/);
    await append(signer(), 3);
    expect(await signer().verify(T)).toMatchObject({
      ok: false,
      firstBroken: 6,
      head: [7, expect.any(String)],
    });
    expect((await heads()).map((head) => head.seq)).toEqual([6]);
  });

  it('reports a signed head removed from between two, a forged signature, and refuses to sign', async () => {
    const trail = signer();
    for (let round = 0; round < 3; round++) {
      await append(trail, 2);
      await trail.verify(T);
    }
    expect((await heads()).map((head) => [head.seq, head.prevSeq])).toEqual([
      [2, 0],
      [4, 2],
      [6, 4],
    ]);
    const four = await table.getEntity<{ json: string }>(`t:${T}`, `s:${pad(4)}`);
    await table.deleteEntity(`t:${T}`, `s:${pad(4)}`);
    await append(trail, 1);
    const gap = await signer().verify(T);
    expect(gap).toMatchObject({
      ok: false,
      firstBroken: 4,
      problems: [
        'the head at seq 6 extends the signed head at seq 4, which is gone (signed heads were removed)',
      ],
    });
    expect(gap.signedHead).toBeUndefined();
    await table.createEntity({ partitionKey: `t:${T}`, rowKey: `s:${pad(4)}`, json: four.json });
    expect(await signer().verify(T)).toMatchObject({ ok: true, signedHead: { seq: 7, prevSeq: 6 } });

    const forged = { ...(JSON.parse(four.json) as SignedHead), signedAtMs: 1 };
    await table.upsertEntity(
      { partitionKey: `t:${T}`, rowKey: `s:${pad(4)}`, json: JSON.stringify(forged) },
      'Replace',
    );
    await append(trail, 1);
    const forgedAnswer = await signer().verify(T);
    expect(forgedAnswer).toMatchObject({
      ok: false,
      firstBroken: 4,
      problems: ['the signature of the head at seq 4 does not verify'],
    });
    expect(forgedAnswer.notSigned).toMatch(/^the head at seq 8 is not signed/);
  });

  it('reports a signed head that is not readable and refuses to sign, on verify and on the timer (with the alert)', async () => {
    const trail = signer();
    for (let round = 0; round < 2; round++) {
      await append(trail, 2);
      await trail.verify(T);
    }
    await table.upsertEntity(
      { partitionKey: `t:${T}`, rowKey: `s:${pad(4)}`, json: '{"not": "a head"' },
      'Replace',
    );
    await append(trail, 1);
    const answer = await signer().verify(T);
    expect(answer).toMatchObject({
      ok: false,
      firstBroken: 4,
      problems: ['the signed head at seq 4 is not readable'],
    });
    expect(answer.notSigned).toMatch(/^the head at seq 5 is not signed/);
    const before = refusals().length;
    expect(await signer().signHeads()).toMatchObject({ refused: [T], failed: [] });
    expect(refusals().length).toBe(before + 1);
  });
});

function kvBackends(): [string, () => KeyValueStoreFactory][] {
  const service = new BlobServiceClient(
    azurite().blobEndpoint,
    new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY),
  );
  return [
    ['local filesystem', () => new LocalKeyValueStoreFactory(tempDir('audit-threads'), 2 * 1024 * 1024)],
    [
      'Azure Blob (Azurite)',
      () =>
        new BlobKeyValueStoreFactory(
          service,
          `c${randomUUID().replaceAll('-', '').slice(0, 20)}`,
          2 * 1024 * 1024,
          STORAGE_TIMEOUT_MS,
        ),
    ],
  ];
}

describe.each(kvBackends())(
  'crash between an action and its audit record, threads on the %s backend',
  (_name, make) => {
    let factory: KeyValueStoreFactory;
    let clock: number;
    beforeEach(() => {
      factory = make();
      clock = Date.now();
    });
    /** The crashed instance is gone; the others' clocks move past the repair grace period. */
    const later = () => {
      clock += GRACE_MS + 1;
    };

    /** A thread store and its trail, as one app instance (a process that may crash) has them. */
    const app = (store?: AuditStore) => {
      const storeOf = (tenant: string) => new FailingRecordWrite(factory.forSpace('threads', tenant));
      const trail = instance(store, () => clock, [threadRepairCheck(storeOf)]);
      const threads = new ThreadStore({
        now: () => clock,
        storeOf,
        maxValueBytes: 2 * 1024 * 1024,
        audit: trail,
      });
      return { trail, threads };
    };
    const start = (threads: ThreadStore, threadId: string) =>
      threads.startRun(T, threadId, { onBusy: 'reject', busyTimeoutMs: 0, leaseMs: 600_000 }, 'ops');
    const actions = async (trail: AuditTrail) =>
      (await allRecords(trail)).map((record) => `${record.seq} ${record.action} ${record.threadId ?? ''}`);
    const markers = async () =>
      (await new TableAuditStore(table, STORAGE_TIMEOUT_MS).listMarkers(T, 100)).length;

    it('after the commit point, before the record: the next append (another instance) repairs it, no number skipped', async () => {
      const faulty = new FaultyAuditStore(
        new TableAuditStore(azuriteTable(azurite().tableEndpoint, tableName), STORAGE_TIMEOUT_MS),
      );
      const crashed = app(faulty);
      faulty.failOnce('createRecord');
      const { run } = await start(crashed.threads, 't1');
      expect(await actions(crashed.trail)).toEqual([]);
      expect(await markers()).toBe(1);

      later();
      const next = app();
      await next.threads.finishRun(T, 't1', run.runId, 'finished', 'ops');
      // The next append writes its own record, then the pending one: the start becomes record 2.
      expect(await actions(next.trail)).toEqual(['1 run.finished t1', '2 run.started t1']);
      expect(await markers()).toBe(0);
      expect((await next.trail.verify(T)).ok).toBe(true);
    });

    it('before the commit point (the thread record write failed): the repair drops the marker, no record', async () => {
      const crashed = app();
      FailingRecordWrite.armed = true;
      await expect(start(crashed.threads, 't1')).rejects.toBeInstanceOf(StorageUnavailableError);
      expect(await markers()).toBe(1);
      later();
      const next = app();
      await start(next.threads, 't2');
      expect(await actions(next.trail)).toEqual(['1 run.started t2']);
      expect(await markers()).toBe(0);
    });

    it.each<[Step, string]>([
      ['createReceipt', 'after the record, before its receipt'],
      ['deleteMarker', 'after the receipt, before the marker is removed'],
    ])('%s fails (%s): the repair finds the record and appends nothing twice', async (step) => {
      const faulty = new FaultyAuditStore(
        new TableAuditStore(azuriteTable(azurite().tableEndpoint, tableName), STORAGE_TIMEOUT_MS),
      );
      const crashed = app(faulty);
      faulty.failOnce(step);
      await start(crashed.threads, 't1');
      expect(await actions(crashed.trail)).toEqual(['1 run.started t1']);
      later();
      const next = app();
      await start(next.threads, 't2');
      expect(await actions(next.trail)).toEqual(['1 run.started t1', '2 run.started t2']);
      expect(await markers()).toBe(0);
    });

    it('a deletion after its commit point, before its record, with a run start still pending in the deleted record', async () => {
      const faulty = new FaultyAuditStore(
        new TableAuditStore(azuriteTable(azurite().tableEndpoint, tableName), STORAGE_TIMEOUT_MS),
      );
      const crashed = app(faulty);
      faulty.failOnce('createRecord');
      const { run } = await start(crashed.threads, 't1');
      // The same instance finishes and deletes the thread; the deletion's record fails too.
      await crashed.threads.finishRun(T, 't1', run.runId, 'finished', 'ops');
      faulty.failOnce('createRecord', (args) => (args[1] as AuditRecord).action === 'thread.deleted');
      await crashed.threads.deleteThread(T, 't1', 'ops');
      later();
      const next = app();
      await start(next.threads, 't2');
      const recorded = await actions(next.trail);
      // Each action once, no number skipped. (Their order depends on when each marker came due:
      // the start's may be repaired by the finish's append already.)
      expect(
        recorded.map((line) => line.split(' ')[0]),
        recorded.join(', '),
      ).toEqual(['1', '2', '3', '4']);
      expect(recorded.map((line) => line.split(' ').slice(1).join(' ')).sort()).toEqual([
        'run.finished t1',
        'run.started t1',
        'run.started t2',
        'thread.deleted t1',
      ]);
      expect(await markers()).toBe(0);
    });

    it('two instances repairing at once append a pending event once', async () => {
      const faulty = new FaultyAuditStore(
        new TableAuditStore(azuriteTable(azurite().tableEndpoint, tableName), STORAGE_TIMEOUT_MS),
      );
      const crashed = app(faulty);
      faulty.failOnce('createRecord');
      await start(crashed.threads, 't1');
      later();
      const [one, two] = [app(), app()];
      await Promise.all([one.trail.repair(T), two.trail.repair(T), one.trail.repair(T)]);
      expect(await actions(one.trail)).toEqual(['1 run.started t1']);
      expect(await markers()).toBe(0);
    });

    it('16 concurrent run starts and finishes on two instances: gapless, one started and one finished per run', async () => {
      const instances = [app(), app()];
      await Promise.all(
        Array.from({ length: 16 }, async (_, index) => {
          const { threads } = instances[index % 2] as ReturnType<typeof app>;
          const { run } = await start(threads, `t${index}`);
          await threads.finishRun(T, `t${index}`, run.runId, 'finished', 'ops');
        }),
      );
      const records = await allRecords(instances[0]?.trail as AuditTrail);
      expect(warnings).toEqual([]);
      expect(records.map((record) => record.seq)).toEqual(Array.from({ length: 32 }, (_, i) => i + 1));
      for (let index = 0; index < 16; index++) {
        const mine = records
          .filter((record) => record.threadId === `t${index}`)
          .map((record) => record.action);
        expect(mine).toEqual(['run.started', 'run.finished']);
      }
      expect(records.every((record) => record.actor === 'ops')).toBe(true);
      expect(await markers()).toBe(0);
    });
  },
);

describe('crash between a checkpoint publish and its audit record (session archives)', () => {
  let clock: number;
  let root: string;
  let index: TableSessionIndex;
  beforeEach(() => {
    clock = Date.now();
    root = tempDir('audit-archive');
    index = new TableSessionIndex(azuriteTable(azurite().tableEndpoint), STORAGE_TIMEOUT_MS);
  });

  /** An archive and its trail as one app instance has them; `objects` may fail at a chosen step. */
  const app = (store?: AuditStore) => {
    const objects = new ObservedObjectStore(
      new LocalImmutableObjectStore(path.join(root, 'sessions'), path.join(root, 'tmp')),
    );
    const storage = plainArchiveStorage(objects, index);
    const trail = instance(store, () => clock, [archiveRepairCheck(storage)]);
    const archive = new SessionArchive(storage, trail, () => clock);
    return { trail, archive, objects };
  };
  const tail = Buffer.from('hello');
  const publish = async (archive: SessionArchive, checkpointId: string, parent: string | null) => {
    await archive.putObject(T, 's1', `tails/${checkpointId}/g1`, tail);
    return archive.publishCheckpoint(
      T,
      's1',
      {
        checkpointId,
        parent,
        files: [
          {
            path: 'events.jsonl',
            generation: 'g1',
            size: tail.length,
            sha256: createHash('sha256').update(tail).digest('hex'),
          },
        ],
        data: null,
      },
      'ops',
    );
  };
  const actions = async (trail: AuditTrail) =>
    (await allRecords(trail)).map((record) => `${record.seq} ${record.action} ${record.subject ?? ''}`);

  it('after latest moved, before the record: the next append repairs it', async () => {
    const faulty = new FaultyAuditStore(
      new TableAuditStore(azuriteTable(azurite().tableEndpoint, tableName), STORAGE_TIMEOUT_MS),
    );
    const crashed = app(faulty);
    faulty.failOnce('createRecord');
    await publish(crashed.archive, 'c1', null);
    clock += GRACE_MS + 1;
    const next = app();
    await publish(next.archive, 'c2', 'c1');
    expect(await actions(next.trail)).toEqual([
      '1 checkpoint.published s1/c2',
      '2 checkpoint.published s1/c1',
    ]);
  });

  it('before latest moved (the pointer write failed): the repair drops the marker, no record', async () => {
    const crashed = app();
    crashed.objects.failWhen = (method) => method === 'swapPointer';
    await expect(publish(crashed.archive, 'c1', null)).rejects.toBeInstanceOf(StorageUnavailableError);
    clock += GRACE_MS + 1;
    const next = app();
    await next.trail.repair(T);
    expect(await actions(next.trail)).toEqual([]);
    expect(await new TableAuditStore(table, STORAGE_TIMEOUT_MS).listMarkers(T, 10)).toEqual([]);
    // A retry of the same publish then records it once.
    await publish(next.archive, 'c1', null);
    await publish(next.archive, 'c1', null);
    expect(await actions(next.trail)).toEqual(['1 checkpoint.published s1/c1']);
  });
});

/** A memory store whose next write or delete fails when armed (the storage failed at the commit point). */
class FailingFactStore extends DelegatingMemoryStore {
  armed: 'write' | 'delete' | null = null;
  private check(step: 'write' | 'delete'): void {
    if (this.armed !== step) return;
    this.armed = null;
    throw new StorageUnavailableError(`injected fault at the fact ${step}`);
  }
  override write(...args: Parameters<MemoryStore['write']>) {
    this.check('write');
    return this.inner.write(...args);
  }
  override delete(...args: Parameters<MemoryStore['delete']>) {
    this.check('delete');
    return this.inner.delete(...args);
  }
}

function memoryBackends(): [string, () => MemoryStore][] {
  return [
    ['local filesystem', () => new LocalMemoryStore(tempDir('audit-memory'))],
    [
      'Azure Table Storage (Azurite)',
      () => new TableMemoryStore(azuriteTable(azurite().tableEndpoint), STORAGE_TIMEOUT_MS),
    ],
  ];
}

/** The trail's table with a fault injected where a test chooses. */
const faultyTrailStore = () =>
  new FaultyAuditStore(
    new TableAuditStore(azuriteTable(azurite().tableEndpoint, tableName), STORAGE_TIMEOUT_MS),
  );
const pendingMarkers = async () =>
  (await new TableAuditStore(table, STORAGE_TIMEOUT_MS).listMarkers(T, 100)).length;
const subjects = async (trail: AuditTrail) =>
  (await allRecords(trail)).map((record) => `${record.seq} ${record.action} ${record.subject ?? ''}`);
/** Each line without its seq, sorted; and the seqs, which must be 1…n. */
const unordered = (lines: string[]) => ({
  seqs: lines.map((line) => Number(line.split(' ')[0])),
  actions: lines.map((line) => line.split(' ').slice(1).join(' ')).sort(),
});
const upTo = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

describe.each(memoryBackends())(
  'crash between a memory change and its audit record, facts on the %s backend',
  (_name, make) => {
    let facts: MemoryStore;
    let clock: number;
    beforeEach(() => {
      facts = make();
      clock = Date.now();
    });
    /** The crashed instance is gone; the others' clocks move past the repair grace period. */
    const later = () => {
      clock += GRACE_MS + 1;
    };
    /** Memory facts and their trail as one app instance has them; its fact store may fail. */
    const app = (store?: AuditStore) => {
      const failing = new FailingFactStore(facts);
      const trail = instance(store, () => clock, [memoryRepairCheck(failing)]);
      const memory = new MemoryFacts({ store: failing, audit: trail, now: () => clock });
      return { trail, memory, failing };
    };
    const ops = { tenant: T, actor: 'ops' };

    it('a write after its commit point, before its record: the next append (another instance) repairs it, no number skipped', async () => {
      const faulty = faultyTrailStore();
      const crashed = app(faulty);
      faulty.failOnce('createRecord');
      await crashed.memory.remember(ops, 'users/42', 'lang', 'fr');
      expect(await subjects(crashed.trail)).toEqual([]);
      expect(await pendingMarkers()).toBe(1);

      later();
      const next = app();
      await next.memory.remember(ops, 'users/43', 'lang', 'de');
      expect(await subjects(next.trail)).toEqual([
        '1 memory.written ["users/43","lang"]',
        '2 memory.written ["users/42","lang"]',
      ]);
      const records = await allRecords(next.trail);
      expect(records.map((record) => [record.actor, record.details])).toEqual([
        ['ops', { created: true }],
        ['ops', { created: true }],
      ]);
      expect(await pendingMarkers()).toBe(0);
      expect((await next.trail.verify(T)).ok).toBe(true);
    });

    it('a write that failed at the storage (before its commit point): the repair drops the marker, no record', async () => {
      const crashed = app();
      crashed.failing.armed = 'write';
      await expect(crashed.memory.remember(ops, 'users/42', 'lang', 'fr')).rejects.toBeInstanceOf(
        StorageUnavailableError,
      );
      expect(await pendingMarkers()).toBe(1);
      later();
      const next = app();
      await next.memory.remember(ops, 'users/43', 'lang', 'de');
      expect(await subjects(next.trail)).toEqual(['1 memory.written ["users/43","lang"]']);
      expect(await pendingMarkers()).toBe(0);
      expect(await next.memory.recall(ops, 'users/42', 'lang')).toBeNull();
    });

    it('a write not yet recorded, then written again on another instance: the row carries it on, each write is recorded once', async () => {
      const faulty = faultyTrailStore();
      const crashed = app(faulty);
      faulty.failOnce('createRecord');
      await crashed.memory.remember(ops, 'users/42', 'lang', 'fr');
      const next = app();
      await next.memory.remember(ops, 'users/42', 'lang', 'en');
      expect((await next.memory.auditOutbox(T, 'users/42', 'lang'))?.outbox).toHaveLength(2);
      later();
      await next.memory.remember(ops, 'users/43', 'lang', 'de');
      const lines = await subjects(next.trail);
      expect(unordered(lines)).toEqual({
        seqs: upTo(3),
        actions: [
          'memory.written ["users/42","lang"]',
          'memory.written ["users/42","lang"]',
          'memory.written ["users/43","lang"]',
        ],
      });
      expect(await pendingMarkers()).toBe(0);
      // The next write drops from the outbox what is now known to be in the trail.
      await next.memory.remember(ops, 'users/42', 'lang', 'it');
      expect((await next.memory.auditOutbox(T, 'users/42', 'lang'))?.outbox).toHaveLength(1);
    });

    it('a write not yet recorded, then its fact forgotten on another instance: the forget carries it, both are recorded once', async () => {
      const faulty = faultyTrailStore();
      const crashed = app(faulty);
      faulty.failOnce('createRecord');
      await crashed.memory.remember(ops, 'users/42', 'lang', 'fr');
      const next = app();
      expect(await next.memory.forget(ops, 'users/42', 'lang')).toBe(true);
      // The forget is recorded at once; its marker stays for the write it carries.
      expect(await subjects(next.trail)).toEqual(['1 memory.forgotten ["users/42","lang"]']);
      later();
      await app().memory.remember(ops, 'users/43', 'lang', 'de');
      expect(unordered(await subjects(next.trail))).toEqual({
        seqs: upTo(3),
        actions: [
          'memory.forgotten ["users/42","lang"]',
          'memory.written ["users/42","lang"]',
          'memory.written ["users/43","lang"]',
        ],
      });
      expect(await pendingMarkers()).toBe(0);
    });

    it('a forget after its delete, before its record: repaired; a forget whose delete failed: no record', async () => {
      const first = app();
      await first.memory.remember(ops, 'a', 'gone', 1);
      await first.memory.remember(ops, 'a', 'kept', 2);
      const faulty = faultyTrailStore();
      const crashed = app(faulty);
      faulty.failOnce('createRecord');
      expect(await crashed.memory.forget(ops, 'a', 'gone')).toBe(true);
      crashed.failing.armed = 'delete';
      await expect(crashed.memory.forget(ops, 'a', 'kept')).rejects.toBeInstanceOf(StorageUnavailableError);
      expect(await pendingMarkers()).toBe(2);
      later();
      const next = app();
      await next.memory.remember(ops, 'b', 'k', 3);
      expect(await subjects(next.trail)).toEqual([
        '1 memory.written ["a","gone"]',
        '2 memory.written ["a","kept"]',
        '3 memory.written ["b","k"]',
        '4 memory.forgotten ["a","gone"]',
      ]);
      expect(await pendingMarkers()).toBe(0);
      expect((await next.memory.recall(ops, 'a', 'kept'))?.value).toBe(2);
    });

    it('a forget of a namespace: after its first delete, before its record, it is repaired with count null; a fault before its first delete leaves no record', async () => {
      const first = app();
      for (const key of ['k1', 'k2', 'k3']) await first.memory.remember(ops, 'ns', key, key);
      const failing = app();
      failing.failing.armed = 'delete';
      await expect(failing.memory.forgetAll(ops, 'ns')).rejects.toBeInstanceOf(StorageUnavailableError);
      expect((await failing.memory.search(ops, { namespace: 'ns' })).items).toHaveLength(3);

      const faulty = faultyTrailStore();
      const crashed = app(faulty);
      faulty.failOnce('createRecord');
      expect(await crashed.memory.forgetAll(ops, 'ns')).toEqual({ deleted: 3, more: false });
      later();
      const next = app();
      await next.memory.remember(ops, 'other', 'k', 1);
      const records = await allRecords(next.trail);
      expect(records.map((record) => `${record.seq} ${record.action} ${record.subject}`)).toEqual([
        '1 memory.written ["ns","k1"]',
        '2 memory.written ["ns","k2"]',
        '3 memory.written ["ns","k3"]',
        '4 memory.written ["other","k"]',
        '5 memory.forgotten ["ns"]',
      ]);
      expect(records[4]?.details).toEqual({ count: null });
      expect(await pendingMarkers()).toBe(0);
      // Not interrupted: the count.
      await next.memory.remember(ops, 'ns2', 'k', 1);
      expect(await next.memory.forgetAll(ops, 'ns2')).toEqual({ deleted: 1, more: false });
      expect((await allRecords(next.trail)).at(-1)).toMatchObject({
        action: 'memory.forgotten',
        subject: '["ns2"]',
        details: { count: 1, more: false },
      });
    });

    it('a forget of a namespace carries the writes not yet recorded of the facts it deletes', async () => {
      const faulty = faultyTrailStore();
      const crashed = app(faulty);
      faulty.failOnce('createRecord');
      await crashed.memory.remember(ops, 'ns/a', 'k', 1);
      const next = app();
      await next.memory.remember(ops, 'ns/b', 'k', 2);
      expect(await next.memory.forgetAll(ops, 'ns')).toEqual({ deleted: 2, more: false });
      later();
      await app().memory.remember(ops, 'other', 'k', 3);
      expect(unordered(await subjects(next.trail))).toEqual({
        seqs: upTo(4),
        actions: [
          'memory.forgotten ["ns"]',
          'memory.written ["ns/a","k"]',
          'memory.written ["ns/b","k"]',
          'memory.written ["other","k"]',
        ],
      });
      expect(await pendingMarkers()).toBe(0);
    });

    it('pruning keeps an expired fact whose write is not yet recorded until it is', async () => {
      const faulty = faultyTrailStore();
      const crashed = app(faulty);
      faulty.failOnce('createRecord');
      await crashed.memory.remember(ops, 'ns', 'short', 1, { ttl: 1 });
      clock += 2000;
      const next = app();
      expect(await next.memory.recall(ops, 'ns', 'short')).toBeNull();
      expect(await next.memory.pruneExpired(T, 10)).toEqual({ deleted: 0, more: false });
      expect(await next.memory.forget(ops, 'ns', 'short')).toBe(false);
      expect(await facts.get(T, 'ns', 'short')).not.toBeNull();
      later();
      await next.memory.remember(ops, 'other', 'k', 1);
      expect(await subjects(next.trail)).toEqual([
        '1 memory.written ["other","k"]',
        '2 memory.written ["ns","short"]',
      ]);
      expect(await next.memory.pruneExpired(T, 10)).toEqual({ deleted: 1, more: false });
    });
  },
);

describe('crash between a snapshot publish and its audit record (workspace snapshots)', () => {
  let clock: number;
  let root: string;
  let keys: TrustedSnapshotKeys;
  const signer = newKeyPair();
  beforeEach(() => {
    clock = Date.now();
    root = tempDir('audit-snapshots');
    keys = new TrustedSnapshotKeys(
      new Map(),
      new LocalKeyValueStoreFactory(tempDir('audit-snapshot-keys'), 1024),
    );
  });

  /** Snapshots and their trail as one app instance has them; `objects` may fail at a chosen step. */
  const app = (store?: AuditStore) => {
    const objects = new ObservedObjectStore(
      new LocalImmutableObjectStore(path.join(root, 'snapshots', T), path.join(root, 'tmp')),
    );
    const stores = { forTenant: () => objects };
    const trail = instance(store, () => clock, [snapshotRepairCheck(stores)]);
    const snapshots = new WorkspaceSnapshots(stores, keys, {
      now: () => new Date(clock),
      audit: trail,
    });
    return { trail, snapshots, objects };
  };
  const build = (text: string) =>
    buildSnapshot('w1', [{ path: 'a.txt', bytes: Buffer.from(text) }], signer.privateKey);
  const publish = async (snapshots: WorkspaceSnapshots, built: BuiltSnapshot, parent: string | null) => {
    for (const [sha256, part, bytes] of built.parts)
      await snapshots.putPart(T, 'w1', sha256, String(part), bytes);
    return snapshots.publish(
      T,
      'w1',
      { manifest: built.manifest, signature: built.signature, parent, allowExternalSymlinks: false },
      'ops',
    );
  };

  it('after the manifest is stored, before the record: the next append repairs it; a retry records nothing twice', async () => {
    const [one, two] = [build('one'), build('two')];
    const faulty = faultyTrailStore();
    const crashed = app(faulty);
    faulty.failOnce('createRecord');
    await publish(crashed.snapshots, one, null);
    expect(await pendingMarkers()).toBe(1);
    clock += GRACE_MS + 1;
    const next = app();
    // The client retries (it never saw the answer): already latest, nothing new to record.
    expect(await publish(next.snapshots, one, null)).toEqual({ id: one.id, latest: one.id });
    await publish(next.snapshots, two, one.id);
    expect(await subjects(next.trail)).toEqual([
      `1 snapshot.published w1/${two.id}`,
      `2 snapshot.published w1/${one.id}`,
    ]);
    const records = await allRecords(next.trail);
    expect(records.map((record) => [record.actor, record.details])).toEqual([
      ['ops', { parent: one.id, files: 1 }],
      ['ops', { parent: null, files: 1 }],
    ]);
    expect(await pendingMarkers()).toBe(0);
  });

  it('before the manifest is stored (its put failed): the repair drops the marker, no record; a retry records it once', async () => {
    const one = build('one');
    const crashed = app();
    crashed.objects.failWhen = (method, key) => method === 'put' && key.endsWith('/manifest.json');
    await expect(publish(crashed.snapshots, one, null)).rejects.toBeInstanceOf(StorageUnavailableError);
    expect(await pendingMarkers()).toBe(1);
    clock += GRACE_MS + 1;
    const next = app();
    await next.trail.repair(T);
    expect(await subjects(next.trail)).toEqual([]);
    expect(await pendingMarkers()).toBe(0);
    await publish(next.snapshots, one, null);
    await publish(next.snapshots, one, null);
    expect(await subjects(next.trail)).toEqual([`1 snapshot.published w1/${one.id}`]);
  });

  it('a snapshot whose publish is not yet in the trail is deleted only once it is; published again after, it is not recorded twice', async () => {
    const one = build('one');
    const faulty = faultyTrailStore();
    const crashed = app(faulty);
    faulty.failOnce('createRecord');
    await publish(crashed.snapshots, one, null);
    const next = app();
    await expect(next.snapshots.delete(T, 'w1', one.id)).rejects.toBeInstanceOf(ConflictError);
    expect((await next.snapshots.read(T, 'w1', one.id)).id).toBe(one.id);
    clock += GRACE_MS + 1;
    expect(await next.snapshots.delete(T, 'w1', one.id)).toMatchObject({ id: one.id, latest: null });
    expect(await subjects(next.trail)).toEqual([`1 snapshot.published w1/${one.id}`]);
    expect(await next.snapshots.isStored(T, 'w1', one.id)).toBe(false);
    await publish(next.snapshots, one, null);
    expect(await subjects(next.trail)).toEqual([`1 snapshot.published w1/${one.id}`]);
    expect(await pendingMarkers()).toBe(0);
  });
});
