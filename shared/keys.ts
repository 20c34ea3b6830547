import { hasControlCharacter } from './controlCharacters';
import { InvalidArgumentError } from './errors';

/** Longest key in UTF-8 bytes (also Azure's blob name limit). */
export const MAX_KEY_BYTES = 1024;

/** U+FDD0-U+FDEF and the last two code points of every plane (U+FFFE, U+FFFF, U+1FFFE, ...). */
const NONCHARACTER = /\p{Noncharacter_Code_Point}/u;

export const NONCHARACTER_RULE =
  'must not contain Unicode noncharacters (U+FDD0-U+FDEF, U+FFFE, U+FFFF in any plane)';

/**
 * Why `text` may not be (part of) a name that goes into a storage key, or null when it may: the
 * character rules every store key, prefix and user-chosen name share. Unpaired surrogates and
 * control characters are refused, and so are Unicode noncharacters, which Azure cannot list (a blob
 * named with U+FFFF makes every listing of its container fail), so that both backends hold exactly
 * the same names.
 */
export function characterProblem(text: string): string | null {
  if (!text.isWellFormed()) return 'must be valid Unicode';
  if (hasControlCharacter(text)) return 'must not contain control characters';
  if (NONCHARACTER.test(text)) return NONCHARACTER_RULE;
  return null;
}

/** Throws {@link InvalidArgumentError} naming `field` when `text` breaks {@link characterProblem}. */
export function checkCharacters(text: string, field: string): void {
  const problem = characterProblem(text);
  if (problem !== null) throw new InvalidArgumentError(field, problem);
}

/** The rules of a key past its length: characters and segments. */
function checkKeyText(key: string, field: string): void {
  checkCharacters(key, field);
  if (key.includes('\\')) throw new InvalidArgumentError(field, 'must not contain a backslash');
  for (const segment of key.split('/')) {
    if (segment === '') {
      throw new InvalidArgumentError(field, 'must not have an empty segment or a leading or trailing "/"');
    }
    if (segment === '.' || segment === '..') {
      throw new InvalidArgumentError(field, 'must not have a "." or ".." segment');
    }
  }
}

/**
 * Throws {@link InvalidArgumentError} (field `field`) unless `key` is a valid store key: 1-1024 bytes
 * of UTF-8, `/`-separated non-empty segments, no `.` or `..` segment, no `\`, no control characters,
 * no Unicode noncharacters, no unpaired surrogates. Every store calls this before any I/O, so a bad
 * key never reaches a filesystem or a service.
 */
export function validateKey(key: string, field = 'key'): void {
  if (key.length === 0) throw new InvalidArgumentError(field, 'must not be empty');
  if (Buffer.byteLength(key, 'utf8') > MAX_KEY_BYTES) {
    throw new InvalidArgumentError(field, `must be at most ${MAX_KEY_BYTES} bytes of UTF-8`);
  }
  checkKeyText(key, field);
}

/**
 * Throws {@link InvalidArgumentError} (field `field`) unless `prefix` is empty or the beginning of
 * some valid key: at most 1024 bytes, the characters of a key, and whole segments as a key has
 * them, except that it may end with `/` or in the middle of a segment (`notes/to` lists
 * `notes/today`; `notes/.` lists `notes/.hidden`). Listings call this before any I/O.
 */
export function validatePrefix(prefix: string, field = 'prefix'): void {
  if (prefix === '') return;
  if (Buffer.byteLength(prefix, 'utf8') > MAX_KEY_BYTES) {
    throw new InvalidArgumentError(field, `must be at most ${MAX_KEY_BYTES} bytes of UTF-8`);
  }
  // Completed with one more character, a prefix of a key is a key (`a/` + `x`, `a/.` + `x`).
  checkKeyText(`${prefix}x`, field);
}
