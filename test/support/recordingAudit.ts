import type { PendingCheck, PendingEvent, TransactionalAuditLog } from '../../shared/audit/pending';

/**
 * A transactional audit log in memory that keeps what it is told: the markers begun and not yet
 * removed, the events committed (appended, each id once), and the order of the calls.
 */
export interface RecordingAudit {
  readonly log: TransactionalAuditLog;
  readonly calls: string[];
  readonly committed: PendingEvent[];
  readonly markers: Map<string, { event: PendingEvent; check: PendingCheck }>;
}

export function recordingAudit(enabled = true): RecordingAudit {
  const calls: string[] = [];
  const committed: PendingEvent[] = [];
  const markers = new Map<string, { event: PendingEvent; check: PendingCheck }>();
  const holds = (id: string) => committed.some((event) => event.id === id);
  const log: TransactionalAuditLog = {
    enabled,
    record: () => Promise.reject(new Error('this store records through begin and commit')),
    begin: async (_tenant, events, check) => {
      for (const event of events) {
        markers.set(event.id, { event, check });
        calls.push(`begin ${event.action} ${check.kind}`);
      }
    },
    commit: async (_tenant, events, options) => {
      for (const event of events) {
        if (!holds(event.id)) committed.push(event);
        if (options?.keepMarkers !== true) markers.delete(event.id);
        calls.push(`commit ${event.action}`);
      }
    },
    abandon: async (_tenant, events) => {
      for (const event of events) {
        markers.delete(event.id);
        calls.push(`abandon ${event.action}`);
      }
    },
    isKnownAppended: holds,
    appended: async (_tenant, id) => holds(id),
    settled: async (_tenant, id) => !markers.has(id) || holds(id),
  };
  return { log, calls, committed, markers };
}
