/**
 * Chat ids as fleet coordination accepts them. Every chat id ends up in a Graph URL path and in a
 * store key, so ids holding whitespace, `/`, `\`, `?`, `#`, `%` or control characters are refused
 * (they are dropped from the watched list for the same reason). Being a valid chat id grants
 * nothing: authorisation happens elsewhere.
 */

import { chatIdProblem, encodeChatId, MAX_ENCODED_CHAT_ID_BYTES } from '../protocol/coordination';

/** The rule and the encoding are the protocol's (shared/protocol/coordination.ts). */
export { chatIdProblem, encodeChatId, MAX_ENCODED_CHAT_ID_BYTES };

export function isValidChatId(chatId: string): boolean {
  return chatIdProblem(chatId) === null;
}
