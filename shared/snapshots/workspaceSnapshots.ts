import { createHash } from 'node:crypto';

import {
  noTransactionalAuditLog,
  pendingEvent,
  type RepairCheck,
  type TransactionalAuditLog,
} from '../audit/pending';
import { lru } from '../lru';
import {
  CairnError,
  ConflictError,
  IntegrityError,
  InvalidArgumentError,
  MissingObjectsError,
  NotFoundError,
  StorageUnavailableError,
} from '../protocol/errors';
import { forEachLimited } from '../protocol/pool';
import {
  idIndexKey,
  LATEST,
  latestKey,
  MANIFEST_FILE,
  manifestKey,
  objectKey,
  objectPrefix,
  parentKey,
  parsePart,
  PART_BYTES,
  partCount,
  partName,
  partSize,
  signatureKey,
  snapshotsPrefix,
  validateSha256,
  validateSnapshotId,
  validateWorkspaceId,
} from '../protocol/snapshots/identifiers';
import { parseManifest, type SnapshotFile, snapshotIdOf } from '../protocol/snapshots/manifest';
import { SIGNATURE_BYTES, verifiesWith } from '../protocol/snapshots/signatures';
import {
  type FoundObject,
  type ImmutableObjectStore,
  ObjectExistsError,
  type ObjectInfo,
  touchOldObjects,
} from '../storage/immutableObjectStore';
import type { TrustedSnapshotKeys } from './trustedKeys';

/**
 * Signed workspace snapshots (docs/snapshots.md): parts of files, manifests with their signatures,
 * and each workspace's `latest` pointer, in the object store of the caller's tenant (the location
 * is always the tenant's; a caller never names it, so another tenant's snapshot is absent: 404).
 *
 * Promises:
 * - Publish order: parts (uploaded by the client beforehand) → the id's workspace (`ids/<id>`) →
 *   the signature → the manifest (create-only; its presence makes the snapshot exist) → `latest`,
 *   moved by compare-and-swap only from the `parent` the publisher names. Nothing is written before
 *   every check passed (manifest bytes, paths, trusted signature, every part stored with its size),
 *   so a refused publish (400, 422, or 409 from the early stale check) writes nothing; a publisher
 *   that loses at the compare-and-swap leaves its snapshot stored but not `latest`; a crash at any step leaves the
 *   previous snapshot loadable, and publishing the same request again completes the snapshot.
 * - Objects are immutable and content-addressed, shared by all of a tenant's workspaces: uploading
 *   a part again is idempotent. A part of a file under 2 MiB is the whole file, so its SHA-256 is
 *   checked at upload.
 * - Deleting a snapshot moves `latest` off it first (to the newest remaining snapshot, or removes
 *   it), then deletes the manifest (the commit point), the signature and the id's entry, then the
 *   parts no other manifest of the tenant references. Parts stored less than {@link GRACE_MS} ago are
 *   never deleted, so that an upload in flight never loses its parts; this instance vouches for
 *   parts it stored for a shorter time than that ({@link KNOWN_PART_MS}).
 * - A publish relies on parts stored long ago too (content addresses are shared: another
 *   workspace's snapshot may have stored them a year ago), and a collector that read the manifests
 *   before this publish's manifest existed may be about to delete them. So every part the publish
 *   checked in storage and found stored more than half an hour ago (`TOUCH_OLDER_THAN_MS`) is
 *   touched (its storage time made now) after the check and before anything is written: a collector's delete, conditioned on
 *   the part being older than its cutoff, then leaves it, and a part deleted before its touch is
 *   missing (422, nothing written). The same holds for the id entry, the signature and the parent
 *   record a retry finds stored already. Parts this instance vouches for, and young parts, are not
 *   touched (no extra request on the common path).
 * - The parent's parts are trusted, neither checked nor touched: a stored manifest's parts are
 *   never collected, and a delete of the parent moves `latest` off it before it deletes its
 *   manifest and collects. A publish answered 201 moved `latest` from the parent before that, so
 *   its manifest was stored before the delete read the manifests, and the parts stay. A publish
 *   that loses `latest` to the delete is answered 409 (not acknowledged); its stored manifest may
 *   then lack parts only the parent referenced, and publishing it again onto the new `latest`
 *   checks them (422 names those to upload again).
 * - With the audit trail on, a publish is recorded as `snapshot.published` (subject
 *   `<workspaceId>/<snapshotId>`) by the pending-marker protocol of shared/audit/pending.ts. Its
 *   commit point is the manifest's create-only put (the snapshot exists from then on; of several
 *   publishers of one id exactly one creates it): a marker before it, the record after it, by the
 *   publisher that created the manifest only; a crash in between is repaired by the next append,
 *   which finds the manifest stored. A publisher that loses the race at `latest` after storing the
 *   manifest gets 409 but its snapshot is stored (listed, loadable by id), so it is recorded. The
 *   event id is one per workspace and snapshot id (an identical manifest published again after its
 *   deletion is recorded once), and a snapshot whose publish is not yet settled in the trail
 *   cannot be deleted (409, delete again), since its manifest is what the repair decides by.
 * - Absent is NotFoundError, a storage fault StorageUnavailableError: never confused.
 */

/** The tenant-scoped object stores of snapshots. */
export interface SnapshotStores {
  /** The object store holding one tenant's snapshots; cheap, no I/O. */
  forTenant(tenant: string): ImmutableObjectStore;
}

export interface PublishSnapshotRequest {
  /** The exact manifest bytes (canonical JSON). */
  readonly manifest: Buffer;
  /** Ed25519 over the manifest bytes, 64 raw bytes. */
  readonly signature: Buffer;
  /** The snapshot `latest` must still name (null: the workspace has none yet). */
  readonly parent: string | null;
  readonly allowExternalSymlinks: boolean;
}

export interface StoredSnapshot {
  readonly id: string;
  readonly workspaceId: string;
  readonly manifest: Buffer;
  readonly signature: Buffer;
}

export interface SnapshotSummary {
  readonly id: string;
  /** When the manifest was stored (RFC 3339). */
  readonly publishedAt: string;
  readonly manifestBytes: number;
}

export interface SnapshotPage {
  readonly snapshots: SnapshotSummary[];
  readonly latest: string | null;
  /** Pass as `cursor` for the next page; null on the last. */
  readonly next: string | null;
}

export interface DeleteReport {
  readonly id: string;
  /** The workspace's latest snapshot after the delete (null: none is left). */
  readonly latest: string | null;
  readonly objectsDeleted: number;
  /**
   * False when collecting the unreferenced parts failed after the snapshot was deleted (a storage
   * fault): the snapshot is gone, some of its parts remain until a later collection.
   */
  readonly collectionComplete: boolean;
}

/** Parts younger than this are never deleted. */
export const GRACE_MS = 60 * 60 * 1000;
/**
 * How long this instance vouches for a part it stored without asking the storage again: shorter than
 * {@link GRACE_MS} by a margin for clocks (this instance's, another instance's, the storage's).
 */
const KNOWN_PART_MS = 45 * 60 * 1000;
/** Parts an instance remembers having stored (about 10 MB). */
const KNOWN_PARTS = 65_536;
/** Unknown parts of one hash bucket (the first two hex digits) up to this many are probed one by one; more are listed. */
const PROBE_AT_MOST = 4;
/** Storage requests one check or collection makes at once. */
const CONCURRENCY = 16;
/** Attempts to move `latest` off a snapshot being deleted while others publish. */
const MOVE_ATTEMPTS = 8;

export interface WorkspaceSnapshotsOptions {
  /** The clock; tests may move it. */
  readonly now?: () => Date;
  /** The audit trail (`snapshot.published`); default: off. */
  readonly audit?: TransactionalAuditLog;
}

/** The audit event id of a snapshot's publish: one per workspace and snapshot. */
export function snapshotPublishedEventId(workspaceId: string, snapshotId: string): string {
  return `snapshot.published:${workspaceId}:${snapshotId}`;
}

export class WorkspaceSnapshots {
  private readonly known = lru<string, { size: number; at: number }>(KNOWN_PARTS);
  private readonly now: () => Date;
  private readonly audit: TransactionalAuditLog;

  constructor(
    private readonly stores: SnapshotStores,
    private readonly trustedKeys: TrustedSnapshotKeys,
    options: WorkspaceSnapshotsOptions = {},
  ) {
    this.now = options.now ?? (() => new Date());
    this.audit = options.audit ?? noTransactionalAuditLog;
  }

  /** Stores one part of a file. Idempotent: the same bytes again are `created: false`. */
  async putPart(
    tenant: string,
    workspaceId: string,
    sha256: string,
    partText: string,
    bytes: Buffer,
  ): Promise<{ created: boolean }> {
    validateWorkspaceId(workspaceId);
    validateSha256(sha256);
    const part = parsePart(partText);
    if (bytes.length === 0) {
      throw new InvalidArgumentError(
        'body',
        `a part holds 1 to ${PART_BYTES} bytes (an empty file has no part)`,
      );
    }
    if (part === 0 && bytes.length < PART_BYTES && sha256Hex(bytes) !== sha256) {
      throw new InvalidArgumentError(
        'body',
        `holds a whole file (under ${PART_BYTES} bytes) whose SHA-256 is not ${sha256}`,
      );
    }
    const key = objectKey(sha256, part);
    const result = await this.stores.forTenant(tenant).put(key, bytes);
    if (result.created) this.known.set(`${tenant}\n${key}`, { size: bytes.length, at: performance.now() });
    return result;
  }

  async getPart(tenant: string, workspaceId: string, sha256: string, partText: string): Promise<Buffer> {
    validateWorkspaceId(workspaceId);
    validateSha256(sha256);
    const part = parsePart(partText);
    const bytes = await this.stores.forTenant(tenant).get(objectKey(sha256, part));
    if (bytes === null) throw new NotFoundError(`no part ${partName(sha256, part)} is stored`);
    return bytes;
  }

  /** The stored size of a part. */
  async headPart(tenant: string, workspaceId: string, sha256: string, partText: string): Promise<number> {
    validateWorkspaceId(workspaceId);
    validateSha256(sha256);
    const part = parsePart(partText);
    const info = await this.stores.forTenant(tenant).head(objectKey(sha256, part));
    if (info === null) throw new NotFoundError(`no part ${partName(sha256, part)} is stored`);
    return info.size;
  }

  /**
   * Publishes a snapshot (see the class comment for the order). A stale publisher (`latest` is
   * neither `parent` nor this snapshot) gets ConflictError with `latest` in its details.
   */
  async publish(
    tenant: string,
    workspaceId: string,
    request: PublishSnapshotRequest,
    actor?: string,
  ): Promise<{ id: string; latest: string }> {
    validateWorkspaceId(workspaceId);
    const { parent } = request;
    if (parent !== null) validateSnapshotId(parent, 'parent');
    if (request.signature.length !== SIGNATURE_BYTES) {
      throw new InvalidArgumentError(
        'signature',
        `must be ${SIGNATURE_BYTES} bytes of Ed25519 signature, in base64`,
      );
    }
    const manifest = parseManifest(request.manifest, {
      allowExternalSymlinks: request.allowExternalSymlinks,
    });
    if (manifest.workspaceId !== workspaceId) {
      throw new InvalidArgumentError(
        'manifest.workspaceId',
        `is ${manifest.workspaceId}, not ${workspaceId} (the workspace of the route)`,
      );
    }
    const id = snapshotIdOf(request.manifest);
    const trusted = await this.trustedKeys.keysOf(tenant);
    if (
      trusted.length > 0 &&
      !trusted.some((key) => verifiesWith(request.manifest, request.signature, key))
    ) {
      throw new InvalidArgumentError(
        'signature',
        'does not verify with any trusted snapshot key of the tenant',
      );
    }

    const store = this.stores.forTenant(tenant);
    const [latest, parentManifest] = await Promise.all([
      store.readPointer(latestKey(workspaceId)),
      parent === null ? null : store.get(manifestKey(workspaceId, parent)),
    ]);
    // Tell a stale publisher before it writes anything.
    if (latest !== parent && latest !== id) throw staleParent(latest);
    // The parent's parts were checked when it was published, and a stored manifest's parts are
    // never collected: only the others are checked.
    const checked = parentManifest === null ? new Set<string>() : new Set(referencedHashes(parentManifest));
    const missing = await this.findMissingParts(tenant, store, manifest.files, checked);
    if (missing.count > 0) throw new MissingObjectsError(missing.keys, missing.count);
    // Old parts are touched before anything is written (see the class comment).
    const gone = await touchOldObjects(store, missing.found, this.now().getTime(), CONCURRENCY);
    if (gone.length > 0) throw new MissingObjectsError(gone, gone.length);

    await putKept(store, idIndexKey(id), Buffer.from(workspaceId, 'utf8'));
    await storeParent(store, workspaceId, id, parent);
    await this.storeSignature(store, workspaceId, id, request.signature);
    // The commit point. Its marker first, unless `latest` shows a retry of a publish that got past
    // it (its own marker or record covers it). A publisher that finds the manifest stored already
    // leaves its marker (it shares the id with the creator's): the repair finds the event recorded
    // or the manifest stored, and settles it.
    const event = pendingEvent(
      {
        id: snapshotPublishedEventId(workspaceId, id),
        tenant,
        action: 'snapshot.published',
        ...(actor === undefined ? {} : { actor }),
        subject: `${workspaceId}/${id}`,
        outcome: 'ok',
        details: { parent, files: manifest.files.length },
      },
      this.now().getTime(),
    );
    const audited = this.audit.enabled && latest !== id;
    if (audited) {
      await this.audit.begin(tenant, [event], { kind: 'snapshot', workspaceId, snapshotId: id });
    }
    const { created } = await store.put(manifestKey(workspaceId, id), request.manifest);
    if (audited && created) await this.audit.commit(tenant, [event], { dedupe: true });
    const swap = await store.swapPointer(latestKey(workspaceId), parent, id);
    // Already moved to this snapshot: a retry of a publish that got this far.
    if (!swap.swapped && swap.current !== id) throw staleParent(swap.current);
    return { id, latest: id };
  }

  /** The manifest bytes and signature of snapshot `id` (or of the latest for `latest`). */
  async read(tenant: string, workspaceId: string, idOrLatest: string): Promise<StoredSnapshot> {
    validateWorkspaceId(workspaceId);
    if (idOrLatest !== LATEST) validateSnapshotId(idOrLatest);
    const store = this.stores.forTenant(tenant);
    let id = idOrLatest === LATEST ? await store.readPointer(latestKey(workspaceId)) : idOrLatest;
    for (let attempt = 1; ; attempt++) {
      if (id === null) throw new NotFoundError(`workspace ${workspaceId} has no snapshot`);
      const [manifest, signature] = await Promise.all([
        store.get(manifestKey(workspaceId, id)),
        store.get(signatureKey(workspaceId, id)),
      ]);
      if (manifest === null) {
        if (idOrLatest !== LATEST) throw new NotFoundError(`no snapshot ${id} in workspace ${workspaceId}`);
        // `latest` only ever names a stored manifest (a delete moves it first): read it again.
        const now = await store.readPointer(latestKey(workspaceId));
        if (now === id) throw new IntegrityError(`latest names snapshot ${id}, which is not stored`);
        if (attempt === MOVE_ATTEMPTS)
          throw new ConflictError(`workspace ${workspaceId} keeps changing; read again`);
        id = now;
        continue;
      }
      if (signature === null) {
        // The signature is stored before the manifest and deleted after it: a delete is under way.
        if ((await store.head(manifestKey(workspaceId, id))) === null) {
          throw new NotFoundError(`no snapshot ${id} in workspace ${workspaceId}`);
        }
        throw new IntegrityError(`snapshot ${id} has no stored signature`);
      }
      return { id, workspaceId, manifest, signature };
    }
  }

  /** Whether the manifest of snapshot `id` is stored in the workspace (what the audit repair asks). */
  async isStored(tenant: string, workspaceId: string, id: string): Promise<boolean> {
    return (await this.stores.forTenant(tenant).head(manifestKey(workspaceId, id))) !== null;
  }

  /** Snapshot `id` of any of the tenant's workspaces. */
  async find(tenant: string, id: string): Promise<StoredSnapshot> {
    validateSnapshotId(id);
    const workspace = await this.stores.forTenant(tenant).get(idIndexKey(id));
    if (workspace === null) throw new NotFoundError(`no snapshot ${id}`);
    return this.read(tenant, workspace.toString('utf8'), id);
  }

  /** The workspace's snapshots, newest first (by when each was published), a page at a time. */
  async list(
    tenant: string,
    workspaceId: string,
    options: { limit: number; cursor?: string },
  ): Promise<SnapshotPage> {
    validateWorkspaceId(workspaceId);
    const after = options.cursor === undefined ? undefined : decodeCursor(options.cursor);
    const store = this.stores.forTenant(tenant);
    const [all, latest] = await Promise.all([
      listSnapshots(store, workspaceId),
      store.readPointer(latestKey(workspaceId)),
    ]);
    const start = after === undefined ? 0 : all.findIndex((item) => newestFirst(item, after) > 0);
    const page = start === -1 ? [] : all.slice(start, start + options.limit);
    const last = page[page.length - 1];
    const more = start !== -1 && start + options.limit < all.length;
    return {
      snapshots: page.map(({ id, storedAt, size }) => ({
        id,
        publishedAt: storedAt.toISOString(),
        manifestBytes: size,
      })),
      latest,
      next: more && last !== undefined ? encodeCursor(last) : null,
    };
  }

  /** Deletes a snapshot and the parts nothing else references (see the class comment). */
  async delete(tenant: string, workspaceId: string, id: string): Promise<DeleteReport> {
    validateWorkspaceId(workspaceId);
    validateSnapshotId(id);
    const store = this.stores.forTenant(tenant);
    const manifest = await store.get(manifestKey(workspaceId, id));
    if (manifest === null) throw new NotFoundError(`no snapshot ${id} in workspace ${workspaceId}`);
    // The repair of a pending publish decides by the manifest: it stays until the publish is in the
    // trail (a publisher that crashed after storing it: the next append, at most a grace period on).
    if (
      this.audit.enabled &&
      !(await this.audit.settled(tenant, snapshotPublishedEventId(workspaceId, id)))
    ) {
      throw new ConflictError(
        `the publish of snapshot ${id} is not yet in the audit trail; delete again in a minute`,
      );
    }
    const latest = await this.moveLatestOff(store, workspaceId, id);
    await store.delete(manifestKey(workspaceId, id));
    await store.delete(signatureKey(workspaceId, id));
    await store.delete(parentKey(workspaceId, id));
    await store.delete(idIndexKey(id));
    try {
      const objectsDeleted = await this.collect(store, workspaceId, new Set(referencedHashes(manifest)));
      return { id, latest, objectsDeleted, collectionComplete: true };
    } catch (error) {
      // The snapshot is deleted either way; what is left of its parts waits for a later collection.
      if (!(error instanceof CairnError)) throw error;
      return { id, latest, objectsDeleted: 0, collectionComplete: false };
    }
  }

  /**
   * The part names (`<sha256>/<part>`) of `files` that are not stored with their size. Parts of
   * `checked` hashes and parts this instance vouches for are not asked about; the others are
   * probed one by one, or, when a hash bucket (first two hex digits) holds more of them, found by
   * one listing of the bucket.
   */
  private async findMissingParts(
    tenant: string,
    store: ImmutableObjectStore,
    files: readonly SnapshotFile[],
    checked: ReadonlySet<string>,
  ): Promise<{ keys: string[]; count: number; found: FoundObject[] }> {
    const sizes = new Map<string, number>();
    for (const file of files)
      if (file.size > 0 && !checked.has(file.sha256)) sizes.set(file.sha256, file.size);
    const buckets = new Map<string, { key: string; name: string; size: number }[]>();
    for (const [sha256, size] of sizes) {
      for (let part = 0; part < partCount(size); part++) {
        const expected = partSize(size, part);
        const key = objectKey(sha256, part);
        if (this.vouchesFor(tenant, key, expected)) continue;
        const bucket = sha256.slice(0, 2);
        const list = buckets.get(bucket) ?? [];
        list.push({ key, name: partName(sha256, part), size: expected });
        buckets.set(bucket, list);
      }
    }
    const missing: string[] = [];
    const found: FoundObject[] = [];
    await forEachLimited([...buckets], CONCURRENCY, async ([bucket, parts]) => {
      const stored = new Map<string, ObjectInfo>();
      if (parts.length <= PROBE_AT_MOST) {
        const probed = await Promise.all(parts.map((part) => store.head(part.key)));
        for (const info of probed) if (info !== null) stored.set(info.key, info);
      } else {
        const wanted = new Set(parts.map((part) => part.key));
        for await (const item of store.list(`objects/${bucket}`)) {
          if (wanted.has(item.key)) stored.set(item.key, item);
        }
      }
      for (const part of parts) {
        const info = stored.get(part.key);
        if (info?.size !== part.size) missing.push(part.name);
        else found.push({ key: part.key, name: part.name, storedAt: info.storedAt });
      }
    });
    missing.sort();
    return { keys: missing, count: missing.length, found };
  }

  private vouchesFor(tenant: string, key: string, size: number): boolean {
    const known = this.known.get(`${tenant}\n${key}`);
    return known !== undefined && known.size === size && performance.now() - known.at < KNOWN_PART_MS;
  }

  /** Stores the signature create-only; an orphan of an attempt that never stored its manifest is replaced. */
  private async storeSignature(
    store: ImmutableObjectStore,
    workspaceId: string,
    id: string,
    signature: Buffer,
  ): Promise<void> {
    const key = signatureKey(workspaceId, id);
    try {
      await putKept(store, key, signature);
    } catch (error) {
      if (!(error instanceof ObjectExistsError)) throw error;
      if ((await store.head(manifestKey(workspaceId, id))) !== null) {
        throw new ConflictError(`snapshot ${id} is already stored with another signature; it keeps that one`);
      }
      await store.delete(key);
      await store.put(key, signature);
    }
  }

  /**
   * Moves `latest` off `id` if it names it: back to the snapshot `id` was published onto when that
   * one is still stored (deleting the tip undoes its publish), else to the newest other snapshot
   * (publish times are only as fine as the storage's clock: ties are broken by id), or removes it.
   */
  private async moveLatestOff(
    store: ImmutableObjectStore,
    workspaceId: string,
    id: string,
  ): Promise<string | null> {
    for (let attempt = 0; attempt < MOVE_ATTEMPTS; attempt++) {
      const current = await store.readPointer(latestKey(workspaceId));
      if (current !== id) return current;
      const newest =
        (await storedParent(store, workspaceId, id)) ??
        (await listSnapshots(store, workspaceId)).find((item) => item.id !== id)?.id ??
        null;
      const swap = await store.swapPointer(latestKey(workspaceId), id, newest);
      if (swap.swapped) return newest;
    }
    throw new ConflictError(`workspace ${workspaceId} keeps being published to; delete again`);
  }

  /**
   * Deletes the parts of `candidates` (file hashes) that no manifest of the tenant references and
   * that were stored more than {@link GRACE_MS} ago; returns how many were deleted. The manifests
   * of the workspace are read first, newest first (the likeliest to share files), and reading stops
   * once every candidate is referenced; the manifests are listed once more before anything is
   * deleted, so that one published meanwhile is read too.
   */
  private async collect(
    store: ImmutableObjectStore,
    workspaceId: string,
    candidates: Set<string>,
  ): Promise<number> {
    const read = new Set<string>();
    for (let pass = 0; pass < 2 && candidates.size > 0; pass++) {
      await dropReferenced(store, workspaceId, candidates, read);
    }
    if (candidates.size === 0) return 0;
    const storedBefore = new Date(this.now().getTime() - GRACE_MS);
    let deleted = 0;
    await forEachLimited([...candidates], CONCURRENCY, async (sha256) => {
      const parts: string[] = [];
      for await (const item of store.list(objectPrefix(sha256))) {
        if (item.storedAt < storedBefore) parts.push(item.key);
      }
      for (const key of parts) if (await store.delete(key, { storedBefore })) deleted++;
    });
    return deleted;
  }
}

/** Times a put and touch of an object that keeps being deleted in between is tried. */
const PUT_KEPT_ATTEMPTS = 3;

/**
 * Puts an object the publish writes before its manifest (id entry, signature, parent record). When
 * it is stored already (a retry of a publish that stopped before its manifest, maybe long ago), it
 * is touched, so that the prune, which collects these once older than the grace while no manifest
 * names them, leaves it; deleted before the touch, it is put again.
 */
async function putKept(store: ImmutableObjectStore, key: string, bytes: Buffer): Promise<void> {
  for (let attempt = 0; attempt < PUT_KEPT_ATTEMPTS; attempt++) {
    const { created } = await store.put(key, bytes);
    if (created || (await store.touch(key)) !== null) return;
  }
  throw new StorageUnavailableError(`${key} keeps being deleted while it is stored; retry`);
}

interface ListedSnapshot {
  readonly id: string;
  readonly storedAt: Date;
  readonly size: number;
}

/**
 * Records the snapshot `id` is published onto. The first record stays (a retry onto another parent
 * keeps it); it only guides where `latest` goes when `id` is deleted.
 */
async function storeParent(
  store: ImmutableObjectStore,
  workspaceId: string,
  id: string,
  parent: string | null,
): Promise<void> {
  const key = parentKey(workspaceId, id);
  try {
    await putKept(store, key, Buffer.from(parent ?? '', 'utf8'));
  } catch (error) {
    if (!(error instanceof ObjectExistsError)) throw error;
    await store.touch(key);
  }
}

/** The recorded parent of `id`, when it is still a stored snapshot of the workspace. */
async function storedParent(
  store: ImmutableObjectStore,
  workspaceId: string,
  id: string,
): Promise<string | null> {
  const parent = (await store.get(parentKey(workspaceId, id)))?.toString('utf8') ?? '';
  if (parent === '' || parent === id) return null;
  return (await store.head(manifestKey(workspaceId, parent))) === null ? null : parent;
}

/** Newest first; ties by id. Negative when `a` comes before `b`. */
function newestFirst(a: ListedSnapshot, b: { storedAt: Date; id: string }): number {
  const byTime = b.storedAt.getTime() - a.storedAt.getTime();
  if (byTime !== 0) return byTime;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

/** Every stored manifest of a workspace, newest first. */
async function listSnapshots(store: ImmutableObjectStore, workspaceId: string): Promise<ListedSnapshot[]> {
  const prefix = snapshotsPrefix(workspaceId);
  const found: ListedSnapshot[] = [];
  for await (const item of store.list(prefix)) {
    const [id, file, ...rest] = item.key.slice(prefix.length).split('/');
    if (id !== undefined && file === MANIFEST_FILE && rest.length === 0) {
      found.push({ id, storedAt: item.storedAt, size: item.size });
    }
  }
  return found.sort(newestFirst);
}

/** Removes from `candidates` the hashes referenced by manifests not in `read` (which it extends). */
async function dropReferenced(
  store: ImmutableObjectStore,
  workspaceId: string,
  candidates: Set<string>,
  read: Set<string>,
): Promise<void> {
  const own = snapshotsPrefix(workspaceId);
  const manifests: { key: string; storedAt: Date; own: boolean }[] = [];
  for await (const item of store.list('workspaces/')) {
    if (item.key.endsWith(`/${MANIFEST_FILE}`) && !read.has(item.key)) {
      manifests.push({ key: item.key, storedAt: item.storedAt, own: item.key.startsWith(own) });
    }
  }
  manifests.sort((a, b) => Number(b.own) - Number(a.own) || b.storedAt.getTime() - a.storedAt.getTime());
  await forEachLimited(manifests, CONCURRENCY, async ({ key }) => {
    if (candidates.size === 0) return;
    const bytes = await store.get(key);
    read.add(key);
    if (bytes === null) return;
    for (const sha256 of referencedHashes(bytes)) candidates.delete(sha256);
  });
}

/** The file hashes a stored manifest references (it was fully checked when it was published). */
function referencedHashes(manifest: Buffer): string[] {
  try {
    const parsed = JSON.parse(manifest.toString('utf8')) as { files: { sha256: string; size: number }[] };
    return parsed.files.filter((file) => file.size > 0).map((file) => file.sha256);
  } catch (error) {
    // Unreadable: nothing it references can be known, so nothing may be collected on its account.
    throw new IntegrityError('a stored snapshot manifest is not readable', {}, { cause: error });
  }
}

function staleParent(latest: string | null): ConflictError {
  return new ConflictError(
    latest === null
      ? 'the workspace has no snapshot yet: publish with parent null'
      : `the latest snapshot is ${latest}, not the parent given: publish again with parent ${latest}`,
    { latest },
  );
}

function sha256Hex(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

function encodeCursor(item: ListedSnapshot): string {
  return Buffer.from(`${item.storedAt.getTime()}:${item.id}`, 'utf8').toString('base64url');
}

function decodeCursor(cursor: string): { storedAt: Date; id: string } {
  const [time = '', id = '', ...rest] = Buffer.from(cursor, 'base64url').toString('utf8').split(':');
  if (rest.length > 0 || !/^\d{1,15}$/.test(time) || !/^[0-9a-f]{64}$/.test(id)) {
    throw new InvalidArgumentError('cursor', 'must be the `next` of an earlier page');
  }
  return { storedAt: new Date(Number(time)), id };
}

/**
 * The snapshots' part of the audit trail's repair (see audit/pending.ts): a publish (`snapshot`)
 * committed when its manifest is stored (its create-only put).
 */
export function snapshotRepairCheck(stores: SnapshotStores): RepairCheck {
  return {
    kinds: ['snapshot'],
    fateOf: async (tenant, event, check, trail) => {
      if (await trail.appended(tenant, event.id)) return 'committed';
      const key = manifestKey(String(check['workspaceId']), String(check['snapshotId']));
      return (await stores.forTenant(tenant).head(key)) !== null ? 'committed' : 'not-committed';
    },
  };
}
