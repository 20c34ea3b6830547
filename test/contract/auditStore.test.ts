import { randomUUID } from 'node:crypto';

import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import type { AuditStore } from '../../shared/audit/auditStore';
import type { PendingCheck, PendingEvent } from '../../shared/audit/pending';
import type { AuditRecord } from '../../shared/protocol/audit/chain';
import type { SignedHead } from '../../shared/protocol/audit/headSignature';
import { TableAuditStore } from '../../shared/storage/azure/tableAuditStore';
import { LocalAuditStore } from '../../shared/storage/local/localAuditStore';
import { azurite } from '../support/azurite';
import { tempDir } from '../support/cleanup';
import { azuriteTable } from '../support/tables';
import { STORAGE_TIMEOUT_MS } from '../support/timeouts';

/** One implementation of the audit store, fresh for each test, and another instance on it. */
interface StoreFixture {
  readonly store: AuditStore;
  another(): AuditStore;
  destroy(): Promise<void>;
}

function onTable(): StoreFixture {
  const name = `auditstore${randomUUID().replaceAll('-', '').slice(0, 20)}`;
  const table = azuriteTable(azurite().tableEndpoint, name);
  return {
    store: new TableAuditStore(table, STORAGE_TIMEOUT_MS),
    another: () => new TableAuditStore(azuriteTable(azurite().tableEndpoint, name), STORAGE_TIMEOUT_MS),
    destroy: () => table.deleteTable().catch(() => {}),
  };
}

function onLocalFiles(): StoreFixture {
  const dir = tempDir('audit-store');
  return {
    store: new LocalAuditStore(dir),
    another: () => new LocalAuditStore(dir),
    destroy: async () => {},
  };
}

const T = 'store-tenant';

const record = (seq: number, extra: Partial<AuditRecord> = {}): AuditRecord => ({
  seq,
  atMs: 1_700_000_000_000 + seq,
  action: 'run.started',
  outcome: 'ok',
  eventId: `ev-${seq}`,
  prevHash: 'a'.repeat(64),
  hash: 'b'.repeat(64),
  ...extra,
});

const pending = (id: string): { event: PendingEvent; check: PendingCheck } => ({
  event: { id, createdAtMs: 1, tenant: T, action: 'memory.written', outcome: 'ok' },
  check: { kind: 'memory', namespace: 'notes', key: id },
});

/**
 * The audit store contract (shared/audit/auditStore.ts), on every implementation; the trail built
 * on it is tested in auditTrail.test.ts.
 */
describe.each([
  ['Azure Table Storage (Azurite)', onTable],
  ['local filesystem', onLocalFiles],
] as const)('audit store on %s', (_name, make) => {
  let fixture: StoreFixture;
  let store: AuditStore;
  beforeEach(() => {
    fixture = make();
    store = fixture.store;
  });
  afterEach(async () => {
    await fixture.destroy();
  });

  it('answers absent before anything is stored', async () => {
    expect(await store.readRecord(T, 1)).toBeNull();
    expect(await store.listRecords(T, { afterSeq: 0, limit: 10 })).toEqual([]);
    expect(await store.readReceipt(T, 'ev-1')).toBeNull();
    expect(await store.readMarker(T, 'ev-1')).toBeNull();
    expect(await store.listMarkers(T, 10)).toEqual([]);
    expect(await store.readHeadHint(T)).toBeNull();
    expect(await store.listSignedHeads(T, 0, 10)).toEqual([]);
    const tenants: string[] = [];
    for await (const tenant of store.tenants()) tenants.push(tenant);
    expect(tenants).toEqual([]);
  });

  it('creates a record once: of 10 concurrent writers of one seq on two instances exactly one wins', async () => {
    const stores = [store, fixture.another()];
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        (stores[i % 2] as AuditStore).createRecord(T, record(1, { subject: `writer-${i}` })),
      ),
    );
    expect(results.filter(Boolean)).toHaveLength(1);
    const winner = results.indexOf(true);
    expect(await fixture.another().readRecord(T, 1)).toEqual(record(1, { subject: `writer-${winner}` }));
  });

  it('lists records in seq order after afterSeq, filtered by thread and action, at most limit', async () => {
    for (const seq of [3, 1, 12, 2, 11, 10]) {
      await store.createRecord(
        T,
        record(seq, {
          threadId: seq % 2 === 0 ? 't-even' : 't-odd',
          action: seq > 10 ? 'run.finished' : 'run.started',
        }),
      );
    }
    await store.createRecord('store-tenant-2', record(4));
    const seqs = (records: AuditRecord[]) => records.map((r) => r.seq);
    expect(seqs(await store.listRecords(T, { afterSeq: 0, limit: 100 }))).toEqual([1, 2, 3, 10, 11, 12]);
    expect(seqs(await store.listRecords(T, { afterSeq: 2, limit: 3 }))).toEqual([3, 10, 11]);
    expect(seqs(await store.listRecords(T, { afterSeq: 0, limit: 100, threadId: 't-even' }))).toEqual([
      2, 10, 12,
    ]);
    expect(
      seqs(await store.listRecords(T, { afterSeq: 0, limit: 1, threadId: 't-odd', action: 'run.finished' })),
    ).toEqual([11]);
  });

  it('keeps the first receipt of an event', async () => {
    await store.createReceipt(T, 'admin.rewrap.started:job-1', 4);
    await fixture.another().createReceipt(T, 'admin.rewrap.started:job-1', 9);
    expect(await store.readReceipt(T, 'admin.rewrap.started:job-1')).toBe(4);
  });

  it('upserts and deletes markers; a claim is a compare-and-swap on the listed version, a delete may name the claimed one', async () => {
    const { event, check } = pending('ev-a');
    await store.putMarker(T, event, check);
    await store.putMarker(T, pending('ev-b').event, pending('ev-b').check);
    expect((await store.listMarkers(T, 10)).map((m) => m.event.id).sort()).toEqual(['ev-a', 'ev-b']);
    expect(await store.listMarkers(T, 1)).toHaveLength(1);
    const listed = await store.readMarker(T, 'ev-a');
    expect(listed).toMatchObject({ event, check });
    if (listed === null) throw new Error('no marker');
    const claims = await Promise.all([
      store.claimMarker(T, listed, { by: 'one', untilMs: 10 }),
      fixture.another().claimMarker(T, listed, { by: 'two', untilMs: 20 }),
    ]);
    expect(claims.filter(Boolean)).toHaveLength(1);
    const claimed = await store.readMarker(T, 'ev-a');
    expect(claimed?.claim?.by).toBe(claims[0] ? 'one' : 'two');
    expect(await store.claimMarker(T, listed, { by: 'late', untilMs: 30 })).toBeNull();
    // A delete naming the claimed version leaves a marker stored again since.
    const etag = claims.find((claim) => claim !== null);
    if (etag === undefined || etag === null) throw new Error('no claim');
    await store.putMarker(T, event, check);
    await store.deleteMarker(T, 'ev-a', etag);
    expect(await store.readMarker(T, 'ev-a')).toMatchObject({ event, check });
    const again = await store.readMarker(T, 'ev-a');
    if (again === null) throw new Error('no marker');
    await store.deleteMarker(T, 'ev-a', again.etag);
    expect(await store.readMarker(T, 'ev-a')).toBeNull();
    await store.deleteMarker(T, 'ev-a', again.etag);
    await store.putMarker(T, event, check);
    await store.deleteMarker(T, 'ev-a');
    await store.deleteMarker(T, 'ev-a');
    expect(await store.readMarker(T, 'ev-a')).toBeNull();
    expect(await store.claimMarker(T, listed, { by: 'gone', untilMs: 40 })).toBeNull();
  });

  it('keeps the head hint and signed heads (one per seq, replaced when signed again)', async () => {
    await store.writeHeadHint(T, 5);
    await store.writeHeadHint(T, 7);
    expect(await store.readHeadHint(T)).toBe(7);
    const head = (seq: number, signature: string): SignedHead => ({
      tenant: T,
      seq,
      hash: 'c'.repeat(64),
      signedAtMs: seq,
      keyId: 'k1',
      signature,
    });
    for (const seq of [4, 2, 9]) await store.putSignedHead(head(seq, `sig-${seq}`));
    await store.putSignedHead(head(4, 'again'));
    const heads = await store.listSignedHeads(T, 2, 10);
    expect(heads.map((h) => [h.seq, h.signature])).toEqual([
      [4, 'again'],
      [9, 'sig-9'],
    ]);
    expect((await store.listSignedHeads(T, 0, 1)).map((h) => h.seq)).toEqual([2]);
  });

  it('registers tenants idempotently and lists them ascending', async () => {
    for (const tenant of ['zeta', 'alpha', 'alpha', 'mid.dle']) await store.registerTenant(tenant);
    const tenants: string[] = [];
    for await (const tenant of fixture.another().tenants()) tenants.push(tenant);
    expect(tenants).toEqual(['alpha', 'mid.dle', 'zeta']);
  });
});
