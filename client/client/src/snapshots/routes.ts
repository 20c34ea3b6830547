/** The wire types of the snapshot routes the client sends and reads. */

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

export interface PublishedSnapshot {
  readonly id: string;
  /** The workspace's latest snapshot: this one. */
  readonly latest: string;
}

export interface PartStored {
  readonly sha256: string;
  readonly part: number;
  readonly size: number;
  /** False when the same bytes were stored already. */
  readonly created: boolean;
}

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
