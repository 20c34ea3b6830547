import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

import { IntegrityError } from '../protocol/errors';
import { SEAL_OVERHEAD } from '../protocol/fields';
import type { EncryptionKey } from './encryptionKeys';
import type { ValuePlace } from './valueCodec';

/**
 * The bytes of a sealed value (AES-256-GCM, Node's crypto), format version 1:
 *
 * | bytes   | what                                                        |
 * | ------- | ----------------------------------------------------------- |
 * | 0-3     | marker `00 43 53 45` ("\0CSE": no JSON text, type tag or base64 starts so) |
 * | 4       | format version, 1                                           |
 * | 5       | length L of the key id, 1-32                                |
 * | 6-37    | the key id (ASCII), zero-padded to 32 bytes                 |
 * | 38-49   | the 96-bit IV, random for every seal                        |
 * | 50-…    | the ciphertext, as long as the plaintext                    |
 * | last 16 | the 128-bit authentication tag                              |
 *
 * The additional authenticated data is bytes 0-49 followed by the canonical serialisation of the
 * value's {@link ValuePlace} (JSON, keys in code-point order, no whitespace): bytes copied to
 * another tenant, kind, key or version, or given another key id, fail to open. The overhead is the
 * same for every value ({@link SEAL_OVERHEAD} bytes), so a sealed size tells the plain size.
 */

const MARKER = Buffer.from([0x00, 0x43, 0x53, 0x45]);
const VERSION = 1;
const ID_FIELD = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const HEADER_BYTES = MARKER.length + 1 + 1 + ID_FIELD + IV_BYTES;
// Bytes a sealed value has beyond its plaintext: the protocol's constant, which the limits of
// sealed values are computed with, must be what this layout adds.
if (HEADER_BYTES + TAG_BYTES !== SEAL_OVERHEAD) {
  throw new Error(`the seal adds ${HEADER_BYTES + TAG_BYTES} bytes, not SEAL_OVERHEAD (${SEAL_OVERHEAD})`);
}
export { SEAL_OVERHEAD };

/**
 * The plain size of a sealed value stored in `storedSize` bytes (the overhead is the same for
 * every value); 0 for bytes too short to be sealed (they do not open either).
 */
export function plainSize(storedSize: number): number {
  return Math.max(0, storedSize - SEAL_OVERHEAD);
}

/** The place as authenticated: JSON with keys in code-point order, no whitespace, `version` only when set. */
export function canonicalPlace(place: ValuePlace): string {
  const fields: [string, string][] = [
    ['key', place.key],
    ['kind', place.kind],
    ['tenant', place.tenant],
  ];
  if (place.version !== undefined) fields.push(['version', place.version]);
  return `{${fields.map(([name, value]) => `${JSON.stringify(name)}:${JSON.stringify(value)}`).join(',')}}`;
}

/**
 * The IV of sealed bytes (base64), random for every seal: it names one write. Bytes too short to be
 * sealed answer what they hold (they do not open either).
 */
export function sealIdentity(bytes: Buffer): string {
  return bytes.subarray(HEADER_BYTES - IV_BYTES, HEADER_BYTES).toString('base64');
}

/** True when `bytes` start with the sealed format's marker (whatever follows). */
export function hasSealMarker(bytes: Buffer): boolean {
  return bytes.length >= MARKER.length && bytes.subarray(0, MARKER.length).equals(MARKER);
}

/**
 * The key id `bytes` were sealed with, or null when they are not in the sealed format (too short,
 * another marker or version, a malformed id field). Opens nothing.
 */
export function sealedKeyId(bytes: Buffer): string | null {
  if (bytes.length < SEAL_OVERHEAD || !hasSealMarker(bytes) || bytes[4] !== VERSION) return null;
  const length = bytes[5] ?? 0;
  if (length < 1 || length > ID_FIELD) return null;
  const field = bytes.subarray(6, 6 + ID_FIELD);
  if (field.subarray(length).some((byte) => byte !== 0)) return null;
  const id = field.subarray(0, length).toString('latin1');
  return /^[A-Za-z0-9._-]+$/.test(id) ? id : null;
}

function additionalData(header: Buffer, place: ValuePlace): Buffer {
  return Buffer.concat([header, Buffer.from(canonicalPlace(place), 'utf8')]);
}

/** Seals `plain` for `place` with `key`. */
export function sealWith(key: EncryptionKey, plain: Buffer, place: ValuePlace): Buffer {
  const header = Buffer.alloc(HEADER_BYTES);
  MARKER.copy(header, 0);
  header[4] = VERSION;
  header[5] = key.id.length;
  header.write(key.id, 6, 'latin1');
  randomBytes(IV_BYTES).copy(header, HEADER_BYTES - IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key.key, header.subarray(HEADER_BYTES - IV_BYTES), {
    authTagLength: TAG_BYTES,
  });
  cipher.setAAD(additionalData(header, place));
  const body = cipher.update(plain);
  cipher.final();
  return Buffer.concat([header, body, cipher.getAuthTag()]);
}

/**
 * Opens `stored` (sealed for `place` with `key`); IntegrityError when it does not open there: any
 * changed byte, another place, another key. The message names the place, never the bytes.
 */
export function openWith(key: EncryptionKey, stored: Buffer, place: ValuePlace): Buffer {
  const header = stored.subarray(0, HEADER_BYTES);
  const decipher = createDecipheriv('aes-256-gcm', key.key, header.subarray(HEADER_BYTES - IV_BYTES), {
    authTagLength: TAG_BYTES,
  });
  decipher.setAAD(additionalData(header, place));
  decipher.setAuthTag(stored.subarray(stored.length - TAG_BYTES));
  const body = decipher.update(stored.subarray(HEADER_BYTES, stored.length - TAG_BYTES));
  try {
    decipher.final();
  } catch (error) {
    throw new IntegrityError(
      `the stored ${place.kind} value at ${place.key} does not open with key ${key.id}: it was changed, moved, or sealed for another place`,
      {},
      { cause: error },
    );
  }
  return body;
}
