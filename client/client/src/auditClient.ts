import type { AuditRecordPage, SignedHeadPage } from '@cairn-state/protocol/audit';
import type { AuditRecord } from '@cairn-state/protocol/audit/chain';
import type { VerifyAnswer } from '@cairn-state/protocol/audit/headChain';
import type { SignedHead } from '@cairn-state/protocol/audit/headSignature';
import type { z } from 'zod';

import { readJson, type Transport } from './transport.js';

/**
 * The caller's tenant's audit trail (the service must run with CAIRN_AUDIT=true; otherwise every
 * call fails with 501 `not_configured` naming the setting): records oldest first, the service's
 * verification of the hash chain, and the signed heads. `cairn audit verify` checks a trail itself, with the public key.
 */

export type { AuditRecord, VerifyResult } from '@cairn-state/protocol/audit/chain';
export type { VerifyAnswer } from '@cairn-state/protocol/audit/headChain';
export type { SignedHead } from '@cairn-state/protocol/audit/headSignature';

export interface AuditRecordQuery {
  readonly threadId?: string;
  readonly action?: string;
  /** Records after this seq (the `next` of a page). */
  readonly afterSeq?: number;
  /** 1-1000 (default 100). */
  readonly limit?: number;
}

export interface AuditPage<T> {
  readonly items: T[];
  /** Pass as `afterSeq` for the next page; null on the last page. */
  readonly next: number | null;
}

export class AuditClient {
  constructor(private readonly transport: Transport) {}

  async records(query: AuditRecordQuery = {}): Promise<AuditPage<AuditRecord>> {
    const reply = await this.transport.call('GET', '/audit/records', { query: { ...query } });
    const page = await readJson<z.output<typeof AuditRecordPage>>(reply, 200);
    return { items: page.records, next: page.next };
  }

  /** Every record (after `afterSeq`), page by page. */
  async *allRecords(query: Omit<AuditRecordQuery, 'limit'> = {}): AsyncGenerator<AuditRecord> {
    let afterSeq = query.afterSeq ?? 0;
    for (;;) {
      const page = await this.records({ ...query, afterSeq, limit: 1000 });
      yield* page.items;
      if (page.next === null) return;
      afterSeq = page.next;
    }
  }

  /**
   * The service's verification (the chain and its signed heads), optionally against a head kept
   * elsewhere; with a signing key, the head is signed only when all holds (else `notSigned`).
   */
  async verify(expected?: { seq: number; hash: string }): Promise<VerifyAnswer> {
    const query = expected === undefined ? {} : { expectedSeq: expected.seq, expectedHash: expected.hash };
    return readJson(await this.transport.call('GET', '/audit/verify', { query }), 200);
  }

  async heads(afterSeq = 0, limit = 1000): Promise<AuditPage<SignedHead>> {
    const reply = await this.transport.call('GET', '/audit/heads', { query: { afterSeq, limit } });
    const page = await readJson<z.output<typeof SignedHeadPage>>(reply, 200);
    return { items: page.heads, next: page.next };
  }

  /** Every signed head, page by page. */
  async *allHeads(): AsyncGenerator<SignedHead> {
    let afterSeq = 0;
    for (;;) {
      const page = await this.heads(afterSeq);
      yield* page.items;
      if (page.next === null) return;
      afterSeq = page.next;
    }
  }
}
