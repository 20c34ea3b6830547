import { randomBytes } from 'node:crypto';

import type { AuditEvent, AuditLog } from './auditLog';

/**
 * Audit events of actions that have an atomic commit point of their own (a thread record's
 * compare-and-swap, an archive's `latest` pointer, a memory fact's conditional write or delete, a
 * snapshot manifest's create-only put), recorded so that a record and the action it describes
 * never disagree after a crash:
 *
 * 1. before the commit point, a pending marker for the event is stored in the trail's storage
 *    ({@link TransactionalAuditLog.begin});
 * 2. the action commits; where it can, it carries the event in its own atomic write (a thread
 *    record's or a memory fact's `outbox`), which is the proof that it committed;
 * 3. after the commit point, the event is appended and the marker removed
 *    ({@link TransactionalAuditLog.commit}); an action refused before its commit point removes the
 *    marker instead ({@link TransactionalAuditLog.abandon}).
 *
 * A crash between 2 and 3 leaves the marker: a later append to the tenant's trail (by any instance)
 * finds it once it is older than the repair grace period, checks whether the action committed (the
 * outbox, the pointer) and appends the event then, or drops the marker. It is never repaired by
 * skipping a number: the event simply becomes a later record.
 */

/** An event with its id and the time it was made (what a marker and an outbox hold). */
export interface PendingEvent extends AuditEvent {
  readonly id: string;
  readonly createdAtMs: number;
}

/**
 * How a repair tells whether a pending event's action committed: `kind` names the
 * {@link RepairCheck} that decides (each domain gives its own, for the kinds of actions it records:
 * `thread`, `archive`, `memory`, `snapshot`, ...); the other fields are that check's. Stored with
 * the marker as JSON.
 */
export interface PendingCheck {
  readonly kind: string;
  /**
   * Events that committed with the action (the outbox of a record the action deletes, not known to
   * be appended): a repair that finds the action committed appends them, then the event.
   */
  readonly carried?: readonly PendingEvent[];
  readonly [field: string]: unknown;
}

/** What a repair decides of a pending event's action. */
export type PendingFate = 'committed' | 'not-committed' | 'undecided';

/** What a repair check may read of the trail. */
export interface RepairReads {
  /** Whether the trail holds the event (a storage read). */
  appended(tenant: string, eventId: string): Promise<boolean>;
  /** The tenant's pending marker of an event, or null when there is none. */
  readMarker(
    tenant: string,
    eventId: string,
  ): Promise<{ readonly event: PendingEvent; readonly check: PendingCheck } | null>;
}

/**
 * A domain's part of the audit trail's repair: whether the action of a pending event of one of
 * its `kinds` committed. The composition root gives the trail every domain's checks; a marker of a
 * kind no check decides stays pending (undecided).
 */
export interface RepairCheck {
  readonly kinds: readonly string[];
  fateOf(tenant: string, event: PendingEvent, check: PendingCheck, trail: RepairReads): Promise<PendingFate>;
}

export interface TransactionalAuditLog extends AuditLog {
  /** Stores a pending marker of each event (before the action's commit point); throws when it could not. */
  begin(tenant: string, events: readonly PendingEvent[], check: PendingCheck): Promise<void>;
  /**
   * Appends the events and removes their markers (after the commit point). Never throws: the action
   * has happened; what could not be appended now stays pending, for the repair (it is logged).
   * `keepMarkers`: the markers stay for the repair (they name more events than these, see
   * `thread-delete`). `dedupe`: an event the trail already holds is not appended again (an event
   * id whose action can commit more than once, e.g. a snapshot stored again after a deletion).
   */
  commit(
    tenant: string,
    events: readonly PendingEvent[],
    options?: { keepMarkers?: boolean; dedupe?: boolean },
  ): Promise<void>;
  /** Removes the markers of events whose action was refused before its commit point (best effort). */
  abandon(tenant: string, events: readonly PendingEvent[]): Promise<void>;
  /** True when this instance appended (or found appended) the event: it may leave an outbox. */
  isKnownAppended(eventId: string): boolean;
  /** Whether the trail holds the event (a storage read). */
  appended(tenant: string, eventId: string): Promise<boolean>;
  /**
   * True when no marker of the event is pending, or the trail holds the event already; otherwise
   * the tenant's markers that are due are repaired first, and then it tells whether the event's
   * marker is gone. For an action that would remove what a repair decides by (a snapshot's
   * deletion asks about its publish).
   */
  settled(tenant: string, eventId: string): Promise<boolean>;
}

/** Auditing off: nothing is kept, nothing pends. */
export const noTransactionalAuditLog: TransactionalAuditLog = {
  enabled: false,
  record: async () => {},
  begin: async () => {},
  commit: async () => {},
  abandon: async () => {},
  isKnownAppended: () => false,
  appended: async () => false,
  settled: async () => true,
};

/** `event` as a pending event: a fresh random id unless it has a stable one. */
export function pendingEvent(event: AuditEvent, nowMs: number): PendingEvent {
  return { ...event, id: event.id ?? `ev-${randomBytes(12).toString('base64url')}`, createdAtMs: nowMs };
}
