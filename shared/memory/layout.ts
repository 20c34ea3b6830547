import { createHash } from 'node:crypto';

import { lru } from '../lru';

/**
 * Where facts live in storage, shared by the implementations: every namespace segment becomes a
 * fixed-width digest, and a namespace path the concatenation of its segments' digests. So
 *
 * - the namespace `users` and everything below it (`users/42`, `users/42/prefs`) share the prefix
 *   `D(users)`, and nothing else has it (`usersX` has `D(usersX)`): a subtree is one contiguous
 *   range of keys in a sorted store, and one folder in a tree of folders;
 * - a storage key has a bounded length whatever the names (16 segments of up to 512 bytes would
 *   not fit Azure's 1 KiB key limit, nor a file name's 255 bytes, if spelled out) and only the
 *   characters `[0-9a-f]`, legal everywhere and case-insensitive-safe.
 *
 * Digests are SHA-256 prefixes: 80 bits per segment, 128 bits per key. The names themselves are
 * stored in each row, and reads check them, so a collision could never return another fact.
 */

export const SEGMENT_DIGEST_CHARS = 20;
export const KEY_DIGEST_CHARS = 32;

function digest(text: string, chars: number): string {
  return createHash('sha256').update(text, 'utf8').digest('hex').slice(0, chars);
}

/** Digest paths of the namespaces seen last (rows of one namespace come together). */
const namespaceDigests = lru<string, string>(1000);

/** The digest path of a namespace (`""`, the whole tenant, has the empty path). */
export function namespaceDigest(namespace: string): string {
  if (namespace === '') return '';
  const known = namespaceDigests.get(namespace);
  if (known !== undefined) return known;
  const path = namespace
    .split('/')
    .map((segment) => digest(segment, SEGMENT_DIGEST_CHARS))
    .join('');
  namespaceDigests.set(namespace, path);
  return path;
}

/** The same, one digest per segment, for folder trees. */
export function segmentDigests(namespace: string): string[] {
  if (namespace === '') return [];
  return namespace.split('/').map((segment) => digest(segment, SEGMENT_DIGEST_CHARS));
}

export function keyDigest(key: string): string {
  return digest(key, KEY_DIGEST_CHARS);
}

/**
 * A fact's id in its tenant: `<namespace digest path>-<key digest>`, the Table RowKey and the
 * name the change feed gives a changed fact by. The facts of a namespace and below are exactly the
 * ids that start with its {@link namespaceDigest} (`-` is not a digest character).
 */
export function factId(namespace: string, key: string): string {
  return `${namespaceDigest(namespace)}-${keyDigest(key)}`;
}

/** The segment digests and key digest of a {@link factId}; null when it is not one. */
export function parseFactId(id: string): { segments: string[]; key: string } | null {
  const match = /^((?:[0-9a-f]{20})*)-([0-9a-f]{32})$/.exec(id);
  if (match === null) return null;
  const path = match[1] as string;
  const segments: string[] = [];
  for (let at = 0; at < path.length; at += SEGMENT_DIGEST_CHARS) {
    segments.push(path.slice(at, at + SEGMENT_DIGEST_CHARS));
  }
  return { segments, key: match[2] as string };
}
