import type {
  PublishedSnapshot as PublishedSnapshotSchema,
  SnapshotPartStored,
} from '@cairn-state/protocol/snapshots';
import type { z } from 'zod';

import type { Wire } from '../wire.js';

/**
 * The snapshot routes' types as the client sends and reads them: the answers' from the route
 * specs, the manifest and signature as bytes (base64 on the wire).
 */

export interface StoredSnapshot {
  readonly id: string;
  readonly workspaceId: string;
  /** The exact manifest bytes. */
  readonly manifest: Buffer;
  /** Their Ed25519 signature, 64 raw bytes. */
  readonly signature: Buffer;
}

export interface PublishSnapshotRequest {
  /** The exact manifest bytes (canonical JSON). */
  readonly manifest: Buffer;
  /** Ed25519 over the manifest bytes, 64 raw bytes. */
  readonly signature: Buffer;
  /** The snapshot the workspace's `latest` must still name; null for the workspace's first. */
  readonly parent: string | null;
  /** Accept symlinks whose target leaves the workspace (default false). */
  readonly allowExternalSymlinks?: boolean;
}

/** A published snapshot's id, and the workspace's latest: this one. */
export type PublishedSnapshot = Wire<z.output<typeof PublishedSnapshotSchema>>;

export type PartStored = Wire<z.output<typeof SnapshotPartStored>> & {
  /** False when the same bytes were stored already (the answer was 200, not 201). */
  readonly created: boolean;
};

/** The snapshot routes that save, load and verify call (the snapshots client implements them). */
export interface SnapshotRoutes {
  /** Requests sent so far, retries included. */
  readonly requestCount: number;
  putPart(workspaceId: string, sha256: string, part: number, bytes: Uint8Array): Promise<PartStored>;
  getPart(workspaceId: string, sha256: string, part: number): Promise<Buffer | null>;
  headPart(workspaceId: string, sha256: string, part: number): Promise<number | null>;
  publish(workspaceId: string, request: PublishSnapshotRequest): Promise<PublishedSnapshot>;
  read(workspaceId: string, idOrLatest: string): Promise<StoredSnapshot | null>;
  find(id: string): Promise<StoredSnapshot | null>;
}
