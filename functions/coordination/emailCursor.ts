import { claimEmailWindow, readEmailCursor, settleEmailClaim } from '#shared/coordination/emailCursor';
import { initializeEmailPolling } from '#shared/coordination/emailWindowPoll';
import { formatTimestamp } from '#shared/coordination/timestamps';
import { errorSummary } from '#shared/logging';
import {
  emailCursorClaimRoute,
  emailCursorInitRoute,
  emailCursorRoute,
  emailCursorSettleRoute,
} from '#shared/protocol/coordination';
import { InvalidArgumentError } from '#shared/protocol/errors';

import { json } from '../http/request';
import { registerRoute, specHandler } from '../http/route';
import { logUnresolved, storeOf } from './common';

/** The tenant's shared email cursor: read, initialise (create-only), claim a window, settle a claim. */

export const emailCursor = specHandler(emailCursorRoute, {
  GET: async (_input, _request, call) => {
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

export const emailCursorInit = specHandler(emailCursorInitRoute, {
  POST: async ({ body }, _request, call) => {
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

export const emailCursorClaim = specHandler(emailCursorClaimRoute, {
  POST: async ({ body }, _request, call) => {
    const result = await claimEmailWindow(storeOf(call), { ...body, priorClaims: body.priorClaims ?? [] });
    call.log.info({ result, claimId: body.claimId }, 'email window claim');
    if (result === 'backwards') {
      // Windows are contiguous and never overlap: the cursor never moves back. Nothing was written.
      throw new InvalidArgumentError(
        'newCursor',
        'must not be before the cursor of the version `etag` names',
      );
    }
    return json(200, { result });
  },
});

export const emailCursorSettle = specHandler(emailCursorSettleRoute, {
  POST: async ({ body }, _request, call) => {
    const result = await settleEmailClaim(storeOf(call), { ...body, priorClaims: body.priorClaims ?? [] });
    call.log.info({ result, claimId: body.claimId }, 'email window claim settled');
    return json(200, { result });
  },
});

registerRoute(emailCursor);
registerRoute(emailCursorInit);
registerRoute(emailCursorClaim);
registerRoute(emailCursorSettle);
