import { InvalidArgumentError } from '../protocol/errors';

/**
 * Opaque list cursors: base64url JSON that binds the position to the prefix it was made for, so a
 * cursor reused with another prefix is refused instead of silently skipping keys.
 */
interface CursorBody {
  readonly prefix: string;
  readonly position: string;
}

export function encodeCursor(prefix: string, position: string): string {
  return Buffer.from(JSON.stringify({ prefix, position } satisfies CursorBody)).toString('base64url');
}

/** The position stored in `cursor`; throws InvalidArgumentError (field `cursor`) when it is not ours. */
export function decodeCursor(cursor: string, prefix: string): string {
  let body: unknown;
  try {
    body = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw new InvalidArgumentError('cursor', 'is not a cursor returned by this API');
  }
  if (
    typeof body !== 'object' ||
    body === null ||
    typeof (body as CursorBody).prefix !== 'string' ||
    typeof (body as CursorBody).position !== 'string'
  ) {
    throw new InvalidArgumentError('cursor', 'is not a cursor returned by this API');
  }
  if ((body as CursorBody).prefix !== prefix) {
    throw new InvalidArgumentError('cursor', 'was made for another prefix');
  }
  return (body as CursorBody).position;
}
