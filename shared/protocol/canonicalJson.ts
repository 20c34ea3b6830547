import canonicalize from 'canonicalize';

/**
 * The one canonical JSON of the project (RFC 8785, by the `canonicalize` library): object keys
 * sorted by UTF-16 code units at every level, no whitespace, numbers and strings as ECMAScript's
 * JSON.stringify writes them, properties whose value is undefined left out. Audit record hashes and
 * signed heads, snapshot manifest bytes (and so snapshot ids and signatures), session archive
 * manifest identities and the OpenAI Agents session's transaction digests are computed over it.
 *
 * For every JSON value (what these hash: parsed or validated JSON) it is byte-identical to the
 * hand-written walk it replaced, so stored hashes, ids and signatures still verify (see
 * test/unit/canonicalJson.test.ts). It differs only for what JSON cannot hold, where it now follows
 * JSON.stringify: an undefined or symbol in an array is written null, an object's `toJSON` is used
 * (a Date is its ISO string). NaN and the infinities are refused with a TypeError.
 */
export function canonicalJson(value: unknown): string {
  let text: string | undefined;
  try {
    text = canonicalize(value);
  } catch (error) {
    throw new TypeError(`canonical JSON cannot hold this value: ${(error as Error).message}`, {
      cause: error,
    });
  }
  if (text === undefined) throw new TypeError(`canonical JSON cannot hold a ${typeof value}`);
  return text;
}
