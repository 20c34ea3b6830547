import { InvalidArgumentError } from './errors.js';
import { characterProblem, keyProblem, prefixProblem } from './text.js';

// The rules themselves are the protocol's (shared/protocol/text.ts): the route specs check them too.
export { characterProblem, MAX_KEY_BYTES, NONCHARACTER_RULE } from './text.js';

/** Throws {@link InvalidArgumentError} naming `field` when `text` breaks {@link characterProblem}. */
export function checkCharacters(text: string, field: string): void {
  const problem = characterProblem(text);
  if (problem !== null) throw new InvalidArgumentError(field, problem);
}

/**
 * Throws {@link InvalidArgumentError} (field `field`) unless `key` is a valid store key: 1-1024 bytes
 * of UTF-8, `/`-separated non-empty segments, no `.` or `..` segment, no `\`, no control characters,
 * no Unicode noncharacters, no unpaired surrogates. Every store calls this before any I/O, so a bad
 * key never reaches a filesystem or a service.
 */
export function validateKey(key: string, field = 'key'): void {
  const problem = keyProblem(key);
  if (problem !== null) throw new InvalidArgumentError(field, problem);
}

/**
 * Throws {@link InvalidArgumentError} (field `field`) unless `prefix` is empty or the beginning of
 * some valid key: at most 1024 bytes, the characters of a key, and whole segments as a key has
 * them, except that it may end with `/` or in the middle of a segment (`notes/to` lists
 * `notes/today`; `notes/.` lists `notes/.hidden`). Listings call this before any I/O.
 */
export function validatePrefix(prefix: string, field = 'prefix'): void {
  const problem = prefixProblem(prefix);
  if (problem !== null) throw new InvalidArgumentError(field, problem);
}
