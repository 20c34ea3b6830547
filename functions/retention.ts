import { app } from '@azure/functions';

import { pruneScheduleFrom } from '#shared/config';
import type { PruneReport } from '#shared/jobs/retentionPrune';
import {
  retentionPolicyRoute,
  retentionPruneRoute,
  tenantsRoute,
  verifyRoute,
} from '#shared/protocol/retention';
import { effectivePolicy } from '#shared/retention/policy';
import { getServices } from '#shared/services';

import type { AuthenticatedCall } from './http/pipeline';
import { json } from './http/request';
import { registerRoute, specHandler } from './http/route';
import { timerHandler } from './timer';

/**
 * Retention (docs/retention.md): the `retentionPrune` timer, and the admin routes that read and set
 * a tenant's policy, run a prune now, verify what is kept and list the tenants, declared in
 * shared/protocol/retention.ts. Every route is for admins (403 otherwise). Route templates cannot start with `admin` on the Functions host (it keeps
 * `/admin` for itself), so these live at `/api/retention/...`, `/api/verify` and `/api/tenants`, as
 * the other admin routes (`/api/migrations`, `/api/snapshot-keys`) do.
 */

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

export const retentionPolicy = specHandler(retentionPolicyRoute, {
  GET: async ({ params: { tenant } }, _request, call) => json(200, await policyView(call, tenant)),
  PUT: async ({ params: { tenant }, body }, _request, call) => {
    await call.services.retentionPolicies.set(tenant, body);
    return json(200, await policyView(call, tenant));
  },
  DELETE: async ({ params: { tenant } }, _request, call) => {
    await call.services.retentionPolicies.remove(tenant);
    return { status: 204 };
  },
});

export const retentionPrune = specHandler(retentionPruneRoute, {
  POST: async ({ body }, _request, call) => {
    const report = await call.services.pruner.run(
      call.log,
      body.tenant === undefined ? {} : { tenant: body.tenant },
    );
    return json(200, report);
  },
});

export const verify = specHandler(verifyRoute, {
  GET: async ({ query }, _request, call) => {
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

export const tenants = specHandler(tenantsRoute, {
  GET: async (_input, _request, call) => {
    const found: { tenant: string; domains: string[] }[] = [];
    for await (const entry of call.services.tenants.entries()) {
      found.push({ tenant: entry.tenant, domains: [...entry.domains].sort() });
    }
    return json(200, { tenants: found });
  },
});

registerRoute(retentionPolicy);
registerRoute(retentionPrune);
registerRoute(verify);
registerRoute(tenants);

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
