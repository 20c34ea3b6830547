import { describe, expect, it } from 'vitest';

import type { AuditStore, RecordQuery } from '../../shared/audit/auditStore';
import { AuditTrail } from '../../shared/audit/auditTrail';
import { type AuditRecord, GENESIS_HASH, withHash } from '../../shared/protocol/audit/chain';
import { LocalAuditStore } from '../../shared/storage/local/localAuditStore';
import { tempDir } from '../support/cleanup';

/**
 * Verify reads the trail a page (1,000 records) at a time. A stored record whose `seq` was changed
 * to an earlier one, at the end of a page, must be found broken like any changed record, not make
 * verify read the same page again and again (it never answered).
 */

const T = 'paging';
const PAGE = 1000;

describe('verify of a trail longer than a page', () => {
  it('finds a record broken whose seq was changed to an earlier one at the end of a page, and answers', async () => {
    const store = new LocalAuditStore(tempDir('audit-verify-paging'));
    let prevHash = GENESIS_HASH;
    for (let seq = 1; seq <= PAGE + 5; seq++) {
      const record = withHash({
        seq,
        atMs: seq,
        action: 'run.started',
        outcome: 'ok',
        eventId: `e${seq}`,
        prevHash,
      });
      await store.createRecord(T, record);
      prevHash = record.hash;
    }
    let listings = 0;
    // The row of record 1000 as an attacker left it: its JSON says seq 0.
    const tampered: AuditStore = Object.assign(Object.create(store) as AuditStore, {
      async listRecords(tenant: string, query: RecordQuery): Promise<AuditRecord[]> {
        if (++listings > 10) throw new Error('verify keeps reading the same records');
        const records = await store.listRecords(tenant, query);
        return records.map((record) => (record.seq === PAGE ? { ...record, seq: 0 } : record));
      },
    });
    const trail = new AuditTrail({ store: tampered, repairGraceMs: 60_000, repairIntervalMs: 0 });
    expect(await trail.verify(T)).toMatchObject({ ok: false, firstBroken: PAGE });
    expect(listings).toBeLessThanOrEqual(3);
  });
});
