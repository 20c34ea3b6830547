import { z } from 'zod';

import { canonicalJson } from '../canonicalJson';
import { InvalidArgumentError } from '../errors';
import { validateKey } from '../keys';
import { ID_RULE, isValidId, LATEST, MAX_DATA_BYTES, MAX_FILES_PER_CHECKPOINT } from './identifiers';

/**
 * Checkpoint manifests (docs/archives.md). A manifest is the commit point of a checkpoint: it is stored
 * immutably under `checkpoints/<checkpointId>` only after every object it references is stored.
 */

export interface ManifestFile {
  readonly path: string;
  readonly generation: string;
  readonly size: number;
  /** Lowercase hex SHA-256 of the whole file. */
  readonly sha256: string;
}

/** What a publisher sends. */
export interface PublishRequest {
  readonly checkpointId: string;
  readonly parent: string | null;
  readonly files: readonly ManifestFile[];
  readonly data: Record<string, unknown> | null;
}

/** What is stored and read back. */
export interface Manifest extends PublishRequest {
  /** RFC 3339 UTC, set when the manifest was first stored. */
  readonly createdAt: string;
}

const id = z.string({ error: ID_RULE }).refine(isValidId, ID_RULE);

const path = z
  .string({
    error:
      'must be a key: /-separated non-empty segments, no . or .. segment, no \\ or control characters, at most 1024 bytes',
  })
  .superRefine((value, context) => {
    try {
      validateKey(value, 'path');
    } catch (error) {
      context.addIssue({
        code: 'custom',
        message: error instanceof InvalidArgumentError ? error.message.replace(/^path: /, '') : 'is invalid',
      });
    }
  });

/** The SHA-256 of no bytes: the only hash a file of size 0 can have. */
const EMPTY_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

const manifestFile = z.strictObject({
  path,
  generation: id,
  size: z
    .number({ error: 'must be a whole number of bytes' })
    .int('must be a whole number of bytes')
    .min(0, 'must not be negative')
    .max(Number.MAX_SAFE_INTEGER, 'is too large'),
  sha256: z
    .string({ error: 'must be the hex SHA-256 of the whole file' })
    .regex(/^[0-9a-fA-F]{64}$/, 'must be the hex SHA-256 of the whole file (64 hex digits)')
    .transform((value) => value.toLowerCase()),
});

/**
 * The publish body: unknown fields are refused, every problem names its field (`files.3.size`).
 * Paths and generations are unique within a checkpoint; `data` is a JSON object of at most 16 KiB.
 */
export const publishRequestSchema: z.ZodType<PublishRequest> = z
  .strictObject({
    checkpointId: id.refine(
      (value) => value !== LATEST,
      `must not be "${LATEST}" (it names the latest checkpoint)`,
    ),
    parent: id.nullable().default(null),
    files: z
      .array(manifestFile, { error: 'must be an array of files' })
      .max(MAX_FILES_PER_CHECKPOINT, `must hold at most ${MAX_FILES_PER_CHECKPOINT} files`),
    data: z
      .record(z.string(), z.unknown(), { error: 'must be a JSON object' })
      .nullable()
      .default(null)
      .refine(
        (value) => value === null || Buffer.byteLength(JSON.stringify(value), 'utf8') <= MAX_DATA_BYTES,
        `must be at most ${MAX_DATA_BYTES} bytes of JSON`,
      ),
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
  });

/** Everything but `createdAt`, in a canonical form: equal iff two publishes are the same checkpoint. */
export function manifestIdentity(request: PublishRequest): string {
  return canonicalJson({
    checkpointId: request.checkpointId,
    parent: request.parent,
    files: request.files.map(({ path: filePath, generation, size, sha256 }) => ({
      path: filePath,
      generation,
      size,
      sha256: sha256.toLowerCase(),
    })),
    data: request.data,
  });
}

export function serializeManifest(manifest: Manifest): Buffer {
  const { checkpointId, parent, createdAt, files, data } = manifest;
  return Buffer.from(JSON.stringify({ checkpointId, parent, createdAt, files, data }), 'utf8');
}

export function deserializeManifest(bytes: Buffer): Manifest {
  return JSON.parse(bytes.toString('utf8')) as Manifest;
}
