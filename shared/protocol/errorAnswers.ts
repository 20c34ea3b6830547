import { z } from 'zod';

import type { ErrorCode } from './errors.js';
import { Etag, Id, REQUEST_ID_PATTERN } from './fields.js';
import { ReadinessChecks } from './service.js';
import { SnapshotId } from './snapshots.js';
import type { AnswerSpec, HeaderSpec } from './spec.js';

/**
 * The error answers of the API as data: the error JSON of each, `{"error": {"code", "message",
 * ...details}}`, as zod schemas, with the headers each carries. The OpenAPI document's
 * `#/components/responses` are generated from them (./openapi.ts), a route spec names them by
 * status or by name, and a client can parse an error body with {@link ErrorBody}.
 */

const message = z.string().min(1).describe('What went wrong and what to do.');

/** The error JSON with `codes` allowed and `details` inside the error object. */
export function errorBody<const D extends z.ZodRawShape = Record<never, never>>(
  codes: readonly [ErrorCode, ...ErrorCode[]],
  details?: D,
) {
  const [first, ...rest] = codes;
  const code = rest.length === 0 ? z.literal(first) : z.enum(codes);
  return z.strictObject({ error: z.strictObject({ code, message, ...(details ?? ({} as D)) }) });
}

/** Any error JSON Cairn answers: a known code, a message, and the details of that code. */
export const ErrorBody = z.object({
  error: z.looseObject({
    code: z.string().min(1),
    message: z.string(),
  }),
});

const retryAfterSeconds = z.int().min(1);

export const ThreadBusyErrorBody = errorBody(['thread_busy'], {
  runId: Id.describe('The run that holds the thread.'),
  retryAfter: retryAfterSeconds.describe(
    "Seconds until the holder's lease ends unless it is renewed; also sent as `Retry-After`.",
  ),
}).meta({ id: 'ThreadBusyError' });

export const RunFencedErrorBody = errorBody(['run_fenced'], {
  runId: Id.describe('The run the request named.'),
  status: z
    .enum(['interrupted', 'finished', 'failed', 'expired', 'unknown'])
    .describe('What is known of that run.'),
}).meta({ id: 'RunFencedError' });

/** `Retry-After` of a `thread_busy`: required when the answer is always one, else only with one. */
function threadBusyRetryAfter(optional: boolean): HeaderSpec {
  return {
    description: `Seconds until the holder's lease ends unless renewed (at least 1), as \`retryAfter\`${optional ? '; sent with `thread_busy` only' : ''}.`,
    schema: retryAfterSeconds,
    optional,
  };
}

const retryAfter = (description: string): HeaderSpec => ({ description, schema: z.int().min(0) });

const missingCount = z.int().min(1).describe('How many in all.');

/** The request id every answer carries (`#/components/headers/RequestId`). */
export const REQUEST_ID_HEADER: HeaderSpec = {
  description:
    "The request's id: the caller's `x-request-id` when it sent a valid one, otherwise a new one. Quote it when reporting a problem.",
  schema: z.string().regex(REQUEST_ID_PATTERN),
};

/** The caller's own request id (`#/components/parameters/RequestId`). */
export const REQUEST_ID_PARAMETER: HeaderSpec = {
  description: 'Your id for this request (1-128 characters of [A-Za-z0-9._:-]); the answer carries it back.',
  schema: z.string().regex(REQUEST_ID_PATTERN),
  optional: true,
};

/** Every error answer by its name in `#/components/responses`. */
export const ERROR_ANSWERS = {
  BadRequest: {
    description:
      '`invalid_argument`: a bad key, name, JSON body, header combination or limit; the message names the field.',
    body: errorBody(['invalid_argument']),
  },
  Unauthorized: {
    description: '`unauthorized`: the credential is missing, malformed, unknown or expired.',
    body: errorBody(['unauthorized']),
    headers: { 'WWW-Authenticate': { description: 'Always `Bearer`.', schema: z.literal('Bearer') } },
  },
  Forbidden: {
    description:
      '`forbidden`: authenticated but not allowed (an admin-only route, or a session owned by another tenant: `tenant mismatch`).',
    body: errorBody(['forbidden']),
  },
  NotFound: {
    description: "`not_found`: absent; another tenant's data answers exactly the same.",
    body: errorBody(['not_found']),
  },
  MethodNotAllowed: {
    description:
      '`method_not_allowed`: a known path with a method it does not list. Any operation may answer it.',
    body: errorBody(['method_not_allowed']),
    headers: {
      Allow: { description: 'The methods the path serves, comma-separated.', schema: z.string().min(1) },
    },
  },
  Conflict: {
    description: '`conflict`: the write conflicts with what is stored; the operation says when.',
    body: errorBody(['conflict'], {
      latest: z
        .string()
        .nullable()
        .optional()
        .describe('Publishing a checkpoint: the current latest checkpoint (null when none).'),
    }),
  },
  ThreadBusy: {
    description:
      '`thread_busy`: a live run holds the thread; `runId` names it, `retryAfter` (also `Retry-After`) says when its lease ends unless renewed. Nothing was written.',
    body: ThreadBusyErrorBody,
    headers: { 'Retry-After': threadBusyRetryAfter(false) },
  },
  RunFenced: {
    description:
      '`run_fenced`: the run named does not hold the thread (any more); `status` says what is known of it. Nothing was written.',
    body: RunFencedErrorBody,
  },
  ThreadBusyOrRunFenced: {
    description:
      '`thread_busy`: no `runId` was given while a live run holds the thread (`Retry-After` as `retryAfter`); `run_fenced`: the `runId` given is not the live holder. Nothing a reader can see was written.',
    body: z.xor([ThreadBusyErrorBody, RunFencedErrorBody]),
    headers: { 'Retry-After': threadBusyRetryAfter(true) },
  },
  ThreadWriteConflict: {
    description:
      '`conflict`: the checkpoint id is stored with other content, the parent is not stored in the namespace, or the thread was deleted and created again during the put; `base_mismatch`: a value sent as a delta does not resolve (its base is not stored in the thread and namespace, is shorter than `keep`, has another type tag, or the SHA-256 of the result is not `sha256`), `field` names the value, and the sender sends it whole; `thread_busy` / `run_fenced` as for the other writes. Nothing a reader can see was written.',
    body: z.xor([
      errorBody(['conflict']),
      errorBody(['base_mismatch'], { field: z.string().describe('The value, as `values.<channel>`.') }),
      ThreadBusyErrorBody,
      RunFencedErrorBody,
    ]),
    headers: { 'Retry-After': threadBusyRetryAfter(true) },
  },
  PreconditionFailed: {
    description: '`precondition_failed`: If-Match or If-None-Match not met; nothing was written.',
    body: errorBody(['precondition_failed']),
    headers: {
      ETag: { description: 'The current ETag, when the item exists.', schema: Etag, optional: true },
    },
  },
  PayloadTooLarge: {
    description:
      "`payload_too_large`: the body is over the operation's limit, whatever else is wrong with it; or what the operation would store is over the storage's value limit (the operation says when). Nothing was written that a reader can see.",
    body: errorBody(['payload_too_large'], { limit: z.int().min(0).describe('The limit in bytes.') }),
  },
  MissingObjects: {
    description:
      '`missing_objects`: the checkpoint references objects that are not stored, or not with the size it needs.',
    body: errorBody(['missing_objects'], {
      missing: z.array(z.string()).max(1000).describe('Their object keys (the first 1,000).'),
      missingCount,
    }),
  },
  SnapshotPublishConflict: {
    description:
      "`conflict`: the workspace's latest snapshot is not `parent` (nor this snapshot): `latest` names it (null: the workspace has none); nothing was written when the publish was told before writing, and the manifest stays stored as a snapshot that is not the latest when it lost the final compare-and-swap. Without `latest`: the snapshot is already stored with another signature, which it keeps.",
    body: errorBody(['conflict'], {
      latest: SnapshotId.nullable()
        .optional()
        .describe("The workspace's latest snapshot (null when it has none)."),
    }),
  },
  SnapshotMissingParts: {
    description:
      '`missing_objects`: parts the manifest references are not stored, or not with the size its files need; nothing was written.',
    body: errorBody(['missing_objects'], {
      missing: z
        .array(z.string().regex(new RegExp(String.raw`^[0-9a-f]{64}/(0|[1-9][0-9]{0,9})$`)))
        .max(1000)
        .describe('Their names, `<sha256>/<part>`, sorted (the first 1,000).'),
      missingCount,
    }),
  },
  InternalError: {
    description: '`internal` (a bug) or `integrity_error` (stored bytes failed their hash).',
    body: errorBody(['internal', 'integrity_error']),
  },
  NotConfigured: {
    description:
      '`not_configured`: this deployment does not configure the part of Cairn the route belongs to; `setting` names the setting an operator must set (the message says how). Retrying does not help until then; nothing was read or written.',
    body: errorBody(['not_configured'], {
      setting: z
        .string()
        .regex(/^CAIRN_[A-Z0-9_]+$/)
        .describe('The setting that turns the part on, e.g. CAIRN_TABLE_ENDPOINT or CAIRN_AUDIT.'),
    }),
  },
  NotReady: {
    description:
      "`storage_unavailable`: a configured store did not answer (`failed`) or not within the deadline (`timeout`); `checks` gives every store's outcome. Retry after `Retry-After`.",
    body: errorBody(['storage_unavailable'], { checks: ReadinessChecks }),
    headers: { 'Retry-After': retryAfter('Seconds to wait before probing again.') },
  },
  StorageUnavailable: {
    description:
      '`storage_unavailable`: the storage (or the token signing keys) failed or timed out; retry after `Retry-After`. Never reported as 404.',
    body: errorBody(['storage_unavailable']),
    headers: { 'Retry-After': retryAfter('Seconds to wait before retrying.') },
  },
} as const satisfies Record<string, AnswerSpec>;

export type ErrorAnswerName = keyof typeof ERROR_ANSWERS;
