import { checkJsonDepth } from '../json';
import { InvalidArgumentError, PayloadTooLargeError } from '../protocol/errors';
import { characterProblem } from '../protocol/keys';
import { factKeyProblem, MAX_FACT_VALUE_BYTES, MAX_TTL_SECONDS, namespaceProblem } from '../protocol/memory';

/**
 * Memory facts: what a fact is, and the checks of every input that need no I/O. Each check runs
 * before the first storage request and names the field at fault (400 at the API).
 *
 * A namespace is a path of `/`-separated segments (`users/42`), each non-empty and of the characters
 * a store key may hold (no control characters, Unicode noncharacters or unpaired surrogates): so no
 * leading or trailing `/` and no `//`. Fact keys follow the same character rules. "Below" means by whole segments: `users`
 * covers `users/42`, never `usersX/1`. The empty namespace `""` stands for the whole tenant and is
 * accepted only where a function says so (search, listing, forgetting everything). The rules and
 * limits are the protocol's (shared/protocol/memory.ts): the routes check them too.
 */

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
  const problem = namespaceProblem(namespace, allowEmpty);
  if (problem !== null) throw new InvalidArgumentError(field, problem);
  return namespace === '' ? [] : namespace.split('/');
}

/** Throws unless `key` is a fact's key (the rules of {@link factKeyProblem}). */
export function checkFactKey(key: string, field = 'key'): void {
  const problem = factKeyProblem(key);
  if (problem !== null) throw new InvalidArgumentError(field, problem);
}

/**
 * The value as the bytes to store: its JSON in UTF-8. `undefined` (no value) is a 400, and so is a
 * value nested deeper than 63 levels (`MAX_JSON_DEPTH` with the body around it); a value over
 * {@link MAX_FACT_VALUE_BYTES} is a 413, like any body over its limit.
 */
export function serialiseValue(value: unknown, field = 'value'): Buffer {
  if (value === undefined) throw new InvalidArgumentError(field, 'is required (any JSON value)');
  // Checked as its route's body `{"value": …}` is (docs/api.md, "Nesting"): the value at most 63
  // levels, with the route's answer, also where no body bounds it first (an MCP tool's arguments).
  checkJsonDepth({ [field]: value }, 'body');
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
