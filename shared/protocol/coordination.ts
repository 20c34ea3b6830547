import { z } from 'zod';

import { Etag, KiB, Timestamp } from './fields.js';
import { route } from './spec.js';
import { TAGS } from './tags.js';
import { hasControlCharacter } from './text.js';
import { RequestTimestamp, UtcDay } from './time.js';

/**
 * Fleet coordination (docs/coordination.md): the email cursor, the watched chats, chat cursors and
 * delivery claims, promises and the interaction log. Everything lives in the caller's tenant's
 * key/value space. The schemas here check the shape of requests; shared/coordination checks the
 * rest. The MCP tools take the same field rules (their schemas have no components, so they use
 * the rules without ids: {@link chatIdRule}, and `rfc3339` of ./time.ts).
 */

/** The largest body of each route, checked before anything else about it (413, nothing written). */
export const EMAIL_CURSOR_BODY_BYTES = 16 * KiB;
export const WATCHED_CHATS_BODY_BYTES = 256 * KiB;
export const CHAT_CLAIMS_BODY_BYTES = 128 * KiB;
export const PROMISE_BODY_BYTES = 16 * KiB;
export const INTERACTION_BODY_BYTES = 64 * KiB;

export const MAX_WATCHED_PER_REQUEST = 1000;
export const MAX_CLAIM_CANDIDATES = 500;
export const MAX_PRIOR_CLAIMS = 64;

// eslint-disable-next-line no-control-regex
const FORBIDDEN_IN_CHAT_ID = /[\s/\\?#%\u0000-\u001f\u007f-\u009f]/u;

/**
 * The longest percent-encoded chat id: `chat_cursors/<encoded>.json` must fit a 255-byte path
 * segment on the local backend (minus `.json`).
 */
export const MAX_ENCODED_CHAT_ID_BYTES = 250;

/**
 * Percent-encodes a chat id: everything but `A-Z a-z 0-9 _ . - ~` (UTF-8 bytes, upper-case hex),
 * so that `19:c@thread.v2` is stored at `chat_cursors/19%3Ac%40thread.v2.json`.
 */
export function encodeChatId(chatId: string): string {
  return encodeURIComponent(chatId).replace(
    /[!'()*]/g,
    (character) => `%${character.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}

/** Why `chatId` is not a chat id, or null when it is one. */
export function chatIdProblem(chatId: string): string | null {
  if (chatId.length === 0) return 'must not be empty';
  if (!chatId.isWellFormed()) return 'must be valid Unicode';
  if (FORBIDDEN_IN_CHAT_ID.test(chatId)) {
    return 'must not contain whitespace, "/", "\\", "?", "#", "%" or control characters';
  }
  if (encodeChatId(chatId).length > MAX_ENCODED_CHAT_ID_BYTES) {
    return `must be at most ${MAX_ENCODED_CHAT_ID_BYTES} bytes once percent-encoded`;
  }
  return null;
}

/** A chat id, without a component. */
export const chatIdRule = z.string({ error: 'must be a string' }).superRefine((id, context) => {
  const problem = chatIdProblem(id);
  if (problem !== null) context.addIssue({ code: 'custom', message: problem });
});

export const ChatId = chatIdRule.meta({
  id: 'ChatId',
  description:
    'A chat id: no whitespace, "/", "\\", "?", "#", "%" or control characters; at most 250 bytes once percent-encoded.',
  minLength: 1,
  pattern: String.raw`^[^\s/\\?#%\u0000-\u001F\u007F-\u009F]+$`,
});

/** Claim ids: 1-128 characters of `[A-Za-z0-9._:-]` (a UUID fits). */
export const CLAIM_ID_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/;

export const ClaimId = z
  .string({ error: 'must be a string' })
  .regex(CLAIM_ID_PATTERN, 'must be 1-128 characters of [A-Za-z0-9._:-]')
  .meta({ id: 'ClaimId' });

/** Text of at most `max` characters. */
export const text = (max: number) =>
  z.string({ error: 'must be a string' }).max(max, `must be at most ${max} characters`);

/** Text a person reads; the domain refuses it blank. */
const notBlank = (max: number) => text(max).describe('Not blank.');

// eslint-disable-next-line no-control-regex
const QUOTED_ETAG = /^"[^"\u0000-\u001f\u007f]{1,256}"$/;

export const EmailClaim = z
  .strictObject({
    newCursor: RequestTimestamp,
    etag: z
      .string({ error: 'must be the quoted ETag of the cursor as read' })
      .regex(QUOTED_ETAG, 'must be the quoted ETag of the cursor as read (GET /api/poll/email-cursor)')
      .describe('The ETag of the cursor as read (GET /api/poll/email-cursor).'),
    claimId: ClaimId,
    priorClaims: z
      .array(ClaimId)
      .max(MAX_PRIOR_CLAIMS, `must have at most ${MAX_PRIOR_CLAIMS} ids`)
      .optional(),
  })
  .meta({ id: 'EmailClaim' });

export const emailInitBody = z.strictObject({
  now: RequestTimestamp.optional().describe('The initial cursor; default: now.'),
});

export const watchedChatsBody = z.strictObject({
  chatIds: z
    .array(ChatId, { error: 'must be an array of chat ids' })
    .max(MAX_WATCHED_PER_REQUEST, `must have at most ${MAX_WATCHED_PER_REQUEST} ids`),
});

/** The message ids of a delivery claim (the MCP tool takes the same). */
export const claimCandidates = z
  .array(
    text(256)
      .min(1, 'must not be empty')
      .refine((candidate) => !hasControlCharacter(candidate), 'must not contain control characters')
      .meta({ pattern: String.raw`^[^\u0000-\u001F\u007F]*$` }),
    { error: 'must be an array of message ids' },
  )
  .max(MAX_CLAIM_CANDIDATES, `must have at most ${MAX_CLAIM_CANDIDATES} ids`);

export const chatClaimsBody = z.strictObject({
  candidateIds: claimCandidates,
  lastTs: RequestTimestamp.nullable().optional(),
});

export const promiseBody = z.strictObject({
  chatId: notBlank(1024),
  description: notBlank(4000),
  dueBy: RequestTimestamp.nullable().optional(),
});

export const resolveBody = z.strictObject({ resolution: notBlank(4000) });

export const promisesQuery = z.object({
  status: z
    .enum(['open', 'all'], { error: 'must be "open" or "all"' })
    .default('open')
    .describe('Which promises.'),
});

export const interactionBody = z.strictObject({
  channel: notBlank(64),
  direction: z.enum(['inbound', 'outbound'], { error: 'must be "inbound" or "outbound"' }),
  sender: text(512),
  summary: notBlank(8000),
  recipient: text(512).optional(),
  action: text(256).optional(),
  contentRef: text(2048).optional(),
  metadata: z.record(z.string(), z.unknown(), { error: 'must be a JSON object' }).optional(),
});

// Answers. Times the service passes through from stored state are returned as stored.

export const EmailCursor = z
  .discriminatedUnion('outcome', [
    z.strictObject({
      outcome: z.literal('present'),
      cursor: Timestamp,
      etag: Etag,
      recentClaims: z.array(ClaimId).describe('The latest claims that moved the cursor, newest last.'),
    }),
    z.strictObject({
      outcome: z
        .enum(['absent', 'unresolved'])
        .describe(
          'absent: the read succeeded and found no cursor. unresolved: the read failed or the value is not a cursor (never reported as absent).',
        ),
      cursor: z.null(),
      etag: z.null(),
      recentClaims: z.array(z.string()).max(0),
    }),
  ])
  .meta({ id: 'EmailCursor' });

export const WatchedChats = z
  .discriminatedUnion('outcome', [
    z.strictObject({ outcome: z.literal('present'), chatIds: z.array(z.string()), etag: Etag }),
    z.strictObject({
      outcome: z.enum(['absent', 'unresolved']),
      chatIds: z.array(z.string()).max(0),
      etag: z.null(),
    }),
  ])
  .meta({ id: 'WatchedChats' });

export const ChatCursor = z
  .strictObject({
    lastTs: z.string().nullable().describe('The newest message time seen, as stored.'),
    seenIdsTail: z.array(z.string()).describe('The ids of the latest messages delivered, newest last.'),
    bootstrapped: z.boolean(),
    lastWrittenAt: z.string().nullable().describe('When the cursor was last written, as stored.'),
  })
  .meta({ id: 'ChatCursor' });

export const ChatCursorRead = z
  .discriminatedUnion('outcome', [
    z.strictObject({ outcome: z.literal('present'), cursor: ChatCursor }),
    z.strictObject({
      outcome: z.enum(['absent', 'unresolved']),
      cursor: z.null(),
    }),
  ])
  .meta({ id: 'ChatCursorRead' });

export const PromiseRecord = z
  .strictObject({
    id: z.string().min(1),
    createdAt: z.string().describe('RFC 3339, as stored.'),
    chatId: z.string(),
    description: z.string(),
    dueBy: z.string().nullable().describe('RFC 3339, as given.'),
    status: z.enum(['open', 'resolved']),
    resolvedAt: z.string().optional().describe('Set once resolved.'),
    resolution: z.string().optional().describe('Set once resolved.'),
  })
  .meta({ id: 'Promise' });

export const Interaction = z
  .strictObject({
    id: z.string(),
    ts: z.string().describe('RFC 3339, when the entry was written.'),
    channel: z.string(),
    direction: z
      .string()
      .describe('inbound or outbound; entries written by other tools are returned as stored.'),
    sender: z.string(),
    summary: z.string(),
    recipient: z.string().optional(),
    action: z.string().optional(),
    contentRef: z.string().optional(),
    metadata: z.record(z.string(), z.unknown()).optional(),
  })
  .meta({ id: 'Interaction' });

export const EmailCursorInitialized = z.strictObject({ initialized: z.boolean() });

export const EmailClaimOutcome = z.strictObject({
  result: z
    .enum(['won', 'lost', 'failed', 'unknown'])
    .describe('unknown: the write may have happened; settle it with the same body.'),
});

export const EmailClaimSettled = z.strictObject({ result: z.boolean().nullable() });

export const WatchedChatsAdded = z.strictObject({
  persisted: z.boolean().describe('False when the merged list could not be stored.'),
  added: z.array(z.string()).describe('The ids this call added (not listed before).'),
});

export const ChatClaim = z.strictObject({
  claimed: z.array(z.string()).describe('The candidate ids this caller now owns: deliver exactly these.'),
  reason: z
    .enum(['unresolved', 'contention'])
    .nullable()
    .describe('Null when the cursor was read (and written if needed); otherwise why nothing was claimed.'),
});

export const PromiseList = z.strictObject({ promises: z.array(PromiseRecord) });

export const InteractionDay = z.strictObject({ entries: z.array(Interaction) });

const NOTE = "Lives in the tenant's key/value space, so it is readable with the key/value routes too.";

const chatIdParams = z.object({ chatId: ChatId.describe('The chat id.') });

export const emailCursorRoute = route({
  name: 'emailCursor',
  route: 'poll/email-cursor',
  operations: {
    GET: {
      operationId: 'getEmailCursor',
      summary: 'Read the email cursor',
      description: `Key \`poll_state/email_cursor.txt\`. ${NOTE}`,
      tag: TAGS.coordination,
      auth: 'tenant',
      answers: { 200: { description: 'The cursor, or why there is none.', body: EmailCursor } },
    },
  },
});

export const emailCursorInitRoute = route({
  name: 'emailCursorInit',
  route: 'poll/email-cursor/init',
  operations: {
    POST: {
      operationId: 'initEmailCursor',
      summary: 'Create the email cursor if absent',
      description: 'Create-only; also enrols the tenant in the `emailWindowPoll` timer.',
      tag: TAGS.coordination,
      auth: 'tenant',
      body: {
        kind: 'json',
        description: 'May be empty.',
        schema: emailInitBody,
        limit: EMAIL_CURSOR_BODY_BYTES,
        emptyIsObject: true,
      },
      answers: { 200: { description: 'Whether this call created it.', body: EmailCursorInitialized } },
      errors: [400],
    },
  },
});

export const emailCursorClaimRoute = route({
  name: 'emailCursorClaim',
  route: 'poll/email-cursor/claim',
  operations: {
    POST: {
      operationId: 'claimEmailWindow',
      summary: 'Claim the window up to newCursor',
      description:
        'One conditional write on the ETag as read, no retry on conflict. 400 naming `newCursor` when it is before the cursor of that version (the cursor never moves back; nothing is written).',
      tag: TAGS.coordination,
      auth: 'tenant',
      body: { kind: 'json', description: 'The claim.', schema: EmailClaim, limit: EMAIL_CURSOR_BODY_BYTES },
      answers: { 200: { description: 'The outcome.', body: EmailClaimOutcome } },
      errors: [400],
    },
  },
});

export const emailCursorSettleRoute = route({
  name: 'emailCursorSettle',
  route: 'poll/email-cursor/settle',
  operations: {
    POST: {
      operationId: 'settleEmailClaim',
      summary: 'Settle a claim whose outcome was unknown',
      tag: TAGS.coordination,
      auth: 'tenant',
      body: {
        kind: 'json',
        description: 'The body of the claim.',
        schema: EmailClaim,
        limit: EMAIL_CURSOR_BODY_BYTES,
      },
      answers: {
        200: {
          description: 'true: the claim won; false: it lost; null: cannot tell yet.',
          body: EmailClaimSettled,
        },
      },
      errors: [400],
    },
  },
});

export const watchedChatsRoute = route({
  name: 'watchedChats',
  route: 'poll/watched-chats',
  operations: {
    GET: {
      operationId: 'getWatchedChats',
      summary: 'Read the watched chats',
      description: `Key \`watched_chats\`. ${NOTE}`,
      tag: TAGS.coordination,
      auth: 'tenant',
      answers: { 200: { description: 'The list, or why there is none.', body: WatchedChats } },
    },
    POST: {
      operationId: 'addWatchedChats',
      summary: 'Add chats to the watched list',
      description: 'Up to 4 attempts on conflict.',
      tag: TAGS.coordination,
      auth: 'tenant',
      body: {
        kind: 'json',
        description: 'The chat ids to add.',
        schema: watchedChatsBody,
        limit: WATCHED_CHATS_BODY_BYTES,
      },
      answers: {
        200: {
          description: 'Whether the list was written, and the ids not listed before.',
          body: WatchedChatsAdded,
        },
      },
      errors: [400],
    },
  },
});

export const chatCursorRoute = route({
  name: 'chatCursor',
  route: 'chats/{chatId}/cursor',
  params: chatIdParams,
  operations: {
    GET: {
      operationId: 'getChatCursor',
      summary: "Read a chat's cursor",
      description: `Key \`chat_cursors/<percent-encoded chat id>.json\`. ${NOTE}`,
      tag: TAGS.coordination,
      auth: 'tenant',
      answers: { 200: { description: 'The cursor, or why there is none.', body: ChatCursorRead } },
      errors: [400],
    },
  },
});

export const chatClaimsRoute = route({
  name: 'chatClaims',
  route: 'chats/{chatId}/claims',
  params: chatIdParams,
  operations: {
    POST: {
      operationId: 'claimChatMessages',
      summary: 'Claim messages of a chat for delivery',
      description:
        'Each candidate id is claimed by exactly one caller across all concurrent callers, including the first claims on an absent cursor; up to 4 attempts; anything uncertain claims nothing.',
      tag: TAGS.coordination,
      auth: 'tenant',
      body: {
        kind: 'json',
        description: 'The message ids to claim, and the newest message time seen.',
        schema: chatClaimsBody,
        limit: CHAT_CLAIMS_BODY_BYTES,
      },
      answers: {
        200: {
          description: 'The ids this caller claimed, and why nothing was claimed when so.',
          body: ChatClaim,
        },
      },
      errors: [400],
    },
  },
});

export const promisesRoute = route({
  name: 'promises',
  route: 'promises',
  operations: {
    GET: {
      operationId: 'listPromises',
      summary: 'List promises',
      description: `Key \`promises.jsonl\`, in creation order. ${NOTE}`,
      tag: TAGS.coordination,
      auth: 'tenant',
      query: promisesQuery,
      answers: { 200: { description: 'The promises.', body: PromiseList } },
      errors: [400],
    },
    POST: {
      operationId: 'addPromise',
      summary: 'Record a promise',
      tag: TAGS.coordination,
      auth: 'tenant',
      body: { kind: 'json', description: 'The promise.', schema: promiseBody, limit: PROMISE_BODY_BYTES },
      answers: { 201: { description: 'The open promise.', body: PromiseRecord } },
      errors: [400, 409],
    },
  },
});

export const promiseResolveRoute = route({
  name: 'promiseResolve',
  route: 'promises/{id}/resolve',
  params: z.object({ id: z.string().describe('The promise id.').meta({ minLength: 1 }) }),
  operations: {
    POST: {
      operationId: 'resolvePromise',
      summary: 'Resolve a promise',
      description: 'Resolving twice changes nothing. 409 when the promises kept changing through one retry.',
      tag: TAGS.coordination,
      auth: 'tenant',
      body: {
        kind: 'json',
        description: 'How it was resolved.',
        schema: resolveBody,
        limit: PROMISE_BODY_BYTES,
      },
      answers: { 200: { description: 'The resolved promise.', body: PromiseRecord } },
      errors: [400, 404, 409],
    },
  },
});

export const interactionsRoute = route({
  name: 'interactions',
  route: 'interactions',
  operations: {
    POST: {
      operationId: 'logInteraction',
      summary: 'Log an interaction',
      description: 'Appended to the log of the UTC day, key `interactions/<YYYY-MM-DD>.jsonl`.',
      tag: TAGS.coordination,
      auth: 'tenant',
      body: {
        kind: 'json',
        description: 'The interaction.',
        schema: interactionBody,
        limit: INTERACTION_BODY_BYTES,
      },
      answers: { 201: { description: 'The entry as logged.', body: Interaction } },
      errors: [400],
    },
  },
});

export const interactionDayRoute = route({
  name: 'interactionDay',
  route: 'interactions/{day}',
  params: z.object({ day: UtcDay.describe('A UTC day.') }),
  operations: {
    GET: {
      operationId: 'getInteractionDay',
      summary: "A day's interactions",
      description: `In the order logged; lines that are not entries are skipped. ${NOTE}`,
      tag: TAGS.coordination,
      auth: 'tenant',
      answers: {
        200: { description: 'The entries (none when the day has no log).', body: InteractionDay },
      },
      errors: [400],
    },
  },
});
