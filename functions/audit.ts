import { app } from '@azure/functions';

import type { AuditTrail } from '#shared/audit/auditTrail';
import { auditSignScheduleFrom } from '#shared/config';
import { auditHeadsRoute, auditRecordsRoute, auditVerifyRoute } from '#shared/protocol/audit';
import { InvalidArgumentError, NotConfiguredError } from '#shared/protocol/errors';
import { getServices } from '#shared/services';

import type { AuthenticatedCall } from './http/pipeline';
import { json } from './http/request';
import { registerRoute, specHandler } from './http/route';
import { timerHandler } from './timer';

/**
 * The audit trail's routes (docs/audit.md): the caller's tenant's records, oldest first, with
 * filters and paging; verification of the hash chain (optionally against a head kept elsewhere),
 * which signs the head when a signing key is configured and the trail verifies; the signed heads.
 * With CAIRN_AUDIT off every route answers 501 `not_configured` naming the setting. Also the
 * `auditHeadSign` timer.
 */

function trailOf(call: AuthenticatedCall): AuditTrail {
  const trail = call.services.auditTrail;
  if (trail === undefined) {
    throw new NotConfiguredError('CAIRN_AUDIT', 'the audit trail is off: set CAIRN_AUDIT=true to keep one');
  }
  return trail;
}

const requireTrail = { before: (call: AuthenticatedCall) => void trailOf(call) };

export const auditRecords = specHandler(
  auditRecordsRoute,
  {
    GET: async ({ query }, _request, call) => {
      const records = await trailOf(call).records(call.principal.tenant, {
        afterSeq: query.afterSeq,
        limit: query.limit + 1,
        ...(query.threadId === undefined ? {} : { threadId: query.threadId }),
        ...(query.action === undefined ? {} : { action: query.action }),
      });
      const more = records.length > query.limit;
      if (more) records.length = query.limit;
      return json(200, { records, next: more ? (records.at(-1)?.seq ?? null) : null });
    },
  },
  requireTrail,
);

export const auditVerify = specHandler(
  auditVerifyRoute,
  {
    GET: async ({ query }, _request, call) => {
      if ((query.expectedSeq === undefined) !== (query.expectedHash === undefined)) {
        throw new InvalidArgumentError(
          query.expectedSeq === undefined ? 'expectedSeq' : 'expectedHash',
          'expectedSeq and expectedHash go together',
        );
      }
      const expected =
        query.expectedSeq === undefined || query.expectedHash === undefined
          ? undefined
          : { seq: query.expectedSeq, hash: query.expectedHash };
      return json(200, await trailOf(call).verify(call.principal.tenant, expected));
    },
  },
  requireTrail,
);

export const auditHeads = specHandler(
  auditHeadsRoute,
  {
    GET: async ({ query }, _request, call) => {
      const heads = await trailOf(call).signedHeads(call.principal.tenant, query.afterSeq, query.limit + 1);
      const more = heads.length > query.limit;
      if (more) heads.length = query.limit;
      return json(200, { heads, next: more ? (heads.at(-1)?.seq ?? null) : null });
    },
  },
  requireTrail,
);

registerRoute(auditRecords);
registerRoute(auditVerify);
registerRoute(auditHeads);

/**
 * The `auditHeadSign` timer: for every tenant with a trail, repairs its pending audit markers and,
 * with CAIRN_AUDIT_SIGNING_KEY, signs and keeps its head when it moved, only if the trail verifies
 * and extends the last signed head. Safe to run twice or on two instances at once (see
 * AuditTrail.signHeads). Quiet when auditing is off; fails (throws, after every tenant was tried)
 * when a tenant could not be served or its head was not signed because its trail does not verify,
 * with a warning whose `alert` is `audit_head_not_signed` naming the tenants.
 */
export const auditHeadSign = timerHandler('auditHeadSign', async (_timer, _context, log): Promise<void> => {
  const services = getServices();
  const trail = services.auditTrail;
  if (trail === undefined) return;
  const result = await trail.signHeads();
  if (result.refused.length > 0) {
    log.warn(
      { ...result, alert: 'audit_head_not_signed' },
      'audit heads not signed: the trail of these tenants does not verify',
    );
  } else {
    log.info(result, 'audit heads signed');
  }
  const attention = result.failed.length + result.refused.length;
  if (attention > 0) {
    throw new Error(
      `audit heads: ${attention} of ${result.tenants} tenants need attention (${result.refused.length} whose trail does not verify, not signed)`,
    );
  }
});

app.timer('auditHeadSign', { schedule: auditSignScheduleFrom(), handler: auditHeadSign });
