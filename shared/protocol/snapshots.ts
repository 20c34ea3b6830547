import { z } from 'zod';

import { BASE64_PATTERN, KiB, MAX_OBJECT_BYTES, MiB, SHA256_HEX, TenantId, Timestamp } from './fields.js';
import { route } from './spec.js';
import { TAGS } from './tags.js';

/**
 * Signed workspace snapshots (docs/snapshots.md). Every route works in the caller's tenant. The
 * names of the path (workspace, snapshot, file hash, part) are checked by the snapshot store
 * (shared/snapshots/identifiers.ts) before any I/O, in the order it reads them; the schemas here
 * document them.
 */

/** The bytes of every part but a file's last; the last holds 1 to this many. */
export const PART_BYTES = MAX_OBJECT_BYTES;
/** A manifest is stored as one object. */
export const MAX_MANIFEST_BYTES = 2 * MiB;
/** A publish body: the manifest (at most 2 MiB) in base64, plus the signature and a few fields. */
export const MAX_PUBLISH_BODY_BYTES = Math.ceil(MAX_MANIFEST_BYTES / 3) * 4 + 16 * KiB;
/** The run-time trusted keys of a tenant, at most. */
export const MAX_RUNTIME_KEYS = 32;
export const MAX_KEYS_BODY_BYTES = 64 * KiB;
/** An Ed25519 signature's raw bytes. */
export const SIGNATURE_BYTES = 64;

const NOTE =
  "Everything lives in the caller's tenant: another tenant's snapshot, workspace or part answers as an absent one (404).";

const SHA256_PATTERN = SHA256_HEX.source;

export const WorkspaceId = z.string().meta({
  id: 'WorkspaceId',
  description: 'A workspace id: 1-128 characters of [A-Za-z0-9._-], not "." or "..".',
  pattern: String.raw`^(?!\.\.?$)[A-Za-z0-9._-]{1,128}$`,
});

export const SnapshotId = z.string().meta({
  id: 'SnapshotId',
  description: 'A snapshot id: the SHA-256 of the exact manifest bytes, 64 lowercase hex digits.',
  pattern: SHA256_PATTERN,
});

export const Sha256 = z.string().meta({
  id: 'Sha256',
  description: "A file's SHA-256: 64 lowercase hex digits.",
  pattern: SHA256_PATTERN,
});

export const SnapshotPublicKey = z.string().meta({
  id: 'SnapshotPublicKey',
  description: 'An Ed25519 public key: the base64 (standard alphabet, padded) of its 32 raw bytes.',
  pattern: String.raw`^[A-Za-z0-9+/]{43}=$`,
});

/** Bytes in base64 (standard alphabet, padded), decoded. */
const base64 = (what: string, description: string) =>
  z
    .string({ error: `must be ${what} in base64` })
    .refine(
      (value) => value.length % 4 === 0 && /^[A-Za-z0-9+/]*={0,2}$/.test(value),
      `must be ${what} in base64 (standard alphabet, padded)`,
    )
    .transform((value) => Buffer.from(value, 'base64'))
    .meta({ contentEncoding: 'base64', pattern: BASE64_PATTERN, description });

const base64Out = (description: string) =>
  z.string().meta({ contentEncoding: 'base64', pattern: BASE64_PATTERN, description });

export const publishSnapshotBody = z
  .strictObject({
    manifest: base64(
      'the exact manifest bytes',
      `The exact manifest bytes (canonical JSON, at most ${MAX_MANIFEST_BYTES} bytes), in base64; its \`workspaceId\` must be the route's.`,
    ),
    signature: base64(
      'the 64-byte Ed25519 signature of the manifest bytes',
      `The Ed25519 signature of the manifest bytes (${SIGNATURE_BYTES} bytes), in base64.`,
    ),
    parent: z
      .union([SnapshotId, z.null()], { error: 'must be the latest snapshot id, or null for the first' })
      .default(null)
      .describe("The snapshot the publisher saw as the workspace's latest; null (the default) for none yet."),
    allowExternalSymlinks: z
      .boolean({ error: 'must be true or false' })
      .default(false)
      .describe('Accept symlinks whose target leaves the workspace.'),
  })
  .meta({ id: 'PublishSnapshotRequest' });

const LIMIT_RULE = 'must be a whole number from 1 to 1000';

export const listSnapshotsQuery = z.object({
  limit: z.coerce
    .number({ error: LIMIT_RULE })
    .int(LIMIT_RULE)
    .min(1, LIMIT_RULE)
    .max(1000, LIMIT_RULE)
    .default(100)
    .describe('Snapshots per page.'),
  cursor: z.string().optional().describe('The `next` of the previous page (else 400).'),
});

export const trustedKeysBody = z.strictObject({
  keys: z
    .array(
      z.string({ error: 'must be a base64 public key' }).meta({
        description:
          'The base64 of a 32-byte raw Ed25519 public key (standard or URL alphabet, padding optional; what `cairn keygen` prints); else 400 `keys.<index>`.',
      }),
      { error: 'must be an array of base64 public keys' },
    )
    // The store refuses more (400 `keys`), after the keys themselves are checked.
    .meta({ maxItems: MAX_RUNTIME_KEYS }),
});

export const SnapshotPartStored = z
  .object({
    sha256: Sha256,
    part: z.number().int().min(0),
    size: z.number().int().min(1).max(PART_BYTES).describe('The bytes of the part.'),
  })
  .meta({ id: 'SnapshotPartStored' });

export const PublishedSnapshot = z
  .object({
    id: SnapshotId,
    latest: SnapshotId.describe("The workspace's latest snapshot: this one."),
  })
  .meta({ id: 'PublishedSnapshot' });

export const Snapshot = z
  .object({
    id: SnapshotId,
    workspaceId: WorkspaceId,
    manifest: base64Out(
      'The manifest bytes exactly as stored, in base64: check their SHA-256 against the id.',
    ),
    signature: base64Out('The signature as stored, in base64: check it with the public key of the signer.'),
  })
  .meta({ id: 'Snapshot' });

export const SnapshotPage = z
  .object({
    snapshots: z
      .array(
        z.object({
          id: SnapshotId,
          publishedAt: Timestamp.describe('When the manifest was stored (on Blob, to the second).'),
          manifestBytes: z.number().int().min(1).max(MAX_MANIFEST_BYTES),
        }),
      )
      .max(1000)
      .describe('Newest first by publish time; ties by id.'),
    latest: SnapshotId.nullable().describe("The workspace's latest snapshot; null when it has none."),
    next: z
      .string()
      .regex(/^[A-Za-z0-9_-]+$/)
      .nullable()
      .describe('Opaque; pass it as `cursor` for the next page. Null on the last page.'),
  })
  .meta({ id: 'SnapshotPage' });

export const SnapshotDeleteReport = z
  .object({
    id: SnapshotId,
    latest: SnapshotId.nullable().describe(
      "The workspace's latest snapshot after the delete; null when none is left.",
    ),
    objectsDeleted: z
      .number()
      .int()
      .min(0)
      .describe('Parts deleted: those no other manifest of the tenant references, stored over an hour ago.'),
    collectionComplete: z
      .boolean()
      .describe(
        'False when collecting the unreferenced parts failed (a storage fault): the snapshot is deleted, some of its parts wait for a later collection.',
      ),
  })
  .meta({ id: 'SnapshotDeleteReport' });

export const TrustedSnapshotKeys = z
  .object({
    tenant: TenantId,
    configured: z.array(SnapshotPublicKey).describe('From the setting CAIRN_SNAPSHOT_KEYS.'),
    runtime: z.array(SnapshotPublicKey).max(MAX_RUNTIME_KEYS).describe('Set by an admin at run time.'),
  })
  .meta({ id: 'TrustedSnapshotKeys' });

const workspaceIdParam = WorkspaceId.describe('The workspace id.');

export const workspaceSnapshotsRoute = route({
  name: 'workspaceSnapshots',
  route: 'workspaces/{workspaceId}/snapshots',
  params: z.object({ workspaceId: workspaceIdParam }),
  operations: {
    GET: {
      operationId: 'listSnapshots',
      summary: "List a workspace's snapshots",
      description: `Newest first by publish time. A workspace without snapshots lists none (200). ${NOTE}`,
      tag: TAGS.snapshots,
      auth: 'tenant',
      query: listSnapshotsQuery,
      answers: { 200: { description: 'One page of snapshots, and the latest.', body: SnapshotPage } },
      errors: [400],
    },
    POST: {
      operationId: 'publishSnapshot',
      summary: 'Publish a snapshot',
      description:
        "Checks, before writing anything: the manifest bytes are canonical and valid (paths, symlinks; 400 naming the field, `manifest.files.0.path`), its `workspaceId` is the route's, the signature verifies with one of the tenant's trusted keys when it has any (else 400 `signature`), `latest` is `parent` or this snapshot (else 409 with `latest`), and every part of every file is stored with its size (else 422). Then stores the id's workspace, the signature and the manifest (the snapshot exists from then on), and moves `latest` to it by compare-and-swap from `parent`. Publishing the same manifest and signature again stores nothing new and answers as the first time did; a publish that failed part-way is completed by sending it again. " +
        NOTE,
      tag: TAGS.snapshots,
      auth: 'tenant',
      body: {
        kind: 'json',
        description: 'The signed manifest and the parent it follows.',
        schema: publishSnapshotBody,
        limit: MAX_PUBLISH_BODY_BYTES,
      },
      answers: { 201: { description: 'Published; `latest` is the new snapshot.', body: PublishedSnapshot } },
      errors: [
        400,
        { status: 409, response: 'SnapshotPublishConflict' },
        { status: 422, response: 'SnapshotMissingParts' },
      ],
    },
  },
});

export const snapshotPartsRoute = route({
  name: 'snapshotParts',
  route: 'workspaces/{workspaceId}/snapshots/objects/{sha256}/{part}',
  params: z.object({
    workspaceId: workspaceIdParam,
    sha256: Sha256.describe('The SHA-256 of the file the part belongs to.'),
    part: z.string().meta({
      description: 'The part number: decimal, without leading zeros.',
      pattern: '^(0|[1-9][0-9]{0,9})$',
    }),
  }),
  operations: {
    GET: {
      operationId: 'getSnapshotPart',
      summary: 'Read a part of a file',
      description: NOTE,
      tag: TAGS.snapshots,
      auth: 'tenant',
      answers: { 200: { description: 'The bytes of the part.', body: 'bytes' } },
      errors: [400, 404],
    },
    HEAD: {
      operationId: 'headSnapshotPart',
      summary: "A part's stored size",
      description: `Answers carry no body, errors included. ${NOTE}`,
      tag: TAGS.snapshots,
      auth: 'tenant',
      answers: {
        200: {
          description: 'The part is stored.',
          headers: {
            'Content-Length': {
              description: 'The size of the part in bytes.',
              schema: z.number().int().min(1).max(PART_BYTES),
            },
          },
        },
        404: { description: 'The part is not stored.' },
      },
      errors: [400],
    },
    PUT: {
      operationId: 'putSnapshotPart',
      summary: 'Store a part of a file',
      description: `Part \`i\` holds the file's bytes [i·${PART_BYTES}, (i+1)·${PART_BYTES}); an empty file has no part. Parts are immutable and belong to the tenant, shared by all its workspaces (the workspace of the route is checked but does not scope them): the same bytes again are 200, other bytes 409 and the stored ones stay. A part under ${PART_BYTES} bytes at number 0 is a whole file, so its SHA-256 must be \`sha256\` (else 400). ${NOTE}`,
      tag: TAGS.snapshots,
      auth: 'tenant',
      body: {
        kind: 'bytes',
        description: `The bytes of the part: 1 to ${PART_BYTES} (an empty body is 400).`,
        limit: PART_BYTES,
      },
      answers: {
        200: { description: 'The same bytes were already stored.', body: SnapshotPartStored },
        201: { description: 'Stored.', body: SnapshotPartStored },
      },
      errors: [400, 409],
    },
  },
});

export const workspaceSnapshotRoute = route({
  name: 'workspaceSnapshot',
  route: 'workspaces/{workspaceId}/snapshots/{snapshotId}',
  params: z.object({
    workspaceId: workspaceIdParam,
    snapshotId: z.string().meta({
      description: 'A snapshot id, or `latest` for the latest (GET only).',
      pattern: '^(?:[0-9a-f]{64}|latest)$',
    }),
  }),
  operations: {
    GET: {
      operationId: 'getSnapshot',
      summary: 'Read a snapshot (or the latest)',
      description: `The manifest bytes and the signature exactly as stored: the client checks them (hash against the id, signature, paths). 409 only for \`latest\`, when it keeps moving while it is read. ${NOTE}`,
      tag: TAGS.snapshots,
      auth: 'tenant',
      answers: { 200: { description: 'The snapshot.', body: Snapshot } },
      errors: [400, 404, 409],
    },
    DELETE: {
      operationId: 'deleteSnapshot',
      summary: 'Delete a snapshot',
      description: `Moves \`latest\` off it first (to the newest remaining snapshot, or removes it), then deletes the manifest (the snapshot is gone from then on), its signature and its id's entry, then the parts no other manifest of the tenant references and that were stored over an hour ago. \`latest\` is refused (400): name the snapshot. 409 when the workspace keeps being published to while \`latest\` is moved, or, with the audit trail on, while the snapshot's publish is not yet recorded in it (its publisher stopped after storing the manifest; the trail's repair records it within minutes): delete again. ${NOTE}`,
      tag: TAGS.snapshots,
      auth: 'tenant',
      answers: { 200: { description: 'Deleted.', body: SnapshotDeleteReport } },
      errors: [400, 404, 409],
    },
  },
});

export const snapshotByIdRoute = route({
  name: 'snapshotById',
  route: 'snapshots/{snapshotId}',
  params: z.object({ snapshotId: SnapshotId.describe('A snapshot id (64 lowercase hex digits).') }),
  operations: {
    GET: {
      operationId: 'findSnapshot',
      summary: 'Read a snapshot by its id alone',
      description: `A snapshot of any of the caller's workspaces. ${NOTE}`,
      tag: TAGS.snapshots,
      auth: 'tenant',
      answers: { 200: { description: 'The snapshot.', body: Snapshot } },
      errors: [400, 404],
    },
  },
});

const TRUSTED_KEYS_NOTE =
  "A tenant's trusted keys are those of the setting CAIRN_SNAPSHOT_KEYS plus the run-time ones set here; when it has any, a publish must be signed by one of them. Run-time keys are read on every publish, so a change holds on every instance at once.";

const KEYS_ADMIN_WHAT = 'trusted snapshot keys';

export const snapshotKeysRoute = route({
  name: 'snapshotKeys',
  route: 'snapshot-keys/{tenant}',
  params: z.object({ tenant: TenantId.describe('The tenant.') }),
  operations: {
    GET: {
      operationId: 'getTrustedSnapshotKeys',
      summary: "A tenant's trusted snapshot keys",
      description: TRUSTED_KEYS_NOTE,
      tag: TAGS.snapshots,
      auth: 'admin',
      adminWhat: KEYS_ADMIN_WHAT,
      answers: { 200: { description: 'The keys.', body: TrustedSnapshotKeys } },
      errors: [400],
    },
    PUT: {
      operationId: 'setTrustedSnapshotKeys',
      summary: "Replace a tenant's run-time trusted snapshot keys",
      description: `Replaces the run-time list (duplicates dropped); the keys of the setting stay. ${TRUSTED_KEYS_NOTE}`,
      tag: TAGS.snapshots,
      auth: 'admin',
      adminWhat: KEYS_ADMIN_WHAT,
      body: {
        kind: 'json',
        description: 'The new run-time keys; an empty list clears them.',
        schema: trustedKeysBody,
        limit: MAX_KEYS_BODY_BYTES,
      },
      answers: { 200: { description: 'The keys now.', body: TrustedSnapshotKeys } },
      errors: [400],
    },
    DELETE: {
      operationId: 'clearTrustedSnapshotKeys',
      summary: "Remove a tenant's run-time trusted snapshot keys",
      description: `The keys of the setting stay. ${TRUSTED_KEYS_NOTE}`,
      tag: TAGS.snapshots,
      auth: 'admin',
      adminWhat: KEYS_ADMIN_WHAT,
      answers: { 204: { description: 'Removed, or there were none.' } },
      errors: [400],
    },
  },
});
