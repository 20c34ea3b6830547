import type {
  Snapshot,
  SnapshotDeleteReport as SnapshotDeleteReportSchema,
  SnapshotPage as SnapshotPageSchema,
  TrustedSnapshotKeys as TrustedSnapshotKeysSchema,
} from '@cairn-state/protocol/snapshots';
import {
  LATEST,
  validateSha256,
  validateSnapshotId,
  validateWorkspaceId,
} from '@cairn-state/protocol/snapshots/identifiers';
import type { z } from 'zod';

import { MissingPartsError, StaleParentError } from './snapshots/errors.js';
import { type LoadOptions, type LoadReport, loadSnapshot } from './snapshots/load.js';
import type {
  PartStored,
  PublishedSnapshot,
  PublishSnapshotRequest,
  SnapshotRoutes,
  StoredSnapshot,
} from './snapshots/routes.js';
import { type SaveOptions, type SaveReport, saveSnapshot } from './snapshots/save.js';
import { type VerifyOptions, type VerifyReport, verifySnapshot } from './snapshots/verify.js';
import { failure, type HttpReply, readJson, segment, Transport, type TransportOptions } from './transport.js';
import type { Wire } from './wire.js';

/**
 * Signed workspace snapshots (docs/snapshots.md): `save` a folder as a signed snapshot, `load` one
 * into a folder after checking its hash, signature and paths, `verify` a stored one; and one method
 * per snapshot route below them.
 *
 * Absence is an answer, not an error: `read`, `find`, `getPart` and `headPart` resolve null when
 * there is nothing. A publish that another publisher overtook throws {@link StaleParentError}; one
 * whose parts are not all stored throws {@link MissingPartsError}; everything else the service
 * refuses is a `CairnHttpError`.
 *
 * Retries (the transport's rule): part uploads, reads and deletes are idempotent, and so is a
 * publish (marked so): publishing the same manifest bytes with the same signature again stores
 * nothing new and answers as the first time did. A delete retried after its answer was lost can
 * answer 404 `not_found` although its first attempt deleted the snapshot.
 */

export type {
  PartStored,
  PublishedSnapshot,
  PublishSnapshotRequest,
  StoredSnapshot,
} from './snapshots/routes.js';

/** A page of a workspace's snapshots, newest first, with its latest. */
export type SnapshotPage = Wire<z.output<typeof SnapshotPageSchema>>;

/** A snapshot as a page lists it: its id, when it was published, the size of its manifest. */
export type SnapshotSummary = SnapshotPage['snapshots'][number];

export interface SnapshotList {
  /** Every snapshot of the workspace, newest first. */
  readonly snapshots: readonly SnapshotSummary[];
  readonly latest: string | null;
}

/** What a delete did: the workspace's latest after it, and the parts collected with it. */
export type SnapshotDeleteReport = Wire<z.output<typeof SnapshotDeleteReportSchema>>;

/** A tenant's trusted signing keys: those of the setting and those set at run time. */
export type TrustedSnapshotKeys = Wire<z.output<typeof TrustedSnapshotKeysSchema>>;

export class SnapshotsClient implements SnapshotRoutes {
  private readonly transport: Transport;

  constructor(options: TransportOptions) {
    this.transport = new Transport(options);
  }

  /** Requests sent so far by this client, retries included. */
  get requestCount(): number {
    return this.transport.counts.requests;
  }

  /**
   * Saves the folder `dir` as a new signed snapshot of the workspace, on its latest one: uploads
   * only the parts the latest snapshot lacks, then publishes the signed manifest.
   */
  save(dir: string, options: SaveOptions): Promise<SaveReport> {
    return saveSnapshot(this, dir, options);
  }

  /** Loads snapshot `id` into `dir` (absent or empty), all or nothing, after checking it. */
  load(id: string, dir: string, options: LoadOptions): Promise<LoadReport> {
    return loadSnapshot(this, id, dir, options);
  }

  /** Checks a stored snapshot: manifest, signature, and that every part is stored (or reads them all). */
  verify(id: string, options: VerifyOptions): Promise<VerifyReport> {
    return verifySnapshot(this, id, options);
  }

  /** Uploads one part of a file (1 byte to 2 MiB); a part already stored with the same bytes is `created: false`. */
  async putPart(workspaceId: string, sha256: string, part: number, bytes: Uint8Array): Promise<PartStored> {
    const reply = await this.transport.call('PUT', partPath(workspaceId, sha256, part), { body: bytes });
    const stored = await readJson<Omit<PartStored, 'created'>>(reply, 200, 201);
    return { ...stored, created: reply.status === 201 };
  }

  /** The bytes of one part; null when it is not stored. */
  async getPart(workspaceId: string, sha256: string, part: number): Promise<Buffer | null> {
    const reply = await this.transport.call('GET', partPath(workspaceId, sha256, part));
    if (reply.status === 404) return null;
    if (reply.status !== 200) throw await failure(reply);
    return reply.bytes();
  }

  /** The stored size of one part; null when it is not stored. */
  async headPart(workspaceId: string, sha256: string, part: number): Promise<number | null> {
    const reply = await this.transport.call('HEAD', partPath(workspaceId, sha256, part));
    if (reply.status === 404) return null;
    if (reply.status !== 200) throw await failure(reply);
    return Number(reply.header('content-length'));
  }

  /**
   * Publishes a signed manifest whose parts are stored; `latest` moves to it only from `parent`.
   * Throws {@link StaleParentError} when `latest` is another snapshot, {@link MissingPartsError}
   * when parts are missing.
   */
  async publish(workspaceId: string, request: PublishSnapshotRequest): Promise<PublishedSnapshot> {
    validateWorkspaceId(workspaceId);
    const reply = await this.transport.call('POST', snapshotsPath(workspaceId), {
      json: {
        manifest: request.manifest.toString('base64'),
        signature: request.signature.toString('base64'),
        parent: request.parent,
        allowExternalSymlinks: request.allowExternalSymlinks === true,
      },
      // The same manifest and signature again stores nothing new and answers as the first did.
      idempotent: true,
    });
    if (reply.status === 201) return (await reply.json()) as PublishedSnapshot;
    const error = await failure(reply);
    if (error.status === 409 && error.code === 'conflict' && 'latest' in error.details) {
      const latest = error.details['latest'];
      throw new StaleParentError(typeof latest === 'string' ? latest : null);
    }
    if (error.status === 422 && error.code === 'missing_objects') {
      const missing = Array.isArray(error.details['missing']) ? error.details['missing'].map(String) : [];
      throw new MissingPartsError(missing, Number(error.details['missingCount'] ?? missing.length));
    }
    throw error;
  }

  /** A snapshot of the workspace (`latest` for its latest); null when there is none. */
  async read(workspaceId: string, idOrLatest: string): Promise<StoredSnapshot | null> {
    validateWorkspaceId(workspaceId);
    if (idOrLatest !== LATEST) validateSnapshotId(idOrLatest);
    return this.snapshotAt(`${snapshotsPath(workspaceId)}/${segment(idOrLatest)}`);
  }

  /** A snapshot of any of the caller's workspaces, by its id alone; null when there is none. */
  async find(id: string): Promise<StoredSnapshot | null> {
    validateSnapshotId(id);
    return this.snapshotAt(`/snapshots/${segment(id)}`);
  }

  /** One page of the workspace's snapshots, newest first (`limit` 1-1000, default 100). */
  async listPage(
    workspaceId: string,
    options: { readonly limit?: number; readonly cursor?: string | null } = {},
  ): Promise<SnapshotPage> {
    validateWorkspaceId(workspaceId);
    const reply = await this.transport.call('GET', snapshotsPath(workspaceId), {
      query: { limit: options.limit, cursor: options.cursor ?? undefined },
    });
    return readJson<SnapshotPage>(reply, 200);
  }

  /** Every snapshot of the workspace, newest first, fetched a page at a time, and its latest. */
  async list(workspaceId: string): Promise<SnapshotList> {
    const snapshots: SnapshotSummary[] = [];
    let page = await this.listPage(workspaceId, { limit: 1000 });
    snapshots.push(...page.snapshots);
    while (page.next !== null) {
      page = await this.listPage(workspaceId, { limit: 1000, cursor: page.next });
      snapshots.push(...page.snapshots);
    }
    // The latest as the last page saw it.
    return { snapshots, latest: page.latest };
  }

  /**
   * Deletes a snapshot (moving `latest` off it first) and the parts no other snapshot of the tenant
   * references; `not_found` when it is not stored.
   */
  async delete(workspaceId: string, id: string): Promise<SnapshotDeleteReport> {
    validateWorkspaceId(workspaceId);
    validateSnapshotId(id);
    const reply = await this.transport.call('DELETE', `${snapshotsPath(workspaceId)}/${segment(id)}`);
    return readJson(reply, 200);
  }

  /** The public keys a tenant's snapshots must be signed with (admin). */
  async trustedKeys(tenant: string): Promise<TrustedSnapshotKeys> {
    return readJson(await this.transport.call('GET', keysPath(tenant)), 200);
  }

  /** Replaces the run-time trusted keys of a tenant (admin); the configured ones stay. */
  async setTrustedKeys(tenant: string, keys: readonly string[]): Promise<TrustedSnapshotKeys> {
    return readJson(await this.transport.call('PUT', keysPath(tenant), { json: { keys } }), 200);
  }

  /** Removes the run-time trusted keys of a tenant (admin); the configured ones stay. */
  async clearTrustedKeys(tenant: string): Promise<void> {
    const reply = await this.transport.call('DELETE', keysPath(tenant));
    if (reply.status !== 204) throw await failure(reply);
  }

  private async snapshotAt(route: string): Promise<StoredSnapshot | null> {
    const reply: HttpReply = await this.transport.call('GET', route);
    if (reply.status === 404) return null;
    const body = await readJson<z.output<typeof Snapshot>>(reply, 200);
    return {
      id: body.id,
      workspaceId: body.workspaceId,
      manifest: Buffer.from(body.manifest, 'base64'),
      signature: Buffer.from(body.signature, 'base64'),
    };
  }
}

function snapshotsPath(workspaceId: string): string {
  return `/workspaces/${segment(workspaceId)}/snapshots`;
}

function partPath(workspaceId: string, sha256: string, part: number): string {
  validateWorkspaceId(workspaceId);
  validateSha256(sha256);
  if (!Number.isSafeInteger(part) || part < 0)
    throw new TypeError(`a part number is a whole number ≥ 0: ${part}`);
  return `${snapshotsPath(workspaceId)}/objects/${sha256}/${part}`;
}

function keysPath(tenant: string): string {
  return `/snapshot-keys/${segment(tenant)}`;
}
