import type { AuditRecord } from '../protocol/audit/chain';
import type { SignedHead } from '../protocol/audit/headSignature';
import type { PendingCheck, PendingEvent } from './pending';

/**
 * The storage contract of the audit trail, per tenant. The trail's correctness rests on these
 * obligations (Azure Table Storage meets them with single-entity operations only: no batch, and no
 * ETag inside a batch, is relied on):
 * - `createRecord` is create-only and atomic: of several writers of one seq exactly one succeeds,
 *   the others get `false` and nothing of theirs is stored; it is the linearisation point of an
 *   append. Records are never changed or deleted by Cairn.
 * - `createReceipt` (event id → seq) is create-only and idempotent (an existing receipt is kept).
 * - markers are upserted and deleted by event id; `claimMarker` is a compare-and-swap on the version
 *   a listing returned (one claimer of several wins), and a delete may name the version claimed
 *   (a marker stored again since, by another action of the same event id, is then kept).
 * - absent is null (or `false`), a storage fault is StorageUnavailableError: never confused.
 */

export interface RecordQuery {
  /** Records with a seq above this (0: from the first). */
  readonly afterSeq: number;
  readonly limit: number;
  readonly threadId?: string;
  readonly action?: string;
}

/** A pending marker as stored, with the version a claim must name. */
export interface StoredMarker {
  readonly event: PendingEvent;
  readonly check: PendingCheck;
  /** Set by the repair that claimed it: who, and until when the claim holds. */
  readonly claim?: { readonly by: string; readonly untilMs: number };
  readonly etag: string;
}

export interface AuditStore {
  /** Stores record `record.seq` unless one is stored under that seq: false then. */
  createRecord(tenant: string, record: AuditRecord): Promise<boolean>;
  readRecord(tenant: string, seq: number): Promise<AuditRecord | null>;
  /** Records in ascending seq order after `afterSeq`, at most `limit`, filtered as asked. */
  listRecords(tenant: string, query: RecordQuery): Promise<AuditRecord[]>;
  /** Records that the event `eventId` is record `seq`; keeps an existing receipt. */
  createReceipt(tenant: string, eventId: string, seq: number): Promise<void>;
  readReceipt(tenant: string, eventId: string): Promise<number | null>;
  putMarker(tenant: string, event: PendingEvent, check: PendingCheck): Promise<void>;
  readMarker(tenant: string, eventId: string): Promise<StoredMarker | null>;
  /** Up to `limit` markers of the tenant, in no particular order. */
  listMarkers(tenant: string, limit: number): Promise<StoredMarker[]>;
  /**
   * Sets the marker's claim if it is still the version listed: the claimed version's ETag, or null
   * when it changed.
   */
  claimMarker(
    tenant: string,
    marker: StoredMarker,
    claim: { by: string; untilMs: number },
  ): Promise<string | null>;
  /** Deletes the marker (absent: nothing to do); with `etag`, only while it is that version. */
  deleteMarker(tenant: string, eventId: string, etag?: string): Promise<void>;
  /** A seq the trail is known to have reached (a hint for finding the head; may lag). */
  readHeadHint(tenant: string): Promise<number | null>;
  writeHeadHint(tenant: string, seq: number): Promise<void>;
  /** Keeps a signed head (one per seq: signing a seq again replaces its signature). */
  putSignedHead(head: SignedHead): Promise<void>;
  listSignedHeads(tenant: string, afterSeq: number, limit: number): Promise<SignedHead[]>;
  /** Records that `tenant` has a trail (idempotent). */
  registerTenant(tenant: string): Promise<void>;
  /** Every tenant that has a trail, ascending. */
  tenants(): AsyncIterable<string>;
}
