import { z } from 'zod';

import { KiB, TenantId } from './fields.js';
import { jobIdParams, JobStarted, JobState, statusUriHeader } from './jobs.js';
import { route } from './spec.js';
import { TAGS } from './tags.js';
import { keyProblem } from './text.js';

/** Copying local state to Blob storage, as a durable job (docs/migration.md); admin only. */

export const MAX_MIGRATION_BODY_BYTES = 64 * KiB;

export const startMigrationBody = z.strictObject({
  tenant: TenantId,
  sources: z
    .array(
      z.strictObject({
        root: z.string().min(1, 'must be a folder on the host').describe('A folder on the host.'),
        prefix: z
          .string()
          .default('')
          .refine((prefix) => prefix === '' || keyProblem(prefix) === null, 'must be empty or a valid key')
          .describe('Empty, or a key to put the copied keys under.'),
      }),
    )
    .min(1, 'must list at least one source')
    .max(100, 'must list at most 100 sources'),
  dryRun: z.boolean().default(false).describe('Count what would be copied; write nothing.'),
});

export const MigrationReport = z
  .object({
    copied: z.number().int().min(0),
    skipped: z.number().int().min(0).describe('Keys the target already held (never overwritten).'),
    bytesCopied: z.number().int().min(0),
    keysCopied: z.array(z.string()).describe('The keys written.'),
    errors: z.array(z.tuple([z.string(), z.string()]).describe('[key, message]')),
  })
  .meta({ id: 'MigrationReport' });

export const MigrationStarted = JobStarted;

export const MigrationStatus = z.object({
  id: z.string(),
  status: JobState,
  progress: z.object({ total: z.number().int().min(0), done: z.number().int().min(0) }),
  report: MigrationReport.nullable(),
  error: z.string().optional().describe('Why it failed; only when `status` is failed.'),
});

export const startMigrationRoute = route({
  name: 'startMigration',
  route: 'migrations',
  operations: {
    POST: {
      operationId: 'startMigration',
      summary: 'Start a migration of local state to Blob storage',
      description:
        "Copies the files under each source root into the tenant's key/value space on the Blob backend, as keys `prefix/relative/path`. Existing keys are skipped, never overwritten; sources are never changed. A root that does not exist on the service's host, or is not a folder, is a 400 naming `sources.N.root` and the path. 501 `not_configured` naming CAIRN_BLOB_ENDPOINT when the service runs on the local backend.",
      tag: TAGS.migrations,
      auth: 'admin',
      adminWhat: 'migrations',
      body: {
        kind: 'json',
        description: 'What to copy, for which tenant.',
        schema: startMigrationBody,
        limit: MAX_MIGRATION_BODY_BYTES,
      },
      answers: {
        202: {
          description: 'Started.',
          body: MigrationStarted,
          headers: statusUriHeader,
        },
      },
      errors: [400, 501],
    },
  },
});

export const migrationStatusRoute = route({
  name: 'migrationStatus',
  route: 'migrations/{id}',
  params: jobIdParams('migration'),
  operations: {
    GET: {
      operationId: 'getMigration',
      summary: "A migration's status",
      tag: TAGS.migrations,
      auth: 'admin',
      adminWhat: 'migrations',
      answers: {
        200: { description: 'The status; `report` once completed (a dry run too).', body: MigrationStatus },
      },
      errors: [404],
    },
  },
});
