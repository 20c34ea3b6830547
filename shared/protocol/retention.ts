import { z } from 'zod';

import { KiB, TenantId, Timestamp } from './fields.js';
import { route } from './spec.js';
import { TAGS } from './tags.js';

/**
 * Retention (docs/retention.md): the admin routes that read and set a tenant's policy, run a prune
 * now, verify what is kept and list the tenants. Route templates cannot start with `admin` on the
 * Functions host (it keeps `/admin` for itself), so these live at `/api/retention/...`,
 * `/api/verify` and `/api/tenants`.
 */

/** A policy body: five fields at most. */
export const MAX_POLICY_BODY_BYTES = 4 * KiB;
/** A prune body: one tenant at most. */
export const MAX_PRUNE_BODY_BYTES = KiB;

/** Ten years: a longer time to live is a mistake, not a policy. */
export const MAX_TTL_SECONDS = 315_360_000;
export const MAX_KEEP_CHECKPOINTS = 100_000;
export const MAX_INTERACTION_DAYS = 36_500;

/** The fields of a policy, in the order of the document. */
export const POLICY_FIELDS = [
  'threadTtlSeconds',
  'keepCheckpoints',
  'dropBranches',
  'sessionTtlSeconds',
  'interactionDays',
] as const;

export type PolicyField = (typeof POLICY_FIELDS)[number];

/** The rule of each field, for messages and the API description. */
export const POLICY_RULES: Readonly<Record<PolicyField, string>> = {
  threadTtlSeconds: `must be a whole number of seconds from 1 to ${MAX_TTL_SECONDS}, or null`,
  keepCheckpoints: `must be a whole number from 1 to ${MAX_KEEP_CHECKPOINTS}, or null`,
  dropBranches: 'must be true or false',
  sessionTtlSeconds: `must be a whole number of seconds from 1 to ${MAX_TTL_SECONDS}, or null`,
  interactionDays: `must be a whole number of days from 1 to ${MAX_INTERACTION_DAYS}, or null`,
};

/** A whole number from 1 to `max`, or null; refused with the field's rule. */
const wholeOrNull = (field: PolicyField, max: number) => {
  const rule = POLICY_RULES[field];
  return z.number({ error: rule }).int(rule).min(1, rule).max(max, rule).nullable();
};

const policyFields = {
  threadTtlSeconds: wholeOrNull('threadTtlSeconds', MAX_TTL_SECONDS),
  keepCheckpoints: wholeOrNull('keepCheckpoints', MAX_KEEP_CHECKPOINTS),
  dropBranches: z.boolean({ error: POLICY_RULES.dropBranches }),
  sessionTtlSeconds: wholeOrNull('sessionTtlSeconds', MAX_TTL_SECONDS),
  interactionDays: wholeOrNull('interactionDays', MAX_INTERACTION_DAYS),
};

export const RetentionPolicy = z
  .strictObject({
    threadTtlSeconds: policyFields.threadTtlSeconds.describe(
      'Delete threads whose last change is at least this many seconds old.',
    ),
    keepCheckpoints: policyFields.keepCheckpoints.describe(
      "Keep each namespace's head and its n - 1 ancestors; older checkpoints and abandoned branches go.",
    ),
    dropBranches: policyFields.dropBranches.describe(
      'Delete the branches rewinds left behind (checkpoints on no head chain).',
    ),
    sessionTtlSeconds: policyFields.sessionTtlSeconds.describe(
      'Delete archive sessions whose latest checkpoint was published at least this long ago.',
    ),
    interactionDays: policyFields.interactionDays.describe(
      'Keep the interaction log of the last n UTC days, today included.',
    ),
  })
  .meta({
    id: 'RetentionPolicy',
    description: 'How long data is kept; applied only when prune runs. null: keep everything of that kind.',
  });

/** What a policy body must be, as a whole. */
export const POLICY_BODY_RULE = 'must be a JSON object of policy fields';

export const RetentionPolicyOverride = z
  .strictObject(
    {
      threadTtlSeconds: policyFields.threadTtlSeconds.optional(),
      keepCheckpoints: policyFields.keepCheckpoints.optional(),
      dropBranches: policyFields.dropBranches.optional(),
      sessionTtlSeconds: policyFields.sessionTtlSeconds.optional(),
      interactionDays: policyFields.interactionDays.optional(),
    },
    { error: POLICY_BODY_RULE },
  )
  .meta({
    id: 'RetentionPolicyOverride',
    description: `A tenant's override: each field given replaces the default; null keeps everything of that kind. Fields: ${POLICY_FIELDS.map((field) => `${field} ${POLICY_RULES[field]}`).join('; ')}.`,
  });

export const RetentionPolicyView = z
  .object({
    tenant: TenantId,
    override: RetentionPolicyOverride.nullable().describe("The tenant's override, or null when it has none."),
    defaults: RetentionPolicy.describe('From the CAIRN_RETENTION_* settings.'),
    effective: RetentionPolicy.describe('What prune applies to the tenant.'),
  })
  .meta({ id: 'RetentionPolicyView' });

const count = z.number().int().min(0);

export const TenantPruneReport = z
  .object({
    tenant: TenantId,
    threadsDeleted: count.describe('Threads past their time to live, deleted with all their data.'),
    threadsBusy: count.describe(
      'Threads the policy would have deleted or pruned, skipped because a live run held them.',
    ),
    checkpointsDeleted: count.describe('Checkpoints removed from threads that were kept.'),
    memoryItemsDeleted: count.describe('Expired memory facts removed.'),
    sessionsDeleted: count.describe('Archive sessions deleted.'),
    objectsDeleted: count.describe(
      'Stored objects removed (records, values, pending writes, archive objects, snapshot parts, log days), each counted by the run that removed it.',
    ),
    bytesFreed: count,
    more: z.boolean().describe('Work is left for the next run.'),
    left: z
      .array(z.enum(['threads', 'sessions', 'snapshots', 'memory', 'interactions']))
      .describe('The parts with work left.'),
    error: z.string().optional().describe('What failed (the rest of the run went on).'),
  })
  .meta({ id: 'TenantPruneReport' });

export const PruneReport = z
  .object({
    startedAt: Timestamp,
    tenants: z.array(TenantPruneReport),
    complete: z.boolean().describe('False when a tenant has work left for the next run.'),
  })
  .meta({ id: 'PruneReport' });

const verifiedDomain = z.enum(['threads', 'sessions', 'snapshots']);

export const TenantVerifyReport = z
  .object({
    tenant: TenantId,
    ok: z.boolean(),
    findings: z
      .array(
        z.object({
          domain: verifiedDomain,
          kind: z.enum([
            'missing',
            'wrong_size',
            'wrong_hash',
            'dangling_latest',
            'dangling_head',
            'unreadable',
          ]),
          where: z.string(),
          key: z.string().describe('The stored item, as the storage names it within the domain.'),
          detail: z.string(),
        }),
      )
      .max(1000)
      .describe('The first 1,000 findings.'),
    findingCount: count,
    orphans: z
      .array(
        z.object({
          domain: verifiedDomain,
          key: z.string(),
          size: count,
          storedAt: Timestamp,
          collectable: z.boolean().describe('Older than the grace period: the next prune deletes it.'),
        }),
      )
      .max(1000)
      .describe('The first 1,000 stored items nothing references.'),
    orphanCount: count,
    collectableOrphans: count,
    checked: z
      .record(z.string(), count)
      .describe(
        'What was checked: threads, checkpoints, values, sessions, manifests, archiveObjects, snapshots, parts; hashed items and bytesHashed.',
      ),
    sampling: z.string().describe('How content was checked: every byte, or which sample.'),
    audit: z
      .looseObject({
        status: z.enum(['not_checked', 'ok', 'broken']),
        reason: z.string().optional(),
        records: count.optional(),
        firstBroken: z.number().int().min(1).optional(),
      })
      .describe('The audit chain: `not_checked` with the reason ("auditing off") while auditing is off.'),
  })
  .meta({ id: 'TenantVerifyReport' });

export const VerifyReport = z
  .object({
    ok: z.boolean().describe('No tenant has a finding, a collectable orphan or a broken audit chain.'),
    tenants: z.array(TenantVerifyReport),
  })
  .meta({ id: 'VerifyReport' });

export const TenantList = z
  .object({
    tenants: z.array(
      z.object({
        tenant: TenantId,
        domains: z
          .array(z.enum(['kv', 'threads', 'memory', 'sessions', 'snapshots']))
          .describe('Where the tenant stores data.'),
      }),
    ),
  })
  .meta({ id: 'TenantList' });

const ADMIN_WHAT = 'retention and verify';

export const retentionPolicyRoute = route({
  name: 'retentionPolicy',
  route: 'retention/policies/{tenant}',
  params: z.object({ tenant: TenantId.describe('The tenant.') }),
  operations: {
    GET: {
      operationId: 'getRetentionPolicy',
      summary: "A tenant's retention policy",
      description:
        "The tenant's override (null when none), the defaults from the CAIRN_RETENTION_* settings, and the policy in force. Route templates cannot start with `admin` on the Functions host, so the admin routes of retention live here.",
      tag: TAGS.retention,
      auth: 'admin',
      adminWhat: ADMIN_WHAT,
      answers: { 200: { description: 'The policy.', body: RetentionPolicyView } },
      errors: [400],
    },
    PUT: {
      operationId: 'setRetentionPolicy',
      summary: "Replace a tenant's retention override",
      description:
        'Replaces the override whole: fields not given take the defaults. 400 names the first field at fault (an unknown field included). Nothing is deleted until prune runs.',
      tag: TAGS.retention,
      auth: 'admin',
      adminWhat: ADMIN_WHAT,
      body: {
        kind: 'json',
        description: 'The override.',
        schema: RetentionPolicyOverride,
        limit: MAX_POLICY_BODY_BYTES,
        wholeField: 'policy',
      },
      answers: { 200: { description: 'The policy now.', body: RetentionPolicyView } },
      errors: [400],
    },
    DELETE: {
      operationId: 'clearRetentionPolicy',
      summary: "Remove a tenant's retention override",
      description: 'The tenant then follows the defaults.',
      tag: TAGS.retention,
      auth: 'admin',
      adminWhat: ADMIN_WHAT,
      answers: { 204: { description: 'Removed, or there was none.' } },
      errors: [400],
    },
  },
});

export const retentionPruneRoute = route({
  name: 'retentionPruneNow',
  route: 'retention/prune',
  operations: {
    POST: {
      operationId: 'pruneNow',
      summary: 'Run retention now',
      description:
        "One prune run, as the retentionPrune timer makes (safe while the timer runs too): for one tenant, or every tenant of the directory. Applies each tenant's policy, removes expired memory facts and collects what nothing kept references (older than an hour), within the run's budget (CAIRN_PRUNE_MAX_SECONDS, CAIRN_PRUNE_MAX_DELETES); `more` says when work is left for the next run.",
      tag: TAGS.retention,
      auth: 'admin',
      adminWhat: ADMIN_WHAT,
      body: {
        kind: 'json',
        description: 'The tenant to prune; empty or `{}` for every tenant.',
        schema: z.strictObject({ tenant: TenantId.optional() }),
        limit: MAX_PRUNE_BODY_BYTES,
        emptyIsObject: true,
      },
      answers: { 200: { description: "Each tenant's counts.", body: PruneReport } },
      errors: [400],
    },
  },
});

export const verifyRoute = route({
  name: 'verify',
  route: 'verify',
  operations: {
    GET: {
      operationId: 'verify',
      summary: 'Verify what is kept',
      description:
        'Read only. For one tenant, or every tenant of the directory: every thread head, session `latest` and snapshot `latest` names a stored checkpoint or manifest; every value and object they reference is stored with its size; content hashes for a sample, or for every byte with `readData=true`; orphans (stored items nothing references, `collectable` once older than the grace); the audit chain (not checked while auditing is off). `ok` is false on any finding, collectable orphan or broken chain.',
      tag: TAGS.retention,
      auth: 'admin',
      adminWhat: ADMIN_WHAT,
      query: z.object({
        tenant: TenantId.optional().describe('Only this tenant.'),
        readData: z
          .enum(['true', 'false'], { error: 'must be true or false' })
          .optional()
          .describe('Hash every byte (default false: a sample).'),
      }),
      answers: { 200: { description: 'The report.', body: VerifyReport } },
      errors: [400],
    },
  },
});

export const tenantsRoute = route({
  name: 'tenants',
  route: 'tenants',
  operations: {
    GET: {
      operationId: 'listTenants',
      summary: 'Every tenant that stored anything',
      description:
        'The tenant directory: each tenant and the parts it stores data in, as prune and verify walk it.',
      tag: TAGS.retention,
      auth: 'admin',
      adminWhat: ADMIN_WHAT,
      answers: { 200: { description: 'The tenants.', body: TenantList } },
    },
  },
});
