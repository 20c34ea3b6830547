/**
 * LangGraph thread ids as Cairn thread names. Cairn names are 1-128 characters of
 * `[A-Za-z0-9._-]`; LangGraph thread ids are any strings. The mapping is injective and reversible
 * (a listing of threads gives back the thread ids):
 *
 * - a thread id is encoded character by character: `A-Z a-z 0-9 -` stay, every other character
 *   becomes `_` and two upper-case hex digits per byte of its UTF-8 (`user.42` → `user_2E42`), so an
 *   encoding never holds a `.`;
 * - with a scope, the name is `<encoded scope>.<encoded thread id>`; without one, the encoded
 *   thread id alone. The first `.` therefore ends the scope: no scope's names can start with
 *   another scope's prefix, and unscoped names (no `.`) are apart from every scope's.
 *
 * A thread id whose name would pass 128 characters (about 120 ASCII letters less the scope, fewer
 * with other characters) is refused with a `TypeError` before anything is sent: no mapping into a
 * finite set of names can be both injective and total.
 */

export const MAX_THREAD_NAME_LENGTH = 128;
const PLAIN = /^[A-Za-z0-9-]$/;
const ENCODED = /^(?:[A-Za-z0-9-]|_[0-9A-F]{2})*$/;

/** `text` in the alphabet `[A-Za-z0-9_-]`, reversibly (see above). */
export function encodeName(text: string): string {
  let out = '';
  for (const char of text) {
    if (PLAIN.test(char)) {
      out += char;
      continue;
    }
    for (const byte of Buffer.from(char, 'utf8'))
      out += `_${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** The text {@link encodeName} made `encoded` from, or null when it made no such string. */
export function decodeName(encoded: string): string | null {
  if (!ENCODED.test(encoded)) return null;
  const bytes: number[] = [];
  for (let index = 0; index < encoded.length;) {
    if (encoded[index] === '_') {
      bytes.push(Number.parseInt(encoded.slice(index + 1, index + 3), 16));
      index += 3;
    } else {
      bytes.push(encoded.charCodeAt(index));
      index += 1;
    }
  }
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(Uint8Array.from(bytes));
  } catch {
    return null;
  }
  // Only the canonical encoding is one of ours (`_41` for `A` is not).
  return encodeName(text) === encoded ? text : null;
}

/** Checks a text to be encoded: a non-empty, well-formed string (a lone surrogate has no UTF-8). */
function checkText(value: unknown, what: string): string {
  if (typeof value !== 'string') {
    throw new TypeError(`${what} must be a string (got ${value === null ? 'null' : typeof value})`);
  }
  if (value === '') throw new TypeError(`${what} must not be empty`);
  if (!value.isWellFormed()) throw new TypeError(`${what} must be well-formed Unicode (no lone surrogate)`);
  return value;
}

/** Names of one scope (or of no scope): thread id → name, name → thread id, and the listing prefix. */
export class ThreadNames {
  /** Every name of the scope starts with this (`""` without a scope). */
  readonly prefix: string;

  constructor(scope: string | undefined) {
    if (scope === undefined) {
      this.prefix = '';
      return;
    }
    this.prefix = `${encodeName(checkText(scope, 'scope'))}.`;
    if (this.prefix.length >= MAX_THREAD_NAME_LENGTH) {
      throw new TypeError(
        `scope must encode to fewer than ${MAX_THREAD_NAME_LENGTH - 1} characters (it needs ${this.prefix.length - 1})`,
      );
    }
  }

  /** The Cairn thread name of a LangGraph thread id; a `TypeError` when it has none. */
  nameOf(threadId: unknown): string {
    const name = this.prefix + encodeName(checkText(threadId, 'thread_id'));
    if (name.length > MAX_THREAD_NAME_LENGTH) {
      throw new TypeError(
        `thread_id ${JSON.stringify(threadId)} needs a Cairn thread name of ${name.length} characters, more than ${MAX_THREAD_NAME_LENGTH}`,
      );
    }
    return name;
  }

  /** The thread id a name of this scope stands for, or null for a name that is not one. */
  threadIdOf(name: string): string | null {
    if (!name.startsWith(this.prefix)) return null;
    const threadId = decodeName(name.slice(this.prefix.length));
    return threadId === null || threadId === '' ? null : threadId;
  }
}
