/**
 * The tenant-scoped session index, with ownership: who owns a
 * session id, and per tenant one record per session with its latest checkpoint.
 *
 * Every implementation MUST:
 * - decide ownership atomically, first writer wins (`claim` is a create-only insert): of any number
 *   of concurrent claims of one new session id by different tenants exactly one tenant owns it, for
 *   good; an owner never changes (so a process may remember owners it has seen);
 * - scope `get` and `list` strictly by tenant: another tenant's session is simply not there;
 * - list ascending by id, `id > after`, at most `limit` (1-1000), `next` set only when more follow;
 * - make `update` a compare-and-swap (create-only when absent, else on the read version), retried
 *   on a lost race with a fresh read, so concurrent updates never lose one another's decision;
 * - report a storage fault as StorageUnavailableError, never as an absent session.
 *
 * The index is a discovery index written after a checkpoint is published (the `latest` pointer is
 * the truth); it is never used for locking.
 */

export interface SessionRecord {
  readonly id: string;
  /** The latest checkpoint the index knows of. */
  readonly checkpointId: string;
  /** RFC 3339 UTC. */
  readonly updatedAt: string;
  /** The latest checkpoint's `data`, or null. */
  readonly data: Record<string, unknown> | null;
}

export interface SessionPage {
  readonly sessions: SessionRecord[];
  /** The last id of this page when more sessions follow (pass it as `after`), else null. */
  readonly next: string | null;
}

export interface SessionIndex {
  /** The tenant that owns `sessionId`, or null when no tenant has written to it. */
  ownerOf(sessionId: string): Promise<string | null>;
  /** Makes `tenant` the owner unless another tenant already is; returns the owner either way. */
  claim(sessionId: string, tenant: string): Promise<string>;
  get(tenant: string, sessionId: string): Promise<SessionRecord | null>;
  list(tenant: string, options: { after?: string; limit: number }): Promise<SessionPage>;
  /**
   * Read-modify-write of one record: `decide` gets the current record (null when absent) and
   * returns the record to store, or null to leave it as it is. Retried on a lost race.
   */
  update(
    tenant: string,
    sessionId: string,
    decide: (current: SessionRecord | null) => Promise<SessionRecord | null>,
  ): Promise<void>;
  /**
   * Removes the tenant's index record of the session (retention deletes the session); the owner
   * stays, for good (owners never change, and instances remember them). False when it was absent.
   */
  remove(tenant: string, sessionId: string): Promise<boolean>;
}
