import { createHash, createPrivateKey, createPublicKey, type KeyObject, sign, verify } from 'node:crypto';

import { canonicalJson } from '../canonicalJson.js';

/**
 * Signed heads of an audit trail: Ed25519 signatures over `{tenant, seq, hash, signedAtMs, prevSeq,
 * prevHash}` (as canonical JSON), so that a copy of the trail can be checked against them with the
 * public key alone (`cairn audit verify --public-key <file>`). `prevSeq`/`prevHash` name the signed
 * head (of the same key) that the signer found and checked the chain against before signing: the
 * heads form a chain of their own, from `prevSeq` 0 (the key's first head of the tenant). Heads
 * signed before that link existed carry neither, and their statement has neither. Pure (node's
 * crypto only): the CLI uses it too.
 *
 * Key text: the private key (CAIRN_AUDIT_SIGNING_KEY) is PKCS#8, either PEM
 * (`-----BEGIN PRIVATE KEY-----`) or the base64 of its DER on one line (what `cairn audit keygen`
 * prints, easier to keep in an app setting); the public key is SPKI, PEM or base64 of its DER.
 */

export interface SignedHead {
  readonly tenant: string;
  readonly seq: number;
  readonly hash: string;
  readonly signedAtMs: number;
  /** The seq of the signed head this one extends; 0 for the key's first head of the tenant. */
  readonly prevSeq?: number;
  /** That head's hash (64 zeros with `prevSeq` 0). */
  readonly prevHash?: string;
  /** First 16 hex digits of the SHA-256 of the public key (SPKI DER): which key signed. */
  readonly keyId: string;
  /** Base64 Ed25519 signature of {@link signedStatement}. */
  readonly signature: string;
}

export type HeadStatement = Pick<
  SignedHead,
  'tenant' | 'seq' | 'hash' | 'signedAtMs' | 'prevSeq' | 'prevHash'
>;

/** The bytes a head's signature covers (the link to the previous head only when it has one). */
export function signedStatement(head: HeadStatement): Buffer {
  return Buffer.from(
    canonicalJson({
      hash: head.hash,
      seq: head.seq,
      signedAtMs: head.signedAtMs,
      tenant: head.tenant,
      prevSeq: head.prevSeq,
      prevHash: head.prevHash,
    }),
  );
}

/** The id of a public key: first 16 hex digits of SHA-256 of its SPKI DER. */
export function publicKeyId(publicKey: KeyObject): string {
  return createHash('sha256')
    .update(publicKey.export({ format: 'der', type: 'spki' }))
    .digest('hex')
    .slice(0, 16);
}

/** An Ed25519 private key from its text (see the module comment); throws Error saying what is wrong. */
export function parsePrivateKey(text: string): KeyObject {
  const trimmed = text.trim();
  let key: KeyObject;
  try {
    key = trimmed.startsWith('-----BEGIN')
      ? createPrivateKey(trimmed)
      : createPrivateKey({ key: strictBase64(trimmed), format: 'der', type: 'pkcs8' });
  } catch {
    throw new Error('is not a PKCS#8 private key (PEM, or the base64 of its DER)');
  }
  if (key.asymmetricKeyType !== 'ed25519') throw new Error('is not an Ed25519 key');
  return key;
}

/** An Ed25519 public key from its text (SPKI PEM, or the base64 of its DER). */
export function parsePublicKey(text: string): KeyObject {
  const trimmed = text.trim();
  let key: KeyObject;
  try {
    key = trimmed.startsWith('-----BEGIN')
      ? createPublicKey(trimmed)
      : createPublicKey({ key: strictBase64(trimmed), format: 'der', type: 'spki' });
  } catch {
    throw new Error('is not a public key (SPKI PEM, or the base64 of its DER)');
  }
  if (key.asymmetricKeyType !== 'ed25519') throw new Error('is not an Ed25519 key');
  return key;
}

function strictBase64(text: string): Buffer {
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(text)) throw new Error('not base64');
  return Buffer.from(text, 'base64');
}

export function signHead(privateKey: KeyObject, head: HeadStatement): SignedHead {
  return {
    tenant: head.tenant,
    seq: head.seq,
    hash: head.hash,
    signedAtMs: head.signedAtMs,
    ...(head.prevSeq === undefined ? {} : { prevSeq: head.prevSeq }),
    ...(head.prevHash === undefined ? {} : { prevHash: head.prevHash }),
    keyId: publicKeyId(createPublicKey(privateKey)),
    signature: sign(null, signedStatement(head), privateKey).toString('base64'),
  };
}

/** True when `head.signature` is `publicKey`'s signature of the head's statement. */
export function verifyHeadSignature(publicKey: KeyObject, head: SignedHead): boolean {
  try {
    return verify(null, signedStatement(head), publicKey, Buffer.from(head.signature, 'base64'));
  } catch {
    return false;
  }
}
