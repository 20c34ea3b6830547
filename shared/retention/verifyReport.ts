import type { AuditChainResult } from '../audit/auditChainCheck';

/**
 * What `cairn verify` reports for a tenant (docs/retention.md): findings (damage: something a kept
 * head, `latest` or manifest references is missing, of the wrong size or hash, or unreadable),
 * orphans (stored items nothing references; `collectable` once older than the grace, which prune
 * then deletes), what was checked and how, and the audit chain.
 */

export type VerifyDomain = 'threads' | 'sessions' | 'snapshots';

export type FindingKind =
  'missing' | 'wrong_size' | 'wrong_hash' | 'dangling_latest' | 'dangling_head' | 'unreadable';

export interface Finding {
  readonly domain: VerifyDomain;
  readonly kind: FindingKind;
  /** The thread, session or workspace snapshot concerned. */
  readonly where: string;
  /** The stored item, as the storage names it within the domain. */
  readonly key: string;
  readonly detail: string;
}

export interface Orphan {
  readonly domain: VerifyDomain;
  readonly key: string;
  readonly size: number;
  /** When it was stored or last written (RFC 3339). */
  readonly storedAt: string;
  /** Older than the grace: the next prune deletes it. */
  readonly collectable: boolean;
}

export interface VerifyChecked {
  threads: number;
  checkpoints: number;
  values: number;
  sessions: number;
  manifests: number;
  archiveObjects: number;
  snapshots: number;
  parts: number;
  /** Items whose content hash was computed (values, files). */
  hashed: number;
  bytesHashed: number;
}

export interface TenantVerifyReport {
  readonly tenant: string;
  /** No finding and no collectable orphan. */
  readonly ok: boolean;
  /** The first {@link MAX_LISTED} findings; `findingCount` is the total. */
  readonly findings: Finding[];
  readonly findingCount: number;
  /** The first {@link MAX_LISTED} orphans; `orphanCount` is the total, `collectableOrphans` those prune deletes. */
  readonly orphans: Orphan[];
  readonly orphanCount: number;
  readonly collectableOrphans: number;
  readonly checked: VerifyChecked;
  /** How content was checked: every byte, or which sample. */
  readonly sampling: string;
  readonly audit: AuditChainResult;
}

export const MAX_LISTED = 1000;

/** Collects one tenant's findings and orphans (bounded lists, exact counts). */
export class VerifyCollector {
  readonly findings: Finding[] = [];
  findingCount = 0;
  readonly orphans: Orphan[] = [];
  orphanCount = 0;
  collectableOrphans = 0;
  readonly checked: VerifyChecked = {
    threads: 0,
    checkpoints: 0,
    values: 0,
    sessions: 0,
    manifests: 0,
    archiveObjects: 0,
    snapshots: 0,
    parts: 0,
    hashed: 0,
    bytesHashed: 0,
  };

  constructor(
    readonly now: number,
    readonly graceMs: number,
  ) {}

  finding(finding: Finding): void {
    this.findingCount += 1;
    if (this.findings.length < MAX_LISTED) this.findings.push(finding);
  }

  orphan(domain: VerifyDomain, key: string, size: number, storedAt: Date): void {
    const collectable = storedAt.getTime() <= this.now - this.graceMs;
    this.orphanCount += 1;
    if (collectable) this.collectableOrphans += 1;
    if (this.orphans.length < MAX_LISTED) {
      this.orphans.push({ domain, key, size, storedAt: storedAt.toISOString(), collectable });
    }
  }

  hashed(bytes: number): void {
    this.checked.hashed += 1;
    this.checked.bytesHashed += bytes;
  }
}

/** Which items get their content hashed: every one with `readData`, else a random sample. */
export interface HashSample {
  readonly readData: boolean;
  /** Without `readData`, about one item in this many is hashed, and at least one per group. */
  readonly oneIn: number;
  readonly random: () => number;
}

/** The items of one group (a thread, a session, a snapshot) whose content is hashed. */
export function sampled<T>(items: readonly T[], sample: HashSample): T[] {
  if (sample.readData || items.length <= 1) return [...items];
  const chosen = items.filter(() => sample.random() * sample.oneIn < 1);
  if (chosen.length === 0) chosen.push(items[Math.floor(sample.random() * items.length)] as T);
  return chosen;
}

export function samplingNote(sample: HashSample): string {
  return sample.readData
    ? 'every byte: every referenced value, archive file and snapshot file was read and hashed'
    : `presence and size of every referenced item (values: presence); content hashed for a random 1 in ${sample.oneIn} values of each thread, one file of each session's latest checkpoint, and 1 in ${sample.oneIn} files of each snapshot (at least one each); --read-data hashes every byte`;
}
