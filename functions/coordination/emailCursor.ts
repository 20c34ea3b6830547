import { z } from 'zod';

import {
  CLAIM_ID_PATTERN,
  claimEmailWindow,
  readEmailCursor,
  settleEmailClaim,
} from '#shared/coordination/emailCursor';
import { initializeEmailPolling } from '#shared/coordination/emailWindowPoll';
import { formatTimestamp } from '#shared/coordination/timestamps';
import { errorSummary } from '#shared/logging';

import { httpHandler, registerHttp } from '../http/pipeline';
import { json } from '../http/request';
import { readJsonBody } from '../jsonBody';
import { BODY_LIMITS, logUnresolved, storeOf, timestamp } from './common';

/** The tenant's shared email cursor: read, initialise (create-only), claim a window, settle a claim. */

const MAX_PRIOR_CLAIMS = 64;
// eslint-disable-next-line no-control-regex
const QUOTED_ETAG = /^"[^"\u0000-\u001f\u007f]{1,256}"$/;

const claimId = z
  .string({ error: 'must be a string' })
  .regex(CLAIM_ID_PATTERN, 'must be 1-128 characters of [A-Za-z0-9._:-]');

const emailClaimBody = z.strictObject({
  newCursor: timestamp,
  etag: z
    .string({ error: 'must be the quoted ETag of the cursor as read' })
    .regex(QUOTED_ETAG, 'must be the quoted ETag of the cursor as read (GET /api/poll/email-cursor)'),
  claimId,
  priorClaims: z.array(claimId).max(MAX_PRIOR_CLAIMS, `must have at most ${MAX_PRIOR_CLAIMS} ids`).optional(),
});

const emailInitBody = z.strictObject({ now: timestamp.optional() });

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

registerHttp('emailCursor', 'poll/email-cursor', emailCursor);
registerHttp('emailCursorInit', 'poll/email-cursor/init', emailCursorInit);
registerHttp('emailCursorClaim', 'poll/email-cursor/claim', emailCursorClaim);
registerHttp('emailCursorSettle', 'poll/email-cursor/settle', emailCursorSettle);
