import { InvalidArgumentError } from './errors';

/** Longest key in UTF-8 bytes (also Azure's blob name limit). */
export const MAX_KEY_BYTES = 1024;

// eslint-disable-next-line no-control-regex
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f]/;

/**
 * Throws {@link InvalidArgumentError} (field `field`) unless `key` is a valid store key: 1-1024 bytes
 * of UTF-8, `/`-separated non-empty segments, no `.` or `..` segment, no `\`, no control characters.
 * Every store calls this before any I/O, so a bad key never reaches a filesystem or a service.
 */
export function validateKey(key: string, field = 'key'): void {
  if (key.length === 0) throw new InvalidArgumentError(field, 'must not be empty');
  if (Buffer.byteLength(key, 'utf8') > MAX_KEY_BYTES) {
    throw new InvalidArgumentError(field, `must be at most ${MAX_KEY_BYTES} bytes of UTF-8`);
  }
  if (!key.isWellFormed()) throw new InvalidArgumentError(field, 'must be valid Unicode');
  if (key.includes('\\')) throw new InvalidArgumentError(field, 'must not contain a backslash');
  if (CONTROL_CHARACTER.test(key))
    throw new InvalidArgumentError(field, 'must not contain control characters');
  for (const segment of key.split('/')) {
    if (segment === '') {
      throw new InvalidArgumentError(field, 'must not have an empty segment or a leading or trailing "/"');
    }
    if (segment === '.' || segment === '..') {
      throw new InvalidArgumentError(field, 'must not have a "." or ".." segment');
    }
  }
}
