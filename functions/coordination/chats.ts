import { z } from 'zod';

import { claimDelivery, resolveChatCursor } from '#shared/coordination/chatCursors';
import { addWatchedChats, readWatchedChats } from '#shared/coordination/watchedChats';
import { chatClaimsBody } from '#shared/coordination/wire';

import { httpHandler, registerHttp } from '../http/pipeline';
import { json } from '../http/request';
import { readJsonBody } from '../jsonBody';
import { BODY_LIMITS, chatId, chatIdOf, logUnresolved, storeOf } from './common';

/** Watched chats, per-chat delivery cursors and exactly-once delivery claims. */

const MAX_WATCHED_PER_REQUEST = 1000;

const watchedChatsBody = z.strictObject({
  chatIds: z
    .array(chatId, { error: 'must be an array of chat ids' })
    .max(MAX_WATCHED_PER_REQUEST, `must have at most ${MAX_WATCHED_PER_REQUEST} ids`),
});

export const watchedChats = httpHandler('watchedChats', {
  GET: async (_request, call) => {
    const read = await readWatchedChats(storeOf(call));
    if (read.outcome === 'unresolved') logUnresolved(call, 'watched chats', read.problem);
    return json(200, { outcome: read.outcome, chatIds: read.chatIds, etag: read.etag });
  },
  POST: async (request, call) => {
    const body = await readJsonBody(request, BODY_LIMITS.watchedChats, watchedChatsBody);
    const result = await addWatchedChats(storeOf(call), body.chatIds);
    if (!result.persisted) call.log.warn({ requested: body.chatIds.length }, 'watched chats not persisted');
    return json(200, result);
  },
});

export const chatCursor = httpHandler('chatCursor', {
  GET: async (request, call) => {
    const read = await resolveChatCursor(storeOf(call), chatIdOf(request));
    if (read.outcome === 'unresolved') logUnresolved(call, 'chat cursor', read.problem);
    return json(200, { outcome: read.outcome, cursor: read.cursor });
  },
});

export const chatClaims = httpHandler('chatClaims', {
  POST: async (request, call) => {
    const body = await readJsonBody(request, BODY_LIMITS.chatClaims, chatClaimsBody);
    // After the body: an oversize body is 413 whatever else is wrong.
    const id = chatIdOf(request);
    const claim = await claimDelivery(storeOf(call), id, body.candidateIds, {
      lastTs: body.lastTs ?? null,
      cache: call.services.chatCursorCache.forTenant(call.principal.tenant),
    });
    if (claim.reason !== null) {
      call.log.warn({ reason: claim.reason, attempts: claim.attempts }, 'delivery claim claimed nothing');
    }
    return json(200, { claimed: claim.claimed, reason: claim.reason });
  },
});

registerHttp('watchedChats', 'poll/watched-chats', watchedChats);
registerHttp('chatCursor', 'chats/{chatId}/cursor', chatCursor);
registerHttp('chatClaims', 'chats/{chatId}/claims', chatClaims);
