import { z } from 'zod';

import { keyProblem, MAX_KEY_BYTES, prefixProblem } from './text.js';

/**
 * The field rules the routes share, as zod schemas. A schema with an `id` is one component of the
 * OpenAPI document (`#/components/schemas/<id>`). Where a rule is a function of the text (bytes of
 * UTF-8, segments), the schema checks it with that function and its JSON Schema spells it as a
 * pattern and lengths (the description says what a pattern cannot).
 */

/** A string checked by `problem` (null: valid), whose message is the problem itself. */
export function ruledString(problem: (text: string) => string | null) {
  return z.string({ error: 'must be a string' }).superRefine((text, context) => {
    const found = problem(text);
    if (found !== null) context.addIssue({ code: 'custom', message: found });
  });
}

export const KiB = 1024;
export const MiB = 1024 * KiB;

/** The largest immutable object (an archive object, a snapshot part), in bytes. */
export const MAX_OBJECT_BYTES = 2 * MiB;

/** The default of the setting CAIRN_MAX_VALUE_BYTES: the largest key/value value. */
export const DEFAULT_MAX_VALUE_BYTES = 2 * MiB;

/**
 * The bytes encryption at rest adds to every stored value: a sealed value is its plaintext plus a
 * 50-byte header (marker, format version, key id length, the key id padded to 32 bytes, the 96-bit
 * IV) and the 16-byte authentication tag. A limit on what a store keeps is a limit on the sealed
 * bytes, so the plain limit of a value that may be sealed is this much smaller (or its store takes
 * values this much larger). The seal's format (shared/crypto/sealedFormat.ts) checks that its
 * layout adds exactly this.
 */
export const SEAL_OVERHEAD = 66;

export const Key = ruledString(keyProblem).meta({
  id: 'Key',
  description:
    `A key: 1-${MAX_KEY_BYTES} bytes of UTF-8, "/"-separated non-empty segments, no "." or ".." ` +
    'segment, no backslash, no control characters, no Unicode noncharacters (U+FDD0-U+FDEF, ' +
    'U+FFFE and U+FFFF in every plane), no unpaired surrogates.',
  minLength: 1,
  maxLength: MAX_KEY_BYTES,
  pattern: String.raw`^(?!/)(?!.*/$)(?!.*//)(?!(?:.*/)?\.\.?(?:/|$))[^\\\u0000-\u001F\u007F\uFDD0-\uFDEF\uFFFE\uFFFF]+$`,
});

/** The beginning of some valid key, or empty. */
export const KeyPrefix = ruledString(prefixProblem);

// eslint-disable-next-line no-control-regex
const ETAG_PATTERN = /^"[^"\u0000-\u001f\u007f]*"$/;

export const Etag = z.string().regex(ETAG_PATTERN).meta({
  id: 'Etag',
  description: 'An opaque ETag, quoted, as Cairn returned it. It changes on every successful write.',
});

/** The id of a request, the caller's or one the service makes. */
export const REQUEST_ID_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/;

/** Thread names, checkpoint ids and run ids: the session-id alphabet. */
const NAME = /^[A-Za-z0-9._-]{1,128}$/;
export const NAME_RULE = 'must be 1-128 characters of [A-Za-z0-9._-], not "." or ".."';

/** Whether `value` is a name of the session-id alphabet (thread names, checkpoint and run ids). */
export function isName(value: string): boolean {
  return NAME.test(value) && value !== '.' && value !== '..';
}

/**
 * A session id, generation or checkpoint id, a thread name or a run id: the one name rule those
 * routes share (`#/components/schemas/Id`).
 */
export const Id = z
  .string({ error: 'must be a string' })
  .refine(isName, NAME_RULE)
  .meta({
    id: 'Id',
    description:
      'A session id, generation or checkpoint id, a thread name or a run id: 1-128 characters of [A-Za-z0-9._-], not "." or "..".',
    pattern: String.raw`^(?!\.\.?$)[A-Za-z0-9._-]{1,128}$`,
  });

/** Standard base64 with padding, as Node writes it; empty for no bytes (a JSON Schema pattern). */
export const BASE64_PATTERN = String.raw`^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$`;

/** 64 lowercase hex digits: a SHA-256. */
export const SHA256_HEX = /^[0-9a-f]{64}$/;

export const TENANT_ID_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;

/** What a tenant id must be, as error messages say it. */
export const TENANT_ID_RULE = 'must be 1-64 of [A-Za-z0-9._-]';

/** A tenant id: 1-64 characters of `[A-Za-z0-9._-]`; `.` and `..` are refused because tenants name folders. */
export function isValidTenantId(tenant: string): boolean {
  return TENANT_ID_PATTERN.test(tenant) && tenant !== '.' && tenant !== '..';
}

export const TenantId = z
  .string({ error: 'must be a tenant id' })
  .refine(isValidTenantId, TENANT_ID_RULE)
  .meta({
    id: 'TenantId',
    description: 'A tenant id: 1-64 characters of [A-Za-z0-9._-], not "." or "..".',
    pattern: String.raw`^(?!\.\.?$)[A-Za-z0-9._-]{1,64}$`,
  });

/** An RFC 3339 date-time, as Cairn writes them in UTC (`2026-11-29T21:16:51.123Z`). */
export const Timestamp = z.string().meta({
  format: 'date-time',
  description: 'RFC 3339 date-time; Cairn writes UTC with milliseconds, e.g. 2026-11-29T21:16:51.123Z.',
});
