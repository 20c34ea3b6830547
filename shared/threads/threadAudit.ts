import type { PendingEvent, RepairCheck } from '../audit/pending';
import type { KeyValueStore } from '../storage/keyValueStore';
import { threadKey } from './layout';
import { decodeThreadRecord } from './records';

/**
 * The threads' part of the audit trail's repair (see audit/pending.ts). A thread action's marker
 * names the record's incarnation: `thread` (a change, committed when the record of that
 * incarnation carries the event in its outbox) or `thread-delete` (committed when the record of
 * that incarnation is gone; `carried` are its outbox events).
 */

/** The event id of a thread's deletion: one per incarnation, whoever deleted it. */
export function threadDeletedEventId(threadId: string, incarnation: string): string {
  return `thread.deleted:${threadId}:${incarnation}`;
}

/** The incarnation of a thread's record and the ids of the audit events its outbox holds; null when absent. */
export async function threadAuditOutbox(
  store: KeyValueStore,
  threadId: string,
): Promise<{ incarnation: string; outbox: string[] } | null> {
  const stored = await store.read(threadKey(threadId));
  if (stored === null) return null;
  const record = decodeThreadRecord(stored.value, threadId);
  return { incarnation: record.incarnation, outbox: (record.outbox ?? []).map((event) => event.id) };
}

/**
 * Decides the markers of thread actions by reading the thread's record in `storeOf(tenant)` (the
 * tenant's thread space as the thread store reads it).
 */
export function threadRepairCheck(storeOf: (tenant: string) => KeyValueStore): RepairCheck {
  return {
    kinds: ['thread', 'thread-delete'],
    fateOf: async (tenant, event, check, trail) => {
      const threadId = String(check['threadId']);
      const incarnation = String(check['incarnation']);
      if (check.kind === 'thread-delete') {
        const thread = await threadAuditOutbox(storeOf(tenant), threadId);
        return thread === null || thread.incarnation !== incarnation ? 'committed' : 'not-committed';
      }
      if (await trail.appended(tenant, event.id)) return 'committed';
      const thread = await threadAuditOutbox(storeOf(tenant), threadId);
      if (thread !== null && thread.incarnation === incarnation) {
        return thread.outbox.includes(event.id) ? 'committed' : 'not-committed';
      }
      // The thread was deleted since: its deletion's marker carries what its record held.
      const deletion = await trail.readMarker(tenant, threadDeletedEventId(threadId, incarnation));
      const carried: readonly PendingEvent[] =
        deletion?.check.kind === 'thread-delete' ? (deletion.check.carried ?? []) : [];
      return carried.some((pending) => pending.id === event.id) ? 'committed' : 'not-committed';
    },
  };
}
