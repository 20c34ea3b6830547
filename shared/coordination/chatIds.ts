/**
 * Chat ids as fleet coordination accepts them. Every chat id ends up in a Graph URL path and in a
 * store key, so ids holding whitespace, `/`, `\`, `?`, `#`, `%` or control characters are refused
 * (they are dropped from the watched list for the same reason). Being a valid chat id grants
 * nothing: authorisation happens elsewhere.
 */

// eslint-disable-next-line no-control-regex
const FORBIDDEN = /[\s/\\?#%\u0000-\u001f\u007f-\u009f]/u;

/**
 * The longest percent-encoded chat id: `chat_cursors/<encoded>.json` must fit a 255-byte path
 * segment on the local backend (minus `.json`).
 */
export const MAX_ENCODED_CHAT_ID_BYTES = 250;

/** Why `chatId` is not a chat id, or null when it is one. */
export function chatIdProblem(chatId: string): string | null {
  if (chatId.length === 0) return 'must not be empty';
  if (!chatId.isWellFormed()) return 'must be valid Unicode';
  if (FORBIDDEN.test(chatId)) {
    return 'must not contain whitespace, "/", "\\", "?", "#", "%" or control characters';
  }
  if (encodeChatId(chatId).length > MAX_ENCODED_CHAT_ID_BYTES) {
    return `must be at most ${MAX_ENCODED_CHAT_ID_BYTES} bytes once percent-encoded`;
  }
  return null;
}

export function isValidChatId(chatId: string): boolean {
  return chatIdProblem(chatId) === null;
}

/**
 * Percent-encodes a chat id: everything but `A-Z a-z 0-9 _ . - ~` (UTF-8 bytes, upper-case hex),
 * so that `19:c@thread.v2` is stored at `chat_cursors/19%3Ac%40thread.v2.json`, the key that agents
 * already keep their cursors under, and migrated state lines up.
 */
export function encodeChatId(chatId: string): string {
  return encodeURIComponent(chatId).replace(
    /[!'()*]/g,
    (character) => `%${character.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}
