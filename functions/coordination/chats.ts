import { claimDelivery, resolveChatCursor } from '#shared/coordination/chatCursors';
import { addWatchedChats, readWatchedChats } from '#shared/coordination/watchedChats';
import { chatClaimsRoute, chatCursorRoute, watchedChatsRoute } from '#shared/protocol/coordination';

import { json } from '../http/request';
import { registerRoute, specHandler } from '../http/route';
import { logUnresolved, storeOf } from './common';

/** Watched chats, per-chat delivery cursors and exactly-once delivery claims. */

export const watchedChats = specHandler(watchedChatsRoute, {
  GET: async (_input, _request, call) => {
    const read = await readWatchedChats(storeOf(call));
    if (read.outcome === 'unresolved') logUnresolved(call, 'watched chats', read.problem);
    return json(200, { outcome: read.outcome, chatIds: read.chatIds, etag: read.etag });
  },
  POST: async ({ body }, _request, call) => {
    const result = await addWatchedChats(storeOf(call), body.chatIds);
    if (!result.persisted) call.log.warn({ requested: body.chatIds.length }, 'watched chats not persisted');
    return json(200, result);
  },
});

export const chatCursor = specHandler(chatCursorRoute, {
  GET: async ({ params: { chatId } }, _request, call) => {
    const read = await resolveChatCursor(storeOf(call), chatId);
    if (read.outcome === 'unresolved') logUnresolved(call, 'chat cursor', read.problem);
    return json(200, { outcome: read.outcome, cursor: read.cursor });
  },
});

export const chatClaims = specHandler(chatClaimsRoute, {
  POST: async ({ params: { chatId }, body }, _request, call) => {
    const claim = await claimDelivery(storeOf(call), chatId, body.candidateIds, {
      lastTs: body.lastTs ?? null,
      cache: call.services.chatCursorCache.forTenant(call.principal.tenant),
    });
    if (claim.reason !== null) {
      call.log.warn({ reason: claim.reason, attempts: claim.attempts }, 'delivery claim claimed nothing');
    }
    return json(200, { claimed: claim.claimed, reason: claim.reason });
  },
});

registerRoute(watchedChats);
registerRoute(chatCursor);
registerRoute(chatClaims);
