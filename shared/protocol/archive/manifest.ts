import { type z } from 'zod';

import { canonicalJson } from '../canonicalJson.js';
import { PublishRequest } from '../sessions.js';

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

/**
 * The publish body (shared/protocol/sessions.ts): unknown fields are refused, every problem names
 * its field (`files.3.size`); paths and generations are unique within a checkpoint.
 */
export const publishRequestSchema: z.ZodType<PublishRequest> = PublishRequest;

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
