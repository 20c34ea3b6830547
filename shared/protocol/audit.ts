import { z } from 'zod';

import { isName, NAME_RULE, SHA256_HEX } from './fields.js';
import { route } from './spec.js';
import { TAGS } from './tags.js';

/**
 * The audit trail's routes (docs/audit.md): the caller's tenant's records, verification of the
 * hash chain, the signed heads. With CAIRN_AUDIT off every route answers 501 `not_configured`
 * naming the setting, before its query is read.
 */

const LIMIT_RULE = 'must be a whole number from 1 to 1000';
const SEQ_RULE = 'must be a whole number, 0 or more';

const seq = (description: string) =>
  z.coerce
    .number({ error: SEQ_RULE })
    .int(SEQ_RULE)
    .min(0, SEQ_RULE)
    .max(Number.MAX_SAFE_INTEGER, SEQ_RULE)
    .default(0)
    .describe(description);
const limit = z.coerce
  .number({ error: LIMIT_RULE })
  .int(LIMIT_RULE)
  .min(1, LIMIT_RULE)
  .max(1000, LIMIT_RULE)
  .default(100)
  .describe('At most this many, 1-1000.');

const hex64 = z.string().regex(SHA256_HEX);

export const AuditRecord = z
  .object({
    seq: z.number().int().min(1).describe('1, 2, 3, … without gaps.'),
    atMs: z.number().int().describe('When the record was appended (Unix ms).'),
    action: z.string().describe('`<area>.<verb>`, e.g. `run.started`.'),
    actor: z.string().optional().describe('The credential that asked: the token subject, or the tenant id.'),
    threadId: z.string().optional(),
    runId: z.string().optional(),
    subject: z.string().optional().describe('What the action was about (a checkpoint id, a job id, …).'),
    outcome: z.string().describe('`ok`, or an error code.'),
    details: z
      .record(z.string(), z.union([z.string(), z.number(), z.boolean(), z.null()]))
      .optional()
      .describe('Ids, names, codes and counts.'),
    eventId: z.string().describe('The event recorded: an event is recorded at most once.'),
    prevHash: hex64,
    hash: hex64,
  })
  .meta({
    id: 'AuditRecord',
    description:
      "One record of the audit trail. `hash` = SHA-256 hex of `prevHash` followed by the canonical JSON (RFC 8785) of the record without `hash`; the first record's `prevHash` is 64 zeros.",
  });

export const SignedHead = z
  .object({
    tenant: z.string(),
    seq: z.number().int().min(1),
    hash: hex64,
    signedAtMs: z.number().int(),
    prevSeq: z.number().int().min(0).optional().describe('The seq of the signed head this one extends.'),
    prevHash: hex64.optional().describe("That head's hash."),
    keyId: z.string().regex(/^[0-9a-f]{16}$/),
    signature: z.string(),
  })
  .meta({
    id: 'SignedHead',
    description:
      'An Ed25519 signature (base64) of the canonical JSON of `{hash, prevHash, prevSeq, seq, signedAtMs, tenant}` (without `prevHash` and `prevSeq` for a head signed before they existed), by the key whose id is `keyId` (first 16 hex digits of the SHA-256 of its SPKI DER). `prevSeq` and `prevHash` name the signed head of the key this one extends (0 and 64 zeros for its first head of the tenant).',
  });

const nextSeq = z
  .number()
  .int()
  .min(1)
  .nullable()
  .describe('Pass as `afterSeq` for the next page; null on the last page.');

export const AuditRecordPage = z.object({ records: z.array(AuditRecord), next: nextSeq });
export const SignedHeadPage = z.object({ heads: z.array(SignedHead), next: nextSeq });

export const AuditVerifyResult = z.object({
  ok: z.boolean(),
  problems: z.array(z.string()).describe('What does not hold, in words; empty when `ok`.'),
  notSigned: z
    .string()
    .optional()
    .describe(
      'With CAIRN_AUDIT_SIGNING_KEY: why the head was not signed (the chain or a signed head does not hold).',
    ),
  records: z.number().int().min(0).describe('Records checked.'),
  firstBroken: z.number().int().min(1).nullable(),
  head: z
    .tuple([z.number().int().min(0), hex64])
    .describe("The last record's [seq, hash]; [0, 64 zeros] for an empty trail."),
  signedHead: SignedHead.optional(),
});

const OFF = '501 `not_configured` naming CAIRN_AUDIT when the audit trail is off.';

export const auditRecordsRoute = route({
  name: 'auditRecords',
  route: 'audit/records',
  operations: {
    GET: {
      operationId: 'listAuditRecords',
      summary: "The tenant's audit records, oldest first",
      description: `Filtered by thread and action, paged with \`afterSeq\`. ${OFF}`,
      tag: TAGS.audit,
      auth: 'tenant',
      query: z.object({
        threadId: z
          .string()
          .refine(isName, NAME_RULE)
          .optional()
          .meta({ description: "Only this thread's records.", pattern: '^[A-Za-z0-9._-]{1,128}$' }),
        action: z
          .string()
          .regex(/^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$/, 'must be an action such as run.started')
          .optional()
          .describe('Only records of this action, e.g. `run.started`.'),
        afterSeq: seq('Only records after this seq (the `next` of a page).'),
        limit,
      }),
      answers: { 200: { description: 'A page of records.', body: AuditRecordPage } },
      errors: [400, 501],
    },
  },
});

export const auditVerifyRoute = route({
  name: 'auditVerify',
  route: 'audit/verify',
  operations: {
    GET: {
      operationId: 'verifyAuditTrail',
      summary: "Checks the tenant's hash chain",
      description: `\`firstBroken\` is the first record whose fields, link or place is wrong (a changed field, a deleted record, records reordered), or, against a signed head of CAIRN_AUDIT_SIGNING_KEY's key or an expected head kept elsewhere, the first missing seq of a cut tail or the head's seq when its hash differs (a rewritten chain), or the seq of a signed head that does not hold (its signature does not verify, or it was removed from before a head that extends it); \`problems\` says what, in words. With CAIRN_AUDIT_SIGNING_KEY the head found is signed and kept (\`signedHead\`, naming the key's last signed head it extends) only when \`ok\`; otherwise \`notSigned\` says why (a head already signed by the key is answered, not signed again). A trail rebuilt after every signed head was removed verifies: only a head kept elsewhere catches it. ${OFF}`,
      tag: TAGS.audit,
      auth: 'tenant',
      query: z.object({
        expectedSeq: z.coerce
          .number({ error: 'must be a whole number from 1' })
          .int()
          .min(1)
          .optional()
          .describe('A head kept elsewhere: its seq (with expectedHash).'),
        expectedHash: z
          .string()
          .regex(SHA256_HEX, 'must be 64 lowercase hex digits')
          .optional()
          .describe('A head kept elsewhere: its hash (with expectedSeq).'),
      }),
      answers: { 200: { description: 'The result.', body: AuditVerifyResult } },
      errors: [400, 501],
    },
  },
});

export const auditHeadsRoute = route({
  name: 'auditHeads',
  route: 'audit/heads',
  operations: {
    GET: {
      operationId: 'listSignedAuditHeads',
      summary: "The tenant's signed heads, by seq",
      description: `Heads signed on verify and by the auditHeadSign timer when the trail verifies, one per seq, each naming the signed head it extends. \`cairn audit verify --public-key\` checks a trail against them (and against heads kept elsewhere with \`--heads\`). ${OFF}`,
      tag: TAGS.audit,
      auth: 'tenant',
      query: z.object({ afterSeq: seq('Only heads after this seq.'), limit }),
      answers: { 200: { description: 'A page of signed heads.', body: SignedHeadPage } },
      errors: [400, 501],
    },
  },
});
