import { z } from 'zod';

import { jobIdParams, JobStarted, JobState, statusUriHeader } from './jobs.js';
import { route } from './spec.js';
import { TAGS } from './tags.js';

/** Re-sealing stored values with the first encryption key, as a durable job (docs/encryption.md). */

const count = z.number().int().min(0);

export const RewrapReport = z
  .object({
    firstKeyId: z.string().describe('The key every value is re-sealed with.'),
    tenants: count.describe('Tenants that stored sealed values.'),
    examined: count.describe('Sealed values looked at.'),
    resealed: count.describe('Values re-sealed with the first key.'),
    sealedWith: z
      .record(z.string(), count)
      .describe('Key id → values found sealed with it before the job re-sealed them.'),
    remaining: z
      .record(z.string(), count)
      .describe(
        'Every configured key id other than the first (and any other id found) → values still sealed with it. 0 for a key: it can be removed.',
      ),
    errors: z.array(z.tuple([z.string(), z.string()]).describe('[where, message]')),
  })
  .meta({ id: 'RewrapReport' });

export const RewrapStatus = z.object({
  id: z.string(),
  status: JobState,
  progress: z.object({ tenants: count.describe('Tenants finished.'), examined: count, resealed: count }),
  report: RewrapReport.nullable(),
  error: z.string().optional().describe('Why it failed; only when `status` is failed.'),
});

export const startRewrapRoute = route({
  name: 'startRewrap',
  route: 'encryption/rewraps',
  operations: {
    POST: {
      operationId: 'startRewrap',
      summary: 'Start re-sealing every stored sealed value with the first key',
      description:
        "Re-seals, with the first key of CAIRN_ENCRYPTION_KEYS, every value of every tenant that was sealed with another key: thread records, checkpoints, channel values, pending writes, memory facts (their ETags change), and the key/value values and session archives (objects, manifests, index data; re-sealed in place, same content) of the tenants CAIRN_ENCRYPT_TENANTS lists. Idempotent and resumable: running it again re-seals nothing twice. When the report's `remaining` is 0 for a key, that key can be removed. 501 `not_configured` naming CAIRN_ENCRYPTION_KEYS when encryption is off.",
      tag: TAGS.encryption,
      auth: 'admin',
      adminWhat: 'rewrap jobs',
      body: {
        kind: 'json',
        description: 'Nothing (an empty body or `{}`).',
        schema: z.strictObject({}),
        limit: 1024,
        emptyIsObject: true,
      },
      answers: { 202: { description: 'Started.', body: JobStarted, headers: statusUriHeader } },
      errors: [400, 501],
    },
  },
});

export const rewrapStatusRoute = route({
  name: 'rewrapStatus',
  route: 'encryption/rewraps/{id}',
  params: jobIdParams('job'),
  operations: {
    GET: {
      operationId: 'getRewrap',
      summary: "A rewrap job's status",
      tag: TAGS.encryption,
      auth: 'admin',
      adminWhat: 'rewrap jobs',
      answers: { 200: { description: 'The status; `report` once completed.', body: RewrapStatus } },
      errors: [404],
    },
  },
});
