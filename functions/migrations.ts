import type { ActivityHandler, OrchestrationContext, OrchestrationHandler } from 'durable-functions';
import * as df from 'durable-functions';

import { actorOf } from '#shared/auth';
import {
  checkJobAudit,
  checkSource,
  checkSourceRoot,
  checkTenant,
  knownAdminActors,
} from '#shared/migration/jobInput';
import {
  checkSourceFolder,
  checkSourceRealRoot,
  type CopyBatch,
  copyFiles,
  emptyReport,
  listBatch,
  mergeReports,
  type MigrationReport,
  type MigrationSource,
  missingSourceError,
  planSourcePage,
  type SourcePlan,
} from '#shared/migration/migration';
import { InvalidArgumentError, NotConfiguredError } from '#shared/protocol/errors';
import { migrationStatusRoute, startMigrationRoute } from '#shared/protocol/migrations';
import { getServices } from '#shared/services';

import { type JobAudit, jobEvent } from './auditJobs';
import { chunk, jobRetryOptions, jobState, jobStatus, startJob } from './durableJobs';
import { json } from './http/request';
import { registerRoute, specHandler } from './http/route';

/**
 * Local-to-blob migration as a durable orchestration (docs/migration.md): an HTTP starter, a deterministic
 * orchestrator that pages through each source and fans out copy batches with bounded parallelism,
 * and two activities. Names are declared once here and shared by callers and registrations.
 */
export const MIGRATION_ORCHESTRATION = 'migrateLocalToBlob';
export const LIST_SOURCE_PAGE = 'migrationListSourcePage';
export const COPY_FILES = 'migrationCopyFiles';

/** Files per listing page. The history holds key ranges and counts, never file names. */
export const PAGE_SIZE = 1000;
/** Files per copy activity. */
export const BATCH_SIZE = 100;
/** Copy activities at once (each copies up to COPY_CONCURRENCY files at once). */
export const PARALLEL_BATCHES = 4;
/** Files one copy activity writes at once: 4 × 8 = 32 writes in flight per migration. */
export const COPY_CONCURRENCY = 8;

export interface MigrationInput {
  readonly tenant: string;
  readonly sources: readonly MigrationSource[];
  readonly dryRun: boolean;
  /** Set when auditing is on: the job's start and completion are recorded in the target's trail. */
  readonly audit?: JobAudit;
}

export interface MigrationProgress {
  readonly total: number;
  readonly done: number;
}

interface ListInput {
  readonly tenant: string;
  readonly source: MigrationSource;
  readonly after: string;
  readonly limit: number;
}

interface CopyInput {
  readonly tenant: string;
  readonly source: MigrationSource;
  readonly batch: CopyBatch;
  readonly dryRun: boolean;
}

/**
 * Deterministic: no I/O, no clock, no randomness; everything comes from its input and the results
 * of activities. Progress is its custom status.
 */
export const migrationOrchestrator: OrchestrationHandler = function* (context: OrchestrationContext) {
  const input = checkMigrationInput(context.df.getInput<unknown>());
  const retry = jobRetryOptions();
  const report = emptyReport();
  let total = 0;
  let done = 0;
  context.df.setCustomStatus({ total, done } satisfies MigrationProgress);
  if (input.audit !== undefined) {
    yield jobEvent(context, retry, input.audit, 'admin.migration.started', {
      sources: input.sources.length,
      dryRun: input.dryRun,
    });
  }
  for (const [index, source] of input.sources.entries()) {
    let after = '';
    for (;;) {
      const plan = (yield context.df.callActivityWithRetry(LIST_SOURCE_PAGE, retry, {
        tenant: input.tenant,
        source,
        after,
        limit: PAGE_SIZE,
      } satisfies ListInput)) as SourcePlan;
      // A root gone since the start checked it (or a start on the runtime directly): fail naming it.
      if (!plan.exists) throw missingSourceError(`sources.${index}.root`, source.root);
      total += plan.stored + plan.batches.reduce((sum, batch) => sum + batch.count, 0);
      report.skipped += plan.stored;
      done += plan.stored;
      context.df.setCustomStatus({ total, done } satisfies MigrationProgress);
      for (const group of chunk(plan.batches, PARALLEL_BATCHES)) {
        const results = (yield context.df.Task.all(
          group.map((batch) =>
            context.df.callActivityWithRetry(COPY_FILES, retry, {
              tenant: input.tenant,
              source,
              batch,
              dryRun: input.dryRun,
            } satisfies CopyInput),
          ),
        )) as MigrationReport[];
        for (const [index, result] of results.entries()) {
          mergeReports(report, result);
          done += group[index]?.count ?? 0;
        }
        context.df.setCustomStatus({ total, done } satisfies MigrationProgress);
      }
      if (plan.next === null) break;
      after = plan.next;
    }
  }
  if (input.audit !== undefined) {
    yield jobEvent(context, retry, input.audit, 'admin.migration.completed', {
      copied: report.copied,
      skipped: report.skipped,
      errors: report.errors.length,
      dryRun: input.dryRun,
    });
  }
  return report;
};

/**
 * The orchestration's input, checked as the starting route makes it (anyone who can reach the
 * durable runtime can start the orchestration with any input): the tenant, every source (its root
 * inside CAIRN_MIGRATION_SOURCE_ROOTS), `dryRun`, and the audit (its actor an admin's, its trail
 * the target tenant's). The configuration is the same on every replay in one process; the
 * activities check again before they read or write anything.
 */
export function checkMigrationInput(input: unknown): MigrationInput {
  const value = objectInput('input', input);
  const config = getServices().config;
  const tenant = checkTenant('tenant', value['tenant']);
  const sources = value['sources'];
  if (!Array.isArray(sources) || sources.length === 0 || sources.length > 100) {
    throw new InvalidArgumentError('sources', 'must list 1-100 sources');
  }
  if (typeof value['dryRun'] !== 'boolean') throw new InvalidArgumentError('dryRun', 'must be a boolean');
  const audit = checkJobAudit('audit', value['audit'], knownAdminActors(config), tenant);
  return {
    tenant,
    sources: sources.map((source, index) =>
      checkSource(`sources.${index}`, source, config.migrationSourceRoots),
    ),
    dryRun: value['dryRun'],
    ...(audit === undefined ? {} : { audit }),
  };
}

function objectInput(field: string, input: unknown): Record<string, unknown> {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw new InvalidArgumentError(field, 'must be an object');
  }
  return input as Record<string, unknown>;
}

/** A key of the walk (`after`, `through`): a string (the empty one is the start). */
function walkKey(field: string, value: unknown): string {
  if (typeof value !== 'string' || value.length > 4096) {
    throw new InvalidArgumentError(field, 'must be a string of at most 4096 characters');
  }
  return value;
}

function count(field: string, value: unknown, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > max) {
    throw new InvalidArgumentError(field, `must be an integer from 1 to ${max}`);
  }
  return value;
}

/** An activity's tenant and source, checked as the orchestration's. */
function tenantAndSource(value: Record<string, unknown>): { tenant: string; source: MigrationSource } {
  return {
    tenant: checkTenant('tenant', value['tenant']),
    source: checkSource('source', value['source'], getServices().config.migrationSourceRoots),
  };
}

/** Plans a page of a source: what the target stores is skipped, the rest cut into batches. */
export const listSourcePageActivity: ActivityHandler = async (input: unknown) => {
  const value = objectInput('input', input);
  const { tenant, source } = tenantAndSource(value);
  await checkSourceRealRoot('source.root', source.root, getServices().config.migrationSourceRoots);
  return planSourcePage(
    getServices().kvStores.forTenant(tenant),
    source,
    walkKey('after', value['after']),
    count('limit', value['limit'], PAGE_SIZE),
    BATCH_SIZE,
  );
};

/** Throws on a storage fault (so the orchestrator's retry applies); per-file problems are in the report. */
export const copyFilesActivity: ActivityHandler = async (input: unknown) => {
  const value = objectInput('input', input);
  const { tenant, source } = tenantAndSource(value);
  const batchValue = objectInput('batch', value['batch']);
  const batch: CopyBatch = {
    after: walkKey('batch.after', batchValue['after']),
    through: walkKey('batch.through', batchValue['through']),
    count: count('batch.count', batchValue['count'], BATCH_SIZE),
  };
  if (typeof value['dryRun'] !== 'boolean') throw new InvalidArgumentError('dryRun', 'must be a boolean');
  const services = getServices();
  await checkSourceRealRoot('source.root', source.root, services.config.migrationSourceRoots);
  return copyFiles(services.kvStores.forTenant(tenant), {
    source,
    files: await listBatch(source, batch),
    dryRun: value['dryRun'],
    maxValueBytes: services.config.maxValueBytes,
    concurrency: COPY_CONCURRENCY,
  });
};

df.app.orchestration(MIGRATION_ORCHESTRATION, migrationOrchestrator);
df.app.activity(LIST_SOURCE_PAGE, { handler: listSourcePageActivity });
df.app.activity(COPY_FILES, { handler: copyFilesActivity });

export const startMigration = specHandler(
  startMigrationRoute,
  {
    POST: async ({ body }, request, call) => {
      const roots = call.services.config.migrationSourceRoots;
      const sources = body.sources.map((source, index) => ({
        root: checkSourceRoot(`sources.${index}.root`, source.root, roots),
        prefix: source.prefix,
      }));
      // A folder that is not there is refused up front (400 naming it), not run as an empty migration.
      for (const [index, source] of sources.entries()) {
        await checkSourceFolder(`sources.${index}.root`, source.root);
        await checkSourceRealRoot(`sources.${index}.root`, source.root, roots);
      }
      const input: MigrationInput = {
        tenant: body.tenant,
        sources,
        dryRun: body.dryRun,
        ...(call.services.audit.enabled
          ? { audit: { tenant: body.tenant, actor: actorOf(call.principal) } }
          : {}),
      };
      const id = await startJob(call.context, MIGRATION_ORCHESTRATION, input);
      const statusUri = `${new URL(request.url).origin}/api/migrations/${id}`;
      call.log.info(
        { migration: id, sources: body.sources.length, dryRun: body.dryRun },
        'migration started',
      );
      return json(202, { id, statusUri }, { location: statusUri });
    },
  },
  {
    // A part that is off answers so whatever the body, as every such route does.
    before: (call) => {
      if (call.services.kvStores.kind !== 'blob') {
        throw new NotConfiguredError(
          'CAIRN_BLOB_ENDPOINT',
          'the service runs on the local backend: a migration needs the Blob backend as its target; set CAIRN_BLOB_ENDPOINT and CAIRN_BLOB_CONTAINER',
        );
      }
    },
  },
);

export const migrationStatus = specHandler(migrationStatusRoute, {
  GET: async ({ params: { id } }, _request, call) => {
    const status = await jobStatus(call.context, MIGRATION_ORCHESTRATION, id, 'no such migration');
    const state = jobState(status.runtimeStatus);
    const progress = (status.customStatus as MigrationProgress | null) ?? { total: 0, done: 0 };
    return json(200, {
      id,
      status: state,
      progress: { total: progress.total, done: progress.done },
      report: state === 'completed' ? (status.output as MigrationReport) : null,
      ...(state === 'failed'
        ? { error: typeof status.output === 'string' ? status.output : 'the migration failed' }
        : {}),
    });
  },
});

registerRoute(startMigration, [df.input.durableClient()]);
registerRoute(migrationStatus, [df.input.durableClient()]);
