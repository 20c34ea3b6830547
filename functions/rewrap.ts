import type { ActivityHandler, OrchestrationContext, OrchestrationHandler } from 'durable-functions';
import * as df from 'durable-functions';

import { actorOf } from '#shared/auth';
import { addCounts, emptyCounts, type RewrapCounts, type RewrapPage } from '#shared/crypto/rewrap';
import { checkJobAudit, checkTenant } from '#shared/migration/jobInput';
import { InternalError, InvalidArgumentError, NotConfiguredError } from '#shared/protocol/errors';
import { rewrapStatusRoute, startRewrapRoute } from '#shared/protocol/rewrap';
import { getServices } from '#shared/services';

import { type JobAudit, jobEvent } from './auditJobs';
import { chunk, jobRetryOptions, jobState, jobStatus, startJob } from './durableJobs';
import { json } from './http/request';
import { registerRoute, specHandler } from './http/route';

/**
 * The `rewrap` admin job (docs/encryption.md) as a durable orchestration, like the migration: an
 * HTTP starter, a deterministic orchestrator that pages through every tenant that stored sealed
 * values and through each of the tenant's sealed stores (the rewrap targets), and idempotent
 * activities that re-seal one page each with the first key and throw on failure (so the
 * orchestrator's retry applies). Running it again, or a page again, re-seals nothing twice.
 * Names are declared once here and shared by callers and registrations.
 */
export const REWRAP_ORCHESTRATION = 'rewrapSealedValues';
export const REWRAP_LIST_TENANTS = 'rewrapListTenants';
export const REWRAP_PAGE = 'rewrapPage';

/** Tenants per listing activity. */
export const TENANT_PAGE_SIZE = 100;
/** Stored values (keys) per re-seal activity. */
export const VALUES_PER_PAGE = 200;
/** Tenants re-sealed at once. */
export const PARALLEL_TENANTS = 4;

export interface RewrapInput {
  /** The key that seals when the job starts; an instance with another first key refuses to work. */
  readonly firstKeyId: string;
  /** Every configured key id (the report lists each one other than the first). */
  readonly keyIds: readonly string[];
  /** The rewrap targets, in order (`threads`, `kv`, …). */
  readonly targets: readonly string[];
  /** Set when auditing is on: the job's start and completion go to the starting admin's trail. */
  readonly audit?: JobAudit;
}

export interface RewrapProgress {
  /** Tenants finished. */
  readonly tenants: number;
  readonly examined: number;
  readonly resealed: number;
}

export interface RewrapReport extends RewrapCounts {
  readonly firstKeyId: string;
  readonly tenants: number;
}

interface TenantListInput {
  readonly after: string | null;
  readonly limit: number;
}

interface TenantList {
  readonly tenants: string[];
  readonly next: string | null;
}

interface PageInput {
  readonly firstKeyId: string;
  readonly tenant: string;
  readonly target: string;
  readonly cursor: string | null;
}

/**
 * Deterministic: no I/O, no clock, no randomness. Tenants are taken in groups; within a group, each
 * round re-seals the next page of every (tenant, target) not yet done, in parallel. Progress is the
 * custom status; the report's `remaining` names every configured key other than the first (0 once
 * nothing is left sealed with it).
 */
export const rewrapOrchestrator: OrchestrationHandler = function* (context: OrchestrationContext) {
  const input = checkRewrapInput(context.df.getInput<unknown>());
  const retry = jobRetryOptions();
  const counts = emptyCounts();
  for (const id of input.keyIds) if (id !== input.firstKeyId) counts.remaining[id] = 0;
  let tenants = 0;
  const progress = () =>
    context.df.setCustomStatus({
      tenants,
      examined: counts.examined,
      resealed: counts.resealed,
    } satisfies RewrapProgress);
  progress();
  if (input.audit !== undefined) {
    yield jobEvent(context, retry, input.audit, 'admin.rewrap.started', { firstKeyId: input.firstKeyId });
  }
  let after: string | null = null;
  for (;;) {
    const list = (yield context.df.callActivityWithRetry(REWRAP_LIST_TENANTS, retry, {
      after,
      limit: TENANT_PAGE_SIZE,
    } satisfies TenantListInput)) as TenantList;
    for (const group of chunk(list.tenants, PARALLEL_TENANTS)) {
      let open = group.flatMap((tenant) =>
        input.targets.map((target) => ({ tenant, target, cursor: null as string | null })),
      );
      while (open.length > 0) {
        const pages = (yield context.df.Task.all(
          open.map((work) =>
            context.df.callActivityWithRetry(REWRAP_PAGE, retry, {
              firstKeyId: input.firstKeyId,
              ...work,
            } satisfies PageInput),
          ),
        )) as RewrapPage[];
        open = open
          .map((work, index) => {
            const page = pages[index] as RewrapPage;
            addCounts(counts, page);
            return { ...work, cursor: page.next };
          })
          .filter((work) => work.cursor !== null);
        progress();
      }
      tenants += group.length;
      progress();
    }
    if (list.next === null) break;
    after = list.next;
  }
  if (input.audit !== undefined) {
    yield jobEvent(context, retry, input.audit, 'admin.rewrap.completed', {
      firstKeyId: input.firstKeyId,
      tenants,
      examined: counts.examined,
      resealed: counts.resealed,
      remaining: Object.values(counts.remaining).reduce((sum, count) => sum + count, 0),
    });
  }
  return { firstKeyId: input.firstKeyId, tenants, ...counts } satisfies RewrapReport;
};

function objectInput(field: string, input: unknown): Record<string, unknown> {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw new InvalidArgumentError(field, 'must be an object');
  }
  return input as Record<string, unknown>;
}

function stringList(field: string, value: unknown): string[] {
  if (!Array.isArray(value) || !value.every((item) => typeof item === 'string' && item !== '')) {
    throw new InvalidArgumentError(field, 'must be a list of names');
  }
  return value as string[];
}

/**
 * The orchestration's input, checked as the starting route makes it (anyone who can reach the
 * durable runtime can start the orchestration with any input). Deterministic, so without
 * configuration: each page checks the first key against this instance's and its target, the audit
 * activity the actor, before anything is read or written.
 */
export function checkRewrapInput(input: unknown): RewrapInput {
  const value = objectInput('input', input);
  const firstKeyId = value['firstKeyId'];
  if (typeof firstKeyId !== 'string' || firstKeyId === '') {
    throw new InvalidArgumentError('firstKeyId', 'must be a key id');
  }
  const keyIds = stringList('keyIds', value['keyIds']);
  const targets = stringList('targets', value['targets']);
  const audit = checkJobAudit('audit', value['audit'], undefined);
  return { firstKeyId, keyIds, targets, ...(audit === undefined ? {} : { audit }) };
}

function cursorInput(field: string, value: unknown): string | null {
  if (value !== null && (typeof value !== 'string' || value.length > 4096)) {
    throw new InvalidArgumentError(field, 'must be null or a string of at most 4096 characters');
  }
  return value;
}

/** One page of the registry of tenants that stored sealed values, after `after`. */
export const listTenantsActivity: ActivityHandler = async (raw: unknown): Promise<TenantList> => {
  const value = objectInput('input', raw);
  const limit = value['limit'];
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > TENANT_PAGE_SIZE) {
    throw new InvalidArgumentError('limit', `must be an integer from 1 to ${TENANT_PAGE_SIZE}`);
  }
  const input: TenantListInput = { after: cursorInput('after', value['after']), limit };
  const tenants: string[] = [];
  for await (const tenant of getServices().encryption.sealedTenants(input.limit + 1)) {
    if (input.after !== null && tenant <= input.after) continue;
    tenants.push(tenant);
    if (tenants.length > input.limit) break;
  }
  const more = tenants.length > input.limit;
  if (more) tenants.length = input.limit;
  return { tenants, next: more ? (tenants.at(-1) ?? null) : null };
};

/** Re-seals one page of one tenant's target; throws on a storage fault (retried). */
export const rewrapPageActivity: ActivityHandler = async (raw: unknown): Promise<RewrapPage> => {
  const value = objectInput('input', raw);
  const input: PageInput = {
    firstKeyId: String(value['firstKeyId']),
    tenant: checkTenant('tenant', value['tenant']),
    target: String(value['target']),
    cursor: cursorInput('cursor', value['cursor']),
  };
  const services = getServices();
  await services.encryption.check();
  if (services.codec.firstKeyId !== input.firstKeyId) {
    throw new InternalError(
      `this instance seals with key ${services.codec.firstKeyId ?? '(none)'}, the job with ${input.firstKeyId}: CAIRN_ENCRYPTION_KEYS changed during the job; start it again`,
    );
  }
  const target = services.rewrapTargets.get(input.target);
  if (target === undefined) throw new InternalError(`no rewrap target ${input.target}`);
  return target.rewrapPage(input.tenant, input.cursor, VALUES_PER_PAGE);
};

df.app.orchestration(REWRAP_ORCHESTRATION, rewrapOrchestrator);
df.app.activity(REWRAP_LIST_TENANTS, { handler: listTenantsActivity });
df.app.activity(REWRAP_PAGE, { handler: rewrapPageActivity });

export const startRewrap = specHandler(startRewrapRoute, {
  // The body (nothing) is checked first; then a deployment without keys answers 501.
  POST: async (_input, request, call) => {
    const { codec } = call.services;
    if (codec.firstKeyId === undefined) {
      throw new NotConfiguredError(
        'CAIRN_ENCRYPTION_KEYS',
        'encryption at rest is off (CAIRN_ENCRYPTION_KEYS is empty): nothing to re-seal; set CAIRN_ENCRYPTION_KEYS to seal values',
      );
    }
    const input: RewrapInput = {
      firstKeyId: codec.firstKeyId,
      keyIds: codec.keyIds,
      targets: [...call.services.rewrapTargets.keys()],
      ...(call.services.audit.enabled
        ? { audit: { tenant: call.principal.tenant, actor: actorOf(call.principal) } }
        : {}),
    };
    const id = await startJob(call.context, REWRAP_ORCHESTRATION, input);
    const statusUri = `${new URL(request.url).origin}/api/encryption/rewraps/${id}`;
    call.log.info({ rewrap: id, firstKeyId: input.firstKeyId }, 'rewrap started');
    return json(202, { id, statusUri }, { location: statusUri });
  },
});

export const rewrapStatus = specHandler(rewrapStatusRoute, {
  GET: async ({ params: { id } }, _request, call) => {
    const status = await jobStatus(call.context, REWRAP_ORCHESTRATION, id, 'no such rewrap job');
    const state = jobState(status.runtimeStatus);
    const progress = (status.customStatus as RewrapProgress | null) ?? {
      tenants: 0,
      examined: 0,
      resealed: 0,
    };
    return json(200, {
      id,
      status: state,
      progress: { tenants: progress.tenants, examined: progress.examined, resealed: progress.resealed },
      report: state === 'completed' ? (status.output as RewrapReport) : null,
      ...(state === 'failed'
        ? { error: typeof status.output === 'string' ? status.output : 'the rewrap job failed' }
        : {}),
    });
  },
});

registerRoute(startRewrap, [df.input.durableClient()]);
registerRoute(rewrapStatus, [df.input.durableClient()]);
