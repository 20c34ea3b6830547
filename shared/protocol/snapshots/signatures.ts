import { createPublicKey, type KeyObject, verify } from 'node:crypto';

import { SIGNATURE_BYTES } from '../snapshots.js';

/**
 * Ed25519 keys and signatures of snapshot manifests. A signature is the 64 raw bytes of
 * `crypto.sign(null, manifestBytes, privateKey)`; a public key travels as the base64 of its 32 raw
 * bytes (what `cairn keygen` prints and CAIRN_SNAPSHOT_KEYS holds) or as an SPKI PEM file.
 */

export { SIGNATURE_BYTES };
export const PUBLIC_KEY_BYTES = 32;

/**
 * The public key whose raw bytes `text` holds in base64 (standard or URL alphabet, padding
 * optional); null when it is not exactly 32 bytes of base64.
 */
export function publicKeyFromBase64(text: string): KeyObject | null {
  const trimmed = text.trim();
  if (!/^[A-Za-z0-9+/_-]{43}=?$/.test(trimmed)) return null;
  const raw = Buffer.from(trimmed.replaceAll('-', '+').replaceAll('_', '/'), 'base64');
  if (raw.length !== PUBLIC_KEY_BYTES) return null;
  try {
    return createPublicKey({
      key: { kty: 'OKP', crv: 'Ed25519', x: raw.toString('base64url') },
      format: 'jwk',
    });
  } catch {
    return null;
  }
}

/** The 32 raw bytes of an Ed25519 public key, in standard base64. */
export function publicKeyToBase64(key: KeyObject): string {
  const jwk = key.export({ format: 'jwk' });
  return Buffer.from(jwk.x ?? '', 'base64url').toString('base64');
}

/** True when `signature` is an Ed25519 signature of exactly `bytes` by `key`. */
export function verifiesWith(bytes: Buffer, signature: Buffer, key: KeyObject): boolean {
  if (signature.length !== SIGNATURE_BYTES || key.asymmetricKeyType !== 'ed25519') return false;
  try {
    return verify(null, bytes, key, signature);
  } catch {
    return false;
  }
}
