/**
 * The text rules every name that goes into a storage key shares (keys, prefixes, user-chosen
 * names), as pure functions: each answers why a text is refused, or null. The domain throws its
 * errors with them (shared/keys.ts); the route specs check the same rules in their zod schemas.
 */

/**
 * The C0 control characters and DEL, which no name, key, id or label the service stores may
 * contain (they break logs, terminals and the line-based formats that show them). Not global, so
 * `test` keeps no state between calls.
 */
// eslint-disable-next-line no-control-regex
export const CONTROL_CHARACTER = /[\u0000-\u001f\u007f]/;

/** Whether `text` contains a {@link CONTROL_CHARACTER}. */
export function hasControlCharacter(text: string): boolean {
  return CONTROL_CHARACTER.test(text);
}

/** Longest key in UTF-8 bytes (also Azure's blob name limit). */
export const MAX_KEY_BYTES = 1024;

/** U+FDD0-U+FDEF and the last two code points of every plane (U+FFFE, U+FFFF, U+1FFFE, ...). */
const NONCHARACTER = /\p{Noncharacter_Code_Point}/u;

export const NONCHARACTER_RULE =
  'must not contain Unicode noncharacters (U+FDD0-U+FDEF, U+FFFE, U+FFFF in any plane)';

/** The length of `text` in UTF-8 bytes (an unpaired surrogate counts 3, as its replacement does). */
export function utf8Length(text: string): number {
  let bytes = 0;
  for (let index = 0; index < text.length; index++) {
    const unit = text.charCodeAt(index);
    if (unit < 0x80) bytes += 1;
    else if (unit < 0x800) bytes += 2;
    else if (unit >= 0xd800 && unit <= 0xdbff && index + 1 < text.length) {
      const next = text.charCodeAt(index + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        bytes += 4;
        index++;
      } else bytes += 3;
    } else bytes += 3;
  }
  return bytes;
}

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

/** The rules of a key past its length: characters and segments. */
function keyTextProblem(key: string): string | null {
  const characters = characterProblem(key);
  if (characters !== null) return characters;
  if (key.includes('\\')) return 'must not contain a backslash';
  for (const segment of key.split('/')) {
    if (segment === '') return 'must not have an empty segment or a leading or trailing "/"';
    if (segment === '.' || segment === '..') return 'must not have a "." or ".." segment';
  }
  return null;
}

/**
 * Why `key` is not a valid store key, or null: 1-1024 bytes of UTF-8, `/`-separated non-empty
 * segments, no `.` or `..` segment, no `\`, no control characters, no Unicode noncharacters, no
 * unpaired surrogates.
 */
export function keyProblem(key: string): string | null {
  if (key.length === 0) return 'must not be empty';
  if (utf8Length(key) > MAX_KEY_BYTES) return `must be at most ${MAX_KEY_BYTES} bytes of UTF-8`;
  return keyTextProblem(key);
}

/**
 * Why `prefix` is not empty nor the beginning of some valid key, or null: at most 1024 bytes, the
 * characters of a key, and whole segments as a key has them, except that it may end with `/` or in
 * the middle of a segment (`notes/to` lists `notes/today`; `notes/.` lists `notes/.hidden`).
 */
export function prefixProblem(prefix: string): string | null {
  if (prefix === '') return null;
  if (utf8Length(prefix) > MAX_KEY_BYTES) return `must be at most ${MAX_KEY_BYTES} bytes of UTF-8`;
  // Completed with one more character, a prefix of a key is a key (`a/` + `x`, `a/.` + `x`).
  return keyTextProblem(`${prefix}x`);
}
