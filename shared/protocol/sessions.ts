import { z } from 'zod';

import { Id, isName, Key, KiB, MAX_OBJECT_BYTES, NAME_RULE, ruledString, Timestamp } from './fields.js';
import { route } from './spec.js';
import { TAGS } from './tags.js';
import { utf8Length } from './text.js';

/**
 * Session archives (docs/archives.md). Every route works for the caller's tenant: a session
 * belongs to the tenant that first wrote to it; another tenant's write is 403 `tenant mismatch`,
 * its read 404. Session ids, generations and checkpoint ids are {@link Id}s; object keys inside a
 * session are `blocks/<generation>/<index>` and `tails/<checkpointId>/<generation>`.
 */

/** A full block: files are split into blocks of exactly this size. */
export const BLOCK_BYTES = 64 * KiB;
/** The most files one checkpoint may hold. */
export const MAX_FILES_PER_CHECKPOINT = 128;
/** The largest `data` of a checkpoint, as UTF-8 JSON. */
export const MAX_DATA_BYTES = 16 * KiB;
/** A publish body: up to 128 files with paths of up to 1 KiB, plus 16 KiB of `data`. */
export const MAX_PUBLISH_BODY_BYTES = 512 * KiB;
/** `latest` names the latest checkpoint in routes, so it cannot be a checkpoint id. */
export const LATEST = 'latest';

export const OBJECT_KEY_RULE =
  'must be blocks/<generation>/<index> or tails/<checkpointId>/<generation>, ids of [A-Za-z0-9._-], the index a decimal number without leading zeros';

/** Why `key` is not the key of an object of a session (a block or a tail), or null when it is. */
export function objectKeyProblem(key: string): string | null {
  const [kind, first = '', second = '', ...rest] = key.split('/');
  if (rest.length > 0 || !isName(first) || !isName(second)) return OBJECT_KEY_RULE;
  if (kind === 'blocks') return /^(0|[1-9][0-9]{0,14})$/.test(second) ? null : OBJECT_KEY_RULE;
  return kind === 'tails' ? null : OBJECT_KEY_RULE;
}

const NOTE =
  "A session id belongs to the tenant that first writes to it: another tenant's write is 403 `tenant mismatch`, its read 404. Without the session index configured (CAIRN_TABLE_ENDPOINT) these routes answer 501 `not_configured` naming it. For a tenant CAIRN_ENCRYPT_TENANTS lists, objects, manifests and the index's `data` are sealed at rest (sizes and answers unchanged); stored bytes that do not open answer 500 `integrity_error`, never 404.";

const ID_SEGMENT = String.raw`(?!\.\.?/)[A-Za-z0-9._-]{1,128}`;
const ID_LAST_SEGMENT = String.raw`(?!\.\.?$)[A-Za-z0-9._-]{1,128}`;

export const ObjectKey = ruledString(objectKeyProblem).meta({
  id: 'ObjectKey',
  description:
    `blocks/<generation>/<index> (exactly ${BLOCK_BYTES} bytes) or tails/<checkpointId>/<generation> ` +
    `(1-${BLOCK_BYTES - 1} bytes); <index> is a decimal number without leading zeros.`,
  pattern: `^(?:blocks/${ID_SEGMENT}/(?:0|[1-9][0-9]{0,14})|tails/${ID_SEGMENT}/${ID_LAST_SEGMENT})$`,
});

/** The SHA-256 of no bytes: the only hash a file of size 0 can have. */
const EMPTY_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

const SHA256_RULE = 'must be the hex SHA-256 of the whole file';

export const ManifestFile = z
  .strictObject({
    path: Key,
    generation: Id,
    size: z
      .number({ error: 'must be a whole number of bytes' })
      .int('must be a whole number of bytes')
      .min(0, 'must not be negative')
      .max(Number.MAX_SAFE_INTEGER, 'is too large'),
    sha256: z
      .string({ error: SHA256_RULE })
      .regex(/^[0-9a-fA-F]{64}$/, `${SHA256_RULE} (64 hex digits)`)
      .toLowerCase()
      .meta({
        description:
          'Hex SHA-256 of the whole file; for a file of size 0 it must be the hash of no bytes, e3b0c442…b855 (else 400).',
      }),
  })
  .meta({
    id: 'ManifestFile',
    description:
      `A file of \`size\` bytes is blocks 0 … floor(size/${BLOCK_BYTES})-1 of its generation and, when ` +
      `size % ${BLOCK_BYTES} > 0, the tail tails/<checkpointId>/<generation> of that length.`,
  });

export const CheckpointData = z
  .record(z.string(), z.unknown(), { error: 'must be a JSON object' })
  .nullable()
  .refine(
    (value) => value === null || utf8Length(JSON.stringify(value)) <= MAX_DATA_BYTES,
    `must be at most ${MAX_DATA_BYTES} bytes of JSON`,
  )
  .meta({
    id: 'CheckpointData',
    description: `Any JSON object of at most ${MAX_DATA_BYTES} bytes, or null.`,
  });

/**
 * The publish body: unknown fields are refused, every problem names its field (`files.3.size`).
 * Paths and generations are unique within a checkpoint; `data` is a JSON object of at most 16 KiB.
 */
export const PublishRequest = z
  .strictObject({
    checkpointId: Id.refine(
      (value) => value !== LATEST,
      `must not be "${LATEST}" (it names the latest checkpoint)`,
    ).meta({ not: { const: LATEST } }),
    parent: Id.nullable()
      .default(null)
      .describe('The checkpoint this one follows; null (the default) for the first.'),
    files: z
      .array(ManifestFile, { error: 'must be an array of files' })
      .max(MAX_FILES_PER_CHECKPOINT, `must hold at most ${MAX_FILES_PER_CHECKPOINT} files`)
      .describe('Paths and generations are unique within a checkpoint.'),
    data: CheckpointData.default(null),
  })
  .superRefine((request, context) => {
    const paths = new Set<string>();
    const generations = new Set<string>();
    for (const [index, file] of request.files.entries()) {
      if (paths.has(file.path)) {
        context.addIssue({ code: 'custom', path: ['files', index, 'path'], message: 'is listed twice' });
      }
      if (generations.has(file.generation)) {
        context.addIssue({
          code: 'custom',
          path: ['files', index, 'generation'],
          message: 'is used by another file of this checkpoint',
        });
      }
      // No object holds an empty file, so nothing checks its hash at publish; a wrong one would make
      // the file unreadable (500 integrity_error on restore). It can only be one value.
      if (file.size === 0 && file.sha256 !== EMPTY_SHA256) {
        context.addIssue({
          code: 'custom',
          path: ['files', index, 'sha256'],
          message: `must be ${EMPTY_SHA256} (the SHA-256 of no bytes) for a file of size 0`,
        });
      }
      paths.add(file.path);
      generations.add(file.generation);
    }
  })
  .meta({ id: 'PublishRequest' });

export const ObjectStored = z
  .object({ key: z.string(), size: z.number().int().min(1) })
  .strict()
  .meta({ id: 'ObjectStored' });

export const Published = z.strictObject({ checkpointId: Id, latest: Id }).meta({ id: 'Published' });

export const Manifest = z
  .strictObject({
    checkpointId: Id,
    parent: Id.nullable(),
    createdAt: Timestamp,
    files: z.array(ManifestFile),
    data: CheckpointData,
  })
  .meta({ id: 'Manifest' });

export const Session = z
  .strictObject({
    id: Id,
    checkpointId: Id.describe('The latest checkpoint the index knows of.'),
    updatedAt: Timestamp,
    data: CheckpointData,
  })
  .meta({ id: 'Session' });

export const SessionPage = z
  .strictObject({
    sessions: z.array(Session),
    next: Id.nullable().describe(
      'The last id of this page when more follow (pass it as `after`), else null.',
    ),
  })
  .meta({ id: 'SessionPage' });

const LIMIT_RULE = 'must be a whole number from 1 to 1000';

export const sessionListQuery = z.object({
  after: z
    .string()
    .regex(/^[A-Za-z0-9._-]{0,128}$/, NAME_RULE)
    .optional()
    .describe('Sessions with an id greater than this one.'),
  limit: z.coerce
    .number({ error: LIMIT_RULE })
    .int(LIMIT_RULE)
    .min(1, LIMIT_RULE)
    .max(1000, LIMIT_RULE)
    .default(100)
    .describe('Sessions per page.'),
});

const sid = Id.describe('The session id.');
/** `latest` is in the alphabet of ids, so a checkpoint id or `latest` is an {@link Id}. */
const cid = Id.describe('A checkpoint id, or `latest` for the latest checkpoint.');

/** The fields a refused path parameter names: those of the domain's messages. */
const SESSION_FIELDS = { sid: 'sessionId', cid: 'checkpointId' } as const;

export const sessionListRoute = route({
  name: 'sessionList',
  route: 'sessions',
  operations: {
    GET: {
      operationId: 'listSessions',
      summary: "List the caller's sessions",
      description: `Ascending by id. ${NOTE}`,
      tag: TAGS.sessions,
      auth: 'tenant',
      query: sessionListQuery,
      answers: { 200: { description: 'One page of sessions.', body: SessionPage } },
      errors: [400, 501],
    },
  },
});

export const sessionRoute = route({
  name: 'session',
  route: 'sessions/{sid}',
  params: z.object({ sid }),
  paramFields: SESSION_FIELDS,
  operations: {
    GET: {
      operationId: 'getSession',
      summary: "A session's index record",
      description: NOTE,
      tag: TAGS.sessions,
      auth: 'tenant',
      answers: { 200: { description: 'The record.', body: Session } },
      errors: [400, 404, 501],
    },
  },
});

export const sessionObjectRoute = route({
  name: 'sessionObject',
  route: 'sessions/{sid}/objects/{*objectKey}',
  params: z.object({ sid, objectKey: ObjectKey.describe('The object key, the rest of the path.') }),
  paramFields: SESSION_FIELDS,
  operations: {
    PUT: {
      operationId: 'putSessionObject',
      summary: 'Store a block or a tail',
      description: `Objects are immutable. ${NOTE}`,
      tag: TAGS.sessions,
      auth: 'tenant',
      body: {
        kind: 'bytes',
        description: `The bytes: a block exactly ${BLOCK_BYTES}, a tail 1-${BLOCK_BYTES - 1} (else 400).`,
        limit: MAX_OBJECT_BYTES,
      },
      answers: {
        200: { description: 'The same bytes were already stored.', body: ObjectStored },
        201: { description: 'Stored.', body: ObjectStored },
      },
      errors: [400, 403, 409, 501],
    },
    GET: {
      operationId: 'getSessionObject',
      summary: 'Read a block or a tail',
      description: NOTE,
      tag: TAGS.sessions,
      auth: 'tenant',
      answers: { 200: { description: 'The bytes.', body: 'bytes' } },
      errors: [400, 404, 501],
    },
  },
});

export const sessionCheckpointsRoute = route({
  name: 'sessionCheckpoints',
  route: 'sessions/{sid}/checkpoints',
  params: z.object({ sid }),
  paramFields: SESSION_FIELDS,
  operations: {
    POST: {
      operationId: 'publishCheckpoint',
      summary: 'Publish a checkpoint',
      description:
        'Every referenced object must be stored with the size the files need (else 422). The manifest is stored immutably: publishing the same checkpoint again answers as the first time did; a different manifest under an existing checkpoint id is 409. `latest` then moves to `checkpointId` only if it equals `parent` (null: no checkpoint yet), otherwise 409 with `latest` in the error. ' +
        NOTE,
      tag: TAGS.sessions,
      auth: 'tenant',
      body: {
        kind: 'json',
        description: `The manifest: at most ${MAX_FILES_PER_CHECKPOINT} files.`,
        schema: PublishRequest,
        limit: MAX_PUBLISH_BODY_BYTES,
      },
      answers: { 201: { description: 'Published; `latest` is the new checkpoint.', body: Published } },
      errors: [400, 403, 409, 422, 501],
    },
  },
});

export const sessionCheckpointRoute = route({
  name: 'sessionCheckpoint',
  route: 'sessions/{sid}/checkpoints/{cid}',
  params: z.object({ sid, cid }),
  paramFields: SESSION_FIELDS,
  operations: {
    GET: {
      operationId: 'getCheckpoint',
      summary: "A checkpoint's manifest",
      description: NOTE,
      tag: TAGS.sessions,
      auth: 'tenant',
      answers: { 200: { description: 'The manifest.', body: Manifest } },
      errors: [400, 404, 501],
    },
  },
});

export const sessionFileRoute = route({
  name: 'sessionFile',
  route: 'sessions/{sid}/checkpoints/{cid}/files/{*path}',
  params: z.object({
    sid,
    cid,
    path: Key.describe("The file's path in the manifest, the rest of the path."),
  }),
  paramFields: SESSION_FIELDS,
  operations: {
    GET: {
      operationId: 'getCheckpointFile',
      summary: "A checkpoint file's bytes",
      description:
        "Streamed and checked against the manifest's `sha256`: a mismatch is a 500 `integrity_error` (for a large file, whose answer has started, the connection is cut before the last bytes). " +
        NOTE,
      tag: TAGS.sessions,
      auth: 'tenant',
      answers: {
        200: {
          description: "The file's bytes.",
          body: 'bytes',
          headers: {
            'Content-Length': {
              description: 'The size of the file.',
              schema: z.number().int().min(0),
            },
            'Repr-Digest': {
              description: 'RFC 9530: `sha-256=:<base64 of the SHA-256>:`.',
              schema: z.string().regex(/^sha-256=:[A-Za-z0-9+/]{43}=:$/),
            },
          },
        },
      },
      errors: [400, 404, 501],
    },
  },
});
