import { InvalidArgumentError, PayloadTooLargeError } from '../errors';
import { checkJsonDepth } from '../json';
import { characterProblem, checkCharacters } from '../keys';

/**
 * Memory facts: what a fact is, and the checks of every input that need no I/O. Each check runs
 * before the first storage request and names the field at fault (400 at the API).
 *
 * A namespace is a path of `/`-separated segments (`users/42`), each non-empty and of the characters
 * a store key may hold (no control characters, Unicode noncharacters or unpaired surrogates): so no
 * leading or trailing `/` and no `//`. Fact keys follow the same character rules. "Below" means by whole segments: `users`
 * covers `users/42`, never `usersX/1`. The empty namespace `""` stands for the whole tenant and is
 * accepted only where a function says so (search, listing, forgetting everything).
 */

export const MAX_NAMESPACE_BYTES = 512;
export const MAX_NAMESPACE_SEGMENTS = 16;
export const MAX_FACT_KEY_BYTES = 512;
/** The largest value, as serialised JSON in UTF-8. */
export const MAX_FACT_VALUE_BYTES = 32 * 1024;
/** Ten years: a longer time to live is almost certainly a unit mistake (milliseconds for seconds). */
export const MAX_TTL_SECONDS = 10 * 365 * 24 * 3600;
export const DEFAULT_SEARCH_LIMIT = 10;
export const MAX_SEARCH_LIMIT = 1000;
export const MAX_SEARCH_OFFSET = 10_000;
export const MAX_SEARCH_TEXT_BYTES = 2048;
export const DEFAULT_NAMESPACE_LIMIT = 100;
export const MAX_NAMESPACE_LIMIT = 1000;

/** A fact as the API answers it. Times are Unix milliseconds. */
export interface MemoryItem {
  readonly namespace: string[];
  readonly key: string;
  readonly value: unknown;
  readonly createdAt: number;
  readonly updatedAt: number;
  /** Absent when the fact never expires. */
  readonly expiresAt?: number;
  /** The field paths the fact has vectors for; absent when it has none. */
  readonly vectorFields?: string[];
  /** The fact's version, quoted; it changes on every successful write. */
  readonly etag: string;
}

/** A search result: the fact and, for a search with text or a vector, its relevance in [0, 1]. */
export interface ScoredItem extends MemoryItem {
  readonly score?: number;
}

/** True for text of the characters a key may hold (no control characters, noncharacters or unpaired surrogates). */
export function isPlainText(text: string): boolean {
  return characterProblem(text) === null;
}

/**
 * Throws unless `namespace` is a valid namespace path; `""` passes only with `allowEmpty`.
 * Returns its segments (none for `""`).
 */
export function checkNamespace(namespace: string, field = 'namespace', allowEmpty = false): string[] {
  if (namespace === '') {
    if (allowEmpty) return [];
    throw new InvalidArgumentError(field, 'must not be empty');
  }
  if (Buffer.byteLength(namespace, 'utf8') > MAX_NAMESPACE_BYTES) {
    throw new InvalidArgumentError(field, `must be at most ${MAX_NAMESPACE_BYTES} bytes of UTF-8`);
  }
  checkCharacters(namespace, field);
  const segments = namespace.split('/');
  if (segments.some((segment) => segment === '')) {
    throw new InvalidArgumentError(field, 'must not have an empty segment or a leading or trailing "/"');
  }
  if (segments.length > MAX_NAMESPACE_SEGMENTS) {
    throw new InvalidArgumentError(field, `must have at most ${MAX_NAMESPACE_SEGMENTS} segments`);
  }
  return segments;
}

export function checkFactKey(key: string, field = 'key'): void {
  if (key === '') throw new InvalidArgumentError(field, 'must not be empty');
  if (Buffer.byteLength(key, 'utf8') > MAX_FACT_KEY_BYTES) {
    throw new InvalidArgumentError(field, `must be at most ${MAX_FACT_KEY_BYTES} bytes of UTF-8`);
  }
  checkCharacters(key, field);
}

/**
 * The value as the bytes to store: its JSON in UTF-8. `undefined` (no value) is a 400, and so is a
 * value nested deeper than `MAX_JSON_DEPTH`; a value over {@link MAX_FACT_VALUE_BYTES} is a 413,
 * like any body over its limit.
 */
export function serialiseValue(value: unknown, field = 'value'): Buffer {
  if (value === undefined) throw new InvalidArgumentError(field, 'is required (any JSON value)');
  checkJsonDepth(value, field);
  const bytes = Buffer.from(JSON.stringify(value), 'utf8');
  if (bytes.length > MAX_FACT_VALUE_BYTES) throw new PayloadTooLargeError(MAX_FACT_VALUE_BYTES, field);
  return bytes;
}

export function checkTtl(ttlSeconds: number, field = 'ttl'): void {
  if (!Number.isSafeInteger(ttlSeconds) || ttlSeconds < 1 || ttlSeconds > MAX_TTL_SECONDS) {
    throw new InvalidArgumentError(field, `must be a whole number of seconds from 1 to ${MAX_TTL_SECONDS}`);
  }
}

/** True when `namespace` is `ancestor` or lies below it by whole segments (`""` is above all). */
export function isWithin(namespace: string, ancestor: string): boolean {
  return ancestor === '' || namespace === ancestor || namespace.startsWith(`${ancestor}/`);
}

/** Orders namespaces segment by segment (`a/b` before `a-c`, since `a` is a prefix of `a-c`). */
export function compareNamespaces(a: readonly string[], b: readonly string[]): number {
  const length = Math.min(a.length, b.length);
  for (let i = 0; i < length; i++) {
    const x = a[i] as string;
    const y = b[i] as string;
    if (x !== y) return x < y ? -1 : 1;
  }
  return a.length - b.length;
}
