import { randomUUID } from 'node:crypto';

import { afterEach, describe, expect, it } from 'vitest';

import type { AuditStore } from '../../shared/audit/auditStore';
import { AuditTrail } from '../../shared/audit/auditTrail';
import type { PendingEvent, RepairCheck } from '../../shared/audit/pending';
import { TableAuditStore } from '../../shared/storage/azure/tableAuditStore';
import { LocalAuditStore } from '../../shared/storage/local/localAuditStore';
import { azurite } from '../support/azurite';
import { tempDir } from '../support/cleanup';
import { azuriteTable } from '../support/tables';
import { STORAGE_TIMEOUT_MS } from '../support/timeouts';

/**
 * A repair that decides a marker and a new action that stores a marker of the same event id
 * meanwhile (deleters of one thread incarnation, forgets of one fact, publishes of one snapshot
 * share their event's id). The repair read the action's state before the new action committed, so
 * it drops the marker it claimed as not committed; the new action then crashes before its record.
 * Its marker must survive the repair, so that the next repair records its event.
 */

const T = 'repair-race';
const GRACE_MS = 60_000;

const backends: [string, () => { store: AuditStore; destroy: () => Promise<void> }][] = [
  [
    'local files',
    () => ({ store: new LocalAuditStore(tempDir('audit-repair-race')), destroy: async () => {} }),
  ],
  [
    'Table Storage (Azurite)',
    () => {
      const table = azuriteTable(
        azurite().tableEndpoint,
        `auditrace${randomUUID().replaceAll('-', '').slice(0, 20)}`,
      );
      return {
        store: new TableAuditStore(table, STORAGE_TIMEOUT_MS),
        destroy: () => table.deleteTable().catch(() => {}),
      };
    },
  ],
];

describe.each(backends)('a marker stored again while a repair decides it (%s)', (_name, make) => {
  let destroy: () => Promise<void> = async () => {};
  afterEach(() => destroy());

  it("the repair that found the earlier action not committed leaves the new action's marker, which the next repair records", async () => {
    const made = make();
    destroy = made.destroy;
    let now = 1_800_000_000_000;
    let committed = false;
    /** Runs inside the repair's decision, after it read the state it decides by. */
    let meanwhile: (() => Promise<void>) | undefined;
    const check: RepairCheck = {
      kinds: ['race'],
      fateOf: async () => {
        const fate = committed ? 'committed' : 'not-committed';
        const run = meanwhile;
        meanwhile = undefined;
        await run?.();
        return fate;
      },
    };
    const trail = (): AuditTrail =>
      new AuditTrail({
        store: made.store,
        now: () => now,
        repairGraceMs: GRACE_MS,
        repairIntervalMs: 0,
        repairChecks: [check],
      });
    const [repairer, other] = [trail(), trail()];
    const event = (createdAtMs: number): PendingEvent => ({
      id: 'thread.deleted:t1:inc-1',
      tenant: T,
      action: 'thread.deleted',
      threadId: 't1',
      outcome: 'ok',
      createdAtMs,
    });

    // The first action stores its marker and is refused at its commit point; its marker stays.
    await other.begin(T, [event(now)], { kind: 'race' });
    now += GRACE_MS + 1;
    meanwhile = async () => {
      // Another action of the same event: its marker, its commit point, then a crash.
      await other.begin(T, [event(now)], { kind: 'race' });
      committed = true;
    };
    await repairer.repair(T);
    expect(meanwhile).toBeUndefined();

    now += GRACE_MS + 1;
    await repairer.repair(T);
    const records = await repairer.records(T, { afterSeq: 0, limit: 10 });
    expect(records.map((record) => record.eventId)).toEqual(['thread.deleted:t1:inc-1']);
    expect(await made.store.readMarker(T, 'thread.deleted:t1:inc-1')).toBeNull();
  });
});
