import { app } from '@azure/functions';
import { z } from 'zod';

import { pruneScheduleFrom } from '#shared/config';
import { InvalidArgumentError } from '#shared/errors';
import type { PruneReport } from '#shared/jobs/retentionPrune';
import { checkJsonDepth } from '#shared/json';
import { effectivePolicy, MAX_POLICY_BODY_BYTES, parsePolicyOverride } from '#shared/retention/policy';
import { getServices } from '#shared/services';
import { isValidTenantId, TENANT_ID_RULE, tenantIdSchema } from '#shared/tenants/tenantIds';

import { requireAdmin } from './http/admin';
import { type AuthenticatedCall, httpHandler, registerHttp } from './http/pipeline';
import { json, parseQuery, readBody } from './http/request';
import { readJsonBody } from './jsonBody';
import { timerHandler } from './timer';

/**
 * Retention (docs/retention.md): the `retentionPrune` timer, and the admin routes that read and set
 * a tenant's policy, run a prune now, verify what is kept and list the tenants. Every route is for
 * admins (403 otherwise). Route templates cannot start with `admin` on the Functions host (it keeps
 * `/admin` for itself), so these live at `/api/retention/...`, `/api/verify` and `/api/tenants`, as
 * the other admin routes (`/api/migrations`, `/api/snapshot-keys`) do.
 */

const MAX_PRUNE_BODY_BYTES = 1024;

function tenantParam(value: string | undefined): string {
  if (value === undefined || !isValidTenantId(value)) {
    throw new InvalidArgumentError('tenant', 'must be 1-64 characters of [A-Za-z0-9._-], not "." or ".."');
  }
  return value;
}

async function policyView(call: AuthenticatedCall, tenant: string) {
  const policies = call.services.retentionPolicies;
  const override = await policies.override(tenant);
  return {
    tenant,
    override,
    defaults: policies.defaults,
    effective: effectivePolicy(policies.defaults, override),
  };
}

export const retentionPolicy = httpHandler('retentionPolicy', {
  GET: async (request, call) => {
    requireAdmin(call, 'retention and verify');
    return json(200, await policyView(call, tenantParam(request.params['tenant'])));
  },
  PUT: async (request, call) => {
    requireAdmin(call, 'retention and verify');
    const bytes = await readBody(request, MAX_POLICY_BODY_BYTES);
    const tenant = tenantParam(request.params['tenant']);
    let body: unknown;
    try {
      body = JSON.parse(bytes.toString('utf8')) as unknown;
    } catch {
      throw new InvalidArgumentError('body', 'must be a JSON object of policy fields');
    }
    checkJsonDepth(body, 'body');
    await call.services.retentionPolicies.set(tenant, parsePolicyOverride(body));
    return json(200, await policyView(call, tenant));
  },
  DELETE: async (request, call) => {
    requireAdmin(call, 'retention and verify');
    await call.services.retentionPolicies.remove(tenantParam(request.params['tenant']));
    return { status: 204 };
  },
});

const pruneBody = z.strictObject({
  tenant: z.string({ error: 'must be a tenant id' }).refine(isValidTenantId, TENANT_ID_RULE).optional(),
});

export const retentionPrune = httpHandler('retentionPruneNow', {
  POST: async (request, call) => {
    requireAdmin(call, 'retention and verify');
    const body = await readJsonBody(request, MAX_PRUNE_BODY_BYTES, pruneBody, { emptyIsObject: true });
    const report = await call.services.pruner.run(
      call.log,
      body.tenant === undefined ? {} : { tenant: body.tenant },
    );
    return json(200, report);
  },
});

const verifyQuery = z.object({
  tenant: tenantIdSchema.optional(),
  readData: z.enum(['true', 'false'], { error: 'must be true or false' }).optional(),
});

export const verify = httpHandler('verify', {
  GET: async (request, call) => {
    requireAdmin(call, 'retention and verify');
    const query = parseQuery(request, verifyQuery);
    const options = { readData: query.readData === 'true' };
    const verifier = call.services.verifier;
    const tenants: string[] = [];
    if (query.tenant !== undefined) tenants.push(query.tenant);
    else for await (const entry of verifier.tenants()) tenants.push(entry.tenant);
    const reports = [];
    for (const tenant of tenants) reports.push(await verifier.verifyTenant(tenant, options));
    return json(200, { ok: reports.every((report) => report.ok), tenants: reports });
  },
});

export const tenants = httpHandler('tenants', {
  GET: async (_request, call) => {
    requireAdmin(call, 'retention and verify');
    const found: { tenant: string; domains: string[] }[] = [];
    for await (const entry of call.services.tenants.entries()) {
      found.push({ tenant: entry.tenant, domains: [...entry.domains].sort() });
    }
    return json(200, { tenants: found });
  },
});

registerHttp('retentionPolicy', 'retention/policies/{tenant}', retentionPolicy);
registerHttp('retentionPruneNow', 'retention/prune', retentionPrune);
registerHttp('verify', 'verify', verify);
registerHttp('tenants', 'tenants', tenants);

/**
 * The `retentionPrune` timer: one prune run over every tenant (see shared/retention/prune.ts; safe
 * when it fires twice or on several instances at once). Each tenant's counts are logged with the
 * tenant; the invocation fails (throws) when a tenant's pass failed, after every tenant was pruned.
 */
export const retentionPruneTimer = timerHandler(
  'retentionPrune',
  async (_timer, _context, log): Promise<PruneReport> => {
    const services = getServices();
    const report = await services.pruner.run(log);
    const failed = report.tenants.filter((tenant) => tenant.error !== undefined);
    log.info(
      {
        tenants: report.tenants.length,
        complete: report.complete,
        objectsDeleted: report.tenants.reduce((sum, tenant) => sum + tenant.objectsDeleted, 0),
        bytesFreed: report.tenants.reduce((sum, tenant) => sum + tenant.bytesFreed, 0),
        failed: failed.length,
      },
      'retention prune finished',
    );
    if (failed.length > 0) {
      throw new Error(
        `retention prune: ${failed.length} of ${report.tenants.length} tenants failed: ` +
          failed.map((tenant) => `${tenant.tenant} (${tenant.error ?? ''})`).join(', '),
      );
    }
    return report;
  },
);

// The schedule is passed as a value (default hourly), as for emailWindowPoll: the host has no
// default for a %SETTING% reference, and an invalid setting stops the app here, naming it.
app.timer('retentionPrune', { schedule: pruneScheduleFrom(), handler: retentionPruneTimer });
