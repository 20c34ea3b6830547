/**
 * The seam of the audit trail: domain operations report what they did as {@link AuditEvent}s. The
 * default log keeps nothing (auditing off). Events hold ids, names, codes and counts only: never
 * message content, stored values or secrets.
 */

export interface AuditEvent {
  /**
   * A stable id for the event, when the caller has one (e.g. derived from a job's instance id):
   * recording an event again under the same id keeps it once. Without one, each call is an event.
   */
  readonly id?: string;
  readonly tenant: string;
  /** What happened, `<area>.<verb>`: e.g. `run.started`, `thread.rewound`, `memory.written`. */
  readonly action: string;
  /** The credential that asked for it, when known (the tenant id or the token's subject). */
  readonly actor?: string;
  readonly threadId?: string;
  readonly runId?: string;
  /** What the action was about, e.g. a checkpoint id, a memory namespace and key, a snapshot id. */
  readonly subject?: string;
  /** `ok`, or an error code. */
  readonly outcome: string;
  readonly details?: Readonly<Record<string, string | number | boolean | null>>;
}

export interface AuditLog {
  /** False when auditing is off: `record` keeps nothing. */
  readonly enabled: boolean;
  /** Appends the event to the tenant's trail; throws when it could not (the caller decides). */
  record(event: AuditEvent): Promise<void>;
}

/** Auditing off. */
export const noAuditLog: AuditLog = {
  enabled: false,
  record: async () => {},
};
