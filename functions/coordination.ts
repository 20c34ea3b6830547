import type { HttpRequest } from '@azure/functions';
import { z } from 'zod';

import { claimDelivery, resolveChatCursor } from '../shared/coordination/chatCursors';
import { chatIdProblem } from '../shared/coordination/chatIds';
import {
  CLAIM_ID_PATTERN,
  claimEmailWindow,
  readEmailCursor,
  settleEmailClaim,
} from '../shared/coordination/emailCursor';
import { initializeEmailPolling } from '../shared/coordination/emailWindowPoll';
import { logInteraction, readInteractionDay } from '../shared/coordination/interactionLog';
import { addPromise, listPromises, resolvePromise } from '../shared/coordination/promises';
import { formatTimestamp, isRfc3339, isUtcDay } from '../shared/coordination/timestamps';
import { addWatchedChats, readWatchedChats } from '../shared/coordination/watchedChats';
import { InvalidArgumentError } from '../shared/errors';
import { errorSummary } from '../shared/logging';
import type { KeyValueStore } from '../shared/storage/keyValueStore';
import { type AuthenticatedCall, httpHandler, registerHttp } from './http/pipeline';
import { json, parseQuery } from './http/request';
import { readJsonBody } from './jsonBody';

/**
 * Fleet coordination over HTTP (docs/coordination.md): email cursor, watched chats, chat cursors and delivery
 * claims, promises, interaction log. Everything lives in the caller's tenant's key/value space.
 * Handlers parse and validate (400 naming the field, 413 first), call shared/coordination, and
 * shape the answer; reads that fail report `unresolved` rather than 503 where §5 says so.
 */

/** Body limits, checked before anything else about a body (413, nothing written). */
export const BODY_LIMITS = {
  emailCursor: 16 * 1024,
  watchedChats: 256 * 1024,
  chatClaims: 128 * 1024,
  promise: 16 * 1024,
  interaction: 64 * 1024,
} as const;

const MAX_WATCHED_PER_REQUEST = 1000;
const MAX_CANDIDATES = 500;
const MAX_PRIOR_CLAIMS = 64;
// eslint-disable-next-line no-control-regex
const QUOTED_ETAG = /^"[^"\u0000-\u001f\u007f]{1,256}"$/;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

const timestamp = z
  .string({ error: 'must be an RFC 3339 timestamp' })
  .refine(isRfc3339, 'must be an RFC 3339 timestamp (e.g. 2026-11-29T21:16:51.123Z)');
const claimId = z
  .string({ error: 'must be a string' })
  .regex(CLAIM_ID_PATTERN, 'must be 1-128 characters of [A-Za-z0-9._:-]');
const chatId = z.string({ error: 'must be a string' }).superRefine((id, context) => {
  const problem = chatIdProblem(id);
  if (problem !== null) context.addIssue({ code: 'custom', message: problem });
});
const text = (max: number) =>
  z.string({ error: 'must be a string' }).max(max, `must be at most ${max} characters`);

const emailClaimBody = z.strictObject({
  newCursor: timestamp,
  etag: z
    .string({ error: 'must be the quoted ETag of the cursor as read' })
    .regex(QUOTED_ETAG, 'must be the quoted ETag of the cursor as read (GET /api/poll/email-cursor)'),
  claimId,
  priorClaims: z.array(claimId).max(MAX_PRIOR_CLAIMS, `must have at most ${MAX_PRIOR_CLAIMS} ids`).optional(),
});

const emailInitBody = z.strictObject({ now: timestamp.optional() });

const watchedChatsBody = z.strictObject({
  chatIds: z
    .array(chatId, { error: 'must be an array of chat ids' })
    .max(MAX_WATCHED_PER_REQUEST, `must have at most ${MAX_WATCHED_PER_REQUEST} ids`),
});

const chatClaimsBody = z.strictObject({
  candidateIds: z
    .array(
      text(256)
        .min(1, 'must not be empty')
        .refine((candidate) => !CONTROL.test(candidate), 'must not contain control characters'),
      { error: 'must be an array of message ids' },
    )
    .max(MAX_CANDIDATES, `must have at most ${MAX_CANDIDATES} ids`),
  lastTs: timestamp.nullable().optional(),
});

const promiseBody = z.strictObject({
  chatId: text(1024),
  description: text(4000),
  dueBy: timestamp.nullable().optional(),
});

const promisesQuery = z.object({
  status: z.enum(['open', 'all'], { error: 'must be "open" or "all"' }).default('open'),
});

const resolveBody = z.strictObject({ resolution: text(4000) });

const interactionBody = z.strictObject({
  channel: text(64),
  direction: z.enum(['inbound', 'outbound'], { error: 'must be "inbound" or "outbound"' }),
  sender: text(512),
  summary: text(8000),
  recipient: text(512).optional(),
  action: text(256).optional(),
  contentRef: text(2048).optional(),
  metadata: z.record(z.string(), z.unknown(), { error: 'must be a JSON object' }).optional(),
});

function storeOf(call: AuthenticatedCall): KeyValueStore {
  return call.services.kvStores.forTenant(call.principal.tenant);
}

/** The chat id in the route, validated (400 `chatId`). */
function chatIdOf(request: HttpRequest): string {
  const id = request.params['chatId'] ?? '';
  const problem = chatIdProblem(id);
  if (problem !== null) throw new InvalidArgumentError('chatId', problem);
  return id;
}

function logUnresolved(call: AuthenticatedCall, what: string, problem: string | undefined): void {
  call.log.warn({ what, problem }, 'coordination state unresolved; nothing was claimed or written');
}

// ---------------------------------------------------------------------------------------------
// Email cursor

export const emailCursor = httpHandler('emailCursor', {
  GET: async (_request, call) => {
    const read = await readEmailCursor(storeOf(call));
    if (read.outcome === 'unresolved') logUnresolved(call, 'email cursor', read.problem);
    return json(200, {
      outcome: read.outcome,
      cursor: read.cursor,
      etag: read.etag,
      recentClaims: read.recentClaims,
    });
  },
});

export const emailCursorInit = httpHandler('emailCursorInit', {
  POST: async (request, call) => {
    const body = await readJsonBody(request, BODY_LIMITS.emailCursor, emailInitBody, { emptyIsObject: true });
    const { outcome, error } = await initializeEmailPolling(
      call.services.emailPollRegistry,
      storeOf(call),
      call.principal.tenant,
      body.now ?? formatTimestamp(new Date()),
    );
    if (outcome !== 'created' && outcome !== 'exists') {
      call.log.warn({ outcome, err: errorSummary(error) }, 'email cursor not initialised');
    }
    return json(200, { initialized: outcome === 'created' });
  },
});

export const emailCursorClaim = httpHandler('emailCursorClaim', {
  POST: async (request, call) => {
    const body = await readJsonBody(request, BODY_LIMITS.emailCursor, emailClaimBody);
    const result = await claimEmailWindow(storeOf(call), { ...body, priorClaims: body.priorClaims ?? [] });
    call.log.info({ result, claimId: body.claimId }, 'email window claim');
    return json(200, { result });
  },
});

export const emailCursorSettle = httpHandler('emailCursorSettle', {
  POST: async (request, call) => {
    const body = await readJsonBody(request, BODY_LIMITS.emailCursor, emailClaimBody);
    const result = await settleEmailClaim(storeOf(call), { ...body, priorClaims: body.priorClaims ?? [] });
    call.log.info({ result, claimId: body.claimId }, 'email window claim settled');
    return json(200, { result });
  },
});

// ---------------------------------------------------------------------------------------------
// Watched chats

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

// ---------------------------------------------------------------------------------------------
// Chat cursors and delivery claims

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

// ---------------------------------------------------------------------------------------------
// Promises

export const promises = httpHandler('promises', {
  GET: async (request, call) => {
    const query = parseQuery(request, promisesQuery);
    return json(200, { promises: await listPromises(storeOf(call), query.status) });
  },
  POST: async (request, call) => {
    const body = await readJsonBody(request, BODY_LIMITS.promise, promiseBody);
    return json(201, await addPromise(storeOf(call), body));
  },
});

export const promiseResolve = httpHandler('promiseResolve', {
  POST: async (request, call) => {
    const body = await readJsonBody(request, BODY_LIMITS.promise, resolveBody);
    return json(200, await resolvePromise(storeOf(call), request.params['id'] ?? '', body.resolution));
  },
});

// ---------------------------------------------------------------------------------------------
// Interaction log

export const interactions = httpHandler('interactions', {
  POST: async (request, call) => {
    const body = await readJsonBody(request, BODY_LIMITS.interaction, interactionBody);
    return json(201, await logInteraction(storeOf(call), body));
  },
});

export const interactionDay = httpHandler('interactionDay', {
  GET: async (request, call) => {
    const day = request.params['day'] ?? '';
    if (!isUtcDay(day)) throw new InvalidArgumentError('day', 'must be a UTC day, YYYY-MM-DD');
    return json(200, { entries: await readInteractionDay(storeOf(call), day) });
  },
});

registerHttp('emailCursor', 'poll/email-cursor', emailCursor);
registerHttp('emailCursorInit', 'poll/email-cursor/init', emailCursorInit);
registerHttp('emailCursorClaim', 'poll/email-cursor/claim', emailCursorClaim);
registerHttp('emailCursorSettle', 'poll/email-cursor/settle', emailCursorSettle);
registerHttp('watchedChats', 'poll/watched-chats', watchedChats);
registerHttp('chatCursor', 'chats/{chatId}/cursor', chatCursor);
registerHttp('chatClaims', 'chats/{chatId}/claims', chatClaims);
registerHttp('promises', 'promises', promises);
registerHttp('promiseResolve', 'promises/{id}/resolve', promiseResolve);
registerHttp('interactions', 'interactions', interactions);
registerHttp('interactionDay', 'interactions/{day}', interactionDay);
