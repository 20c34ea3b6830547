import { app } from '@azure/functions';
import { z } from 'zod';

import type { AuditTrail } from '#shared/audit/auditTrail';
import { auditSignScheduleFrom } from '#shared/config';
import { InvalidArgumentError, NotConfiguredError } from '#shared/errors';
import { getServices } from '#shared/services';
import { isName, NAME_RULE } from '#shared/threads/identifiers';

import { type AuthenticatedCall, httpHandler, registerHttp } from './http/pipeline';
import { json, parseQuery } from './http/request';
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

const LIMIT_RULE = 'must be a whole number from 1 to 1000';
const SEQ_RULE = 'must be a whole number, 0 or more';
const seq = z.coerce
  .number({ error: SEQ_RULE })
  .int(SEQ_RULE)
  .min(0, SEQ_RULE)
  .max(Number.MAX_SAFE_INTEGER, SEQ_RULE);
const limit = z.coerce
  .number({ error: LIMIT_RULE })
  .int(LIMIT_RULE)
  .min(1, LIMIT_RULE)
  .max(1000, LIMIT_RULE)
  .default(100);

const recordsQuery = z.object({
  threadId: z.string().refine(isName, NAME_RULE).optional(),
  action: z
    .string()
    .regex(/^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$/, 'must be an action such as run.started')
    .optional(),
  afterSeq: seq.default(0),
  limit,
});

const verifyQuery = z.object({
  expectedSeq: z.coerce.number({ error: 'must be a whole number from 1' }).int().min(1).optional(),
  expectedHash: z
    .string()
    .regex(/^[0-9a-f]{64}$/, 'must be 64 lowercase hex digits')
    .optional(),
});

const headsQuery = z.object({ afterSeq: seq.default(0), limit });

export const auditRecords = httpHandler('auditRecords', {
  GET: async (request, call) => {
    const trail = trailOf(call);
    const query = parseQuery(request, recordsQuery);
    const records = await trail.records(call.principal.tenant, {
      afterSeq: query.afterSeq,
      limit: query.limit + 1,
      ...(query.threadId === undefined ? {} : { threadId: query.threadId }),
      ...(query.action === undefined ? {} : { action: query.action }),
    });
    const more = records.length > query.limit;
    if (more) records.length = query.limit;
    return json(200, { records, next: more ? (records.at(-1)?.seq ?? null) : null });
  },
});

export const auditVerify = httpHandler('auditVerify', {
  GET: async (request, call) => {
    const trail = trailOf(call);
    const query = parseQuery(request, verifyQuery);
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
    return json(200, await trail.verify(call.principal.tenant, expected));
  },
});

export const auditHeads = httpHandler('auditHeads', {
  GET: async (request, call) => {
    const trail = trailOf(call);
    const query = parseQuery(request, headsQuery);
    const heads = await trail.signedHeads(call.principal.tenant, query.afterSeq, query.limit + 1);
    const more = heads.length > query.limit;
    if (more) heads.length = query.limit;
    return json(200, { heads, next: more ? (heads.at(-1)?.seq ?? null) : null });
  },
});

registerHttp('auditRecords', 'audit/records', auditRecords);
registerHttp('auditVerify', 'audit/verify', auditVerify);
registerHttp('auditHeads', 'audit/heads', auditHeads);

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
