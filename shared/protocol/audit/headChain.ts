import type { KeyObject } from 'node:crypto';

import { type ExpectedHead, GENESIS_HASH, type VerifyResult } from './chain.js';
import { publicKeyId, type SignedHead, verifyHeadSignature } from './headSignature.js';

/**
 * The continuity of an audit trail's signed heads (docs/audit.md), checked the same way by the
 * service (its verify, before it signs) and by `cairn audit verify` (with the public key alone).
 * Pure (node's crypto only).
 *
 * Every head of the key must be genuine (its signature verifies, it is the tenant's) and the trail
 * must still hold it: record `seq` with that hash (so the chain was not rewritten up to it, and its
 * tail was not cut before it). A head that names the head it extends (`prevSeq`, `prevHash`) must
 * find that head among the heads, with that hash: a head missing from between two heads, or before
 * the first, was removed. Heads kept elsewhere (the CLI's `--heads` file) must still be held by the
 * trail too, and the service's heads must not end before them (the latest ones were removed).
 *
 * What no check here can catch: a trail rebuilt after every signed head was removed, checked
 * against nothing kept elsewhere. The service then signs the rebuilt trail's head as a first head
 * (`prevSeq` 0); only a head kept elsewhere tells.
 */

/** A head that does not hold, and the seq at which the trail's evidence is broken. */
export interface HeadProblem {
  readonly seq: number;
  readonly message: string;
}

export interface SignedHeadsCheck {
  /** What the trail must still hold: every genuine head, and the head each one extends. */
  readonly expected: ExpectedHead[];
  readonly problems: HeadProblem[];
  /** Heads of the key whose signature verified. */
  readonly checked: number;
  /** Heads signed by other keys (before a key change): counted, not checked. */
  readonly otherKeys: number;
  /** The genuine head of the key with the highest seq. */
  readonly latest: SignedHead | undefined;
}

/** The service's verify answer (`GET /api/audit/verify`). */
export interface VerifyAnswer extends VerifyResult {
  /** What does not hold, in words (empty when `ok`). */
  readonly problems: string[];
  /** The head signed for this answer, or the key's head already signed at this seq. */
  readonly signedHead?: SignedHead;
  /** With a signing key: why the head was not signed (the chain or a signed head does not hold). */
  readonly notSigned?: string;
}

/** The key id of a stored signed head that is not readable (see {@link unreadableHead}). */
export const UNREADABLE_KEY_ID = '(unreadable)';

/**
 * What a store answers for a stored signed head that is not one (not JSON, or not an object):
 * a head with nothing right but its seq, which {@link checkSignedHeads} reports at that seq, as a
 * store answers a damaged record, instead of failing the listing (and every verify) for good.
 */
export function unreadableHead(tenant: string, seq: number): SignedHead {
  return { tenant, seq, hash: '', signedAtMs: 0, keyId: UNREADABLE_KEY_ID, signature: '' };
}

/** `text` as a stored signed head, or {@link unreadableHead} when it is not one. */
export function storedHead(tenant: string, seq: number, text: string): SignedHead {
  try {
    const head: unknown = JSON.parse(text);
    if (typeof head === 'object' && head !== null && !Array.isArray(head)) return head as SignedHead;
  } catch {
    // Reported by checkSignedHeads.
  }
  return unreadableHead(tenant, seq);
}

/** Checks a tenant's signed heads (see the module comment), those of `publicKey` only. */
export function checkSignedHeads(
  tenant: string,
  heads: Iterable<SignedHead>,
  publicKey: KeyObject,
): SignedHeadsCheck {
  const keyId = publicKeyId(publicKey);
  const problems: HeadProblem[] = [];
  const expected: ExpectedHead[] = [];
  const ofKey = new Map<number, SignedHead>();
  const genuine: SignedHead[] = [];
  const unreadable = new Set<number>();
  let otherKeys = 0;
  for (const head of [...heads].sort((a, b) => a.seq - b.seq)) {
    if (head.keyId === UNREADABLE_KEY_ID) {
      // Whose it was cannot be told: a stored head of any key damaged or replaced by other bytes.
      unreadable.add(head.seq);
      problems.push({ seq: head.seq, message: `the signed head at seq ${head.seq} is not readable` });
      continue;
    }
    if (head.keyId !== keyId) {
      otherKeys++;
      continue;
    }
    ofKey.set(head.seq, head);
    if (head.tenant !== tenant) {
      problems.push({ seq: head.seq, message: `the head at seq ${head.seq} is signed for another tenant` });
    } else if (!verifyHeadSignature(publicKey, head)) {
      problems.push({
        seq: head.seq,
        message: `the signature of the head at seq ${head.seq} does not verify`,
      });
    } else {
      genuine.push(head);
    }
  }
  for (const head of genuine) {
    expected.push({ seq: head.seq, hash: head.hash });
    if (head.prevSeq === undefined && head.prevHash === undefined) continue; // signed before links
    const { prevSeq, prevHash } = head;
    if (
      prevSeq === undefined ||
      prevHash === undefined ||
      !Number.isSafeInteger(prevSeq) ||
      prevSeq < 0 ||
      prevSeq >= head.seq ||
      (prevSeq === 0 && prevHash !== GENESIS_HASH)
    ) {
      problems.push({
        seq: head.seq,
        message: `the head at seq ${head.seq} names no earlier head it extends`,
      });
      continue;
    }
    if (prevSeq === 0) continue;
    expected.push({ seq: prevSeq, hash: prevHash });
    const before = ofKey.get(prevSeq);
    if (before !== undefined && !genuine.includes(before)) continue; // reported above
    if (before === undefined && unreadable.has(prevSeq)) continue; // reported above
    if (before === undefined) {
      problems.push({
        seq: prevSeq,
        message: `the head at seq ${head.seq} extends the signed head at seq ${prevSeq}, which is gone (signed heads were removed)`,
      });
    } else if (before.hash !== prevHash) {
      problems.push({
        seq: prevSeq,
        message: `the head at seq ${head.seq} extends a head at seq ${prevSeq} whose hash is not the one kept`,
      });
    }
  }
  return { expected, problems, checked: genuine.length, otherKeys, latest: genuine.at(-1) };
}

/**
 * Heads kept elsewhere (by the user, from earlier answers): the trail must still hold each, and
 * the service's latest head of the key (`latestSeq`, 0 for none) must not be before them. A kept
 * head of the key must have a good signature; one of another key is taken on the user's word.
 */
export function checkKeptHeads(
  kept: readonly SignedHead[],
  publicKey: KeyObject,
  latestSeq: number,
): { expected: ExpectedHead[]; problems: HeadProblem[] } {
  const keyId = publicKeyId(publicKey);
  const problems: HeadProblem[] = [];
  const expected: ExpectedHead[] = [];
  for (const head of kept) {
    if (head.keyId === keyId && !verifyHeadSignature(publicKey, head)) {
      problems.push({
        seq: head.seq,
        message: `the signature of the kept head at seq ${head.seq} does not verify`,
      });
      continue;
    }
    expected.push({ seq: head.seq, hash: head.hash });
  }
  const latestKept = Math.max(0, ...expected.map((head) => head.seq));
  if (latestKept > latestSeq) {
    problems.push({
      seq: latestSeq + 1,
      message: `the service's signed heads end at seq ${latestSeq}, before the kept head at seq ${latestKept} (signed heads were removed, or the trail was cut)`,
    });
  }
  return { expected, problems };
}
