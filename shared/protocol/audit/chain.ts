import { createHash } from 'node:crypto';

import { canonicalJson } from '../canonicalJson.js';

/**
 * The audit trail's records and their hash chain. Pure (node's crypto only), so that the CLI checks
 * a trail with the very code the service uses.
 *
 * `hash = SHA-256(prevHash ‖ canonical JSON of the record without hash)`, hex; `prevHash` of the
 * first record (seq 1) is 64 zeros. Canonical JSON is RFC 8785: object keys sorted by UTF-16 code
 * units, no whitespace, strings and numbers as ECMAScript's JSON.stringify writes them.
 */

export const GENESIS_HASH = '0'.repeat(64);

export type DetailValue = string | number | boolean | null;

export interface AuditRecord {
  /** 1, 2, 3, … without gaps. */
  readonly seq: number;
  /** When the record was appended (Unix ms). */
  readonly atMs: number;
  /** `<area>.<verb>`, e.g. `run.started`. */
  readonly action: string;
  readonly actor?: string;
  readonly threadId?: string;
  readonly runId?: string;
  readonly subject?: string;
  /** `ok`, or an error code. */
  readonly outcome: string;
  readonly details?: Readonly<Record<string, DetailValue>>;
  /** The event's id: an event recorded twice with one id is kept once. */
  readonly eventId: string;
  readonly prevHash: string;
  readonly hash: string;
}

export type UnhashedRecord = Omit<AuditRecord, 'hash'>;

/** The hash of a record (everything but `hash` itself). */
export function recordHash(record: UnhashedRecord | AuditRecord): string {
  // Own properties only, made as own properties (fromEntries): an assignment `unhashed[name] = ...`
  // would take a field named `__proto__` (JSON.parse makes it an own property of a stored record)
  // for the object's prototype, leaving it out of the hash, so such a field added to a record went
  // unnoticed by verify.
  const unhashed = Object.fromEntries(Object.entries(record).filter(([name]) => name !== 'hash'));
  return createHash('sha256')
    .update(record.prevHash, 'utf8')
    .update(canonicalJson(unhashed), 'utf8')
    .digest('hex');
}

export function withHash(record: UnhashedRecord): AuditRecord {
  return { ...record, hash: recordHash(record) };
}

export interface VerifyResult {
  /** True when every record's seq, link and hash are right (and the expected head holds). */
  readonly ok: boolean;
  /** How many records were checked. */
  readonly records: number;
  /** The seq of the first wrong or missing record, or null. */
  readonly firstBroken: number | null;
  /** The last record's [seq, hash] ([0, 64 zeros] for an empty trail). */
  readonly head: [number, string];
}

/** A head kept elsewhere: the trail must still have record `seq` with this hash. */
export interface ExpectedHead {
  readonly seq: number;
  readonly hash: string;
}

/**
 * Checks a trail record by record, in the order stored (ascending seq). The first broken seq is:
 * - k when record k's fields were changed (its hash no longer matches);
 * - k when record k is missing (the next one has another seq), or stands elsewhere (reordered);
 * - k when record k's `prevHash` is not record k-1's hash.
 * With expected heads: the first missing seq when the trail ends before one (a truncated tail),
 * or the expected head's seq when its record has another hash (the chain was rewritten up to it).
 */
export class ChainVerifier {
  private expectedSeq = 1;
  private prev = GENESIS_HASH;
  private count = 0;
  private firstBroken: number | null = null;
  private head: [number, string] = [0, GENESIS_HASH];
  /** Hashes found at the expected heads' seqs. */
  private readonly atExpected = new Map<number, string>();
  private readonly expected: readonly ExpectedHead[];

  constructor(expected: readonly ExpectedHead[] = []) {
    this.expected = [...expected].sort((a, b) => a.seq - b.seq);
  }

  add(record: AuditRecord): void {
    this.count++;
    if (this.firstBroken === null) {
      // A record out of place (missing, moved or copied) breaks the chain at the seq it should be.
      if (record.seq !== this.expectedSeq) this.firstBroken = this.expectedSeq;
      else if (record.prevHash !== this.prev || recordHash(record) !== record.hash)
        this.firstBroken = record.seq;
    }
    if (this.expected.some((head) => head.seq === record.seq)) this.atExpected.set(record.seq, record.hash);
    this.prev = record.hash;
    this.expectedSeq = record.seq + 1;
    this.head = [record.seq, record.hash];
  }

  result(): VerifyResult {
    return this.check().result;
  }

  /** The result, and what broke in words (null when nothing did). */
  check(): { result: VerifyResult; problem: string | null } {
    let firstBroken = this.firstBroken;
    let problem =
      firstBroken === null
        ? null
        : `record ${firstBroken} is not the one chained after record ${firstBroken - 1}: changed, removed or moved`;
    for (const head of this.expected) {
      if (firstBroken !== null && firstBroken <= head.seq) break;
      const found = this.atExpected.get(head.seq);
      if (found === undefined) {
        // The trail ends before the expected head: its tail was cut off.
        firstBroken = this.head[0] < head.seq ? this.head[0] + 1 : head.seq;
        problem = `the trail ends at seq ${this.head[0]}, before the head at seq ${head.seq} (its tail was cut)`;
      } else if (found !== head.hash) {
        firstBroken = head.seq;
        problem = `record ${head.seq} no longer has the hash of the head at seq ${head.seq} (the chain was rewritten)`;
      }
      if (firstBroken !== null) break;
    }
    return {
      result: { ok: firstBroken === null, records: this.count, firstBroken, head: this.head },
      problem,
    };
  }
}
