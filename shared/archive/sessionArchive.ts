import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';

import {
  noTransactionalAuditLog,
  pendingEvent,
  type RepairCheck,
  type TransactionalAuditLog,
} from '../audit/pending';
import { lru } from '../lru';
import {
  BLOCK_BYTES,
  blockKey,
  checkObjectSize,
  LATEST,
  parseObjectKey,
  tailKey,
  validateId,
} from '../protocol/archive/identifiers';
import {
  deserializeManifest,
  type Manifest,
  type ManifestFile,
  manifestIdentity,
  type PublishRequest,
  serializeManifest,
} from '../protocol/archive/manifest';
import {
  ConflictError,
  ForbiddenError,
  IntegrityError,
  InternalError,
  MissingObjectsError,
  NotFoundError,
} from '../protocol/errors';
import { validateKey } from '../protocol/keys';
import { forEachLimited } from '../protocol/pool';
import {
  type FoundObject,
  type ImmutableObjectStore,
  type ObjectInfo,
  touchOldObjects,
} from '../storage/immutableObjectStore';
import type { SessionIndex, SessionPage, SessionRecord } from '../storage/sessionIndex';
import type { ArchiveStorage } from './sealedArchive';
import { SESSION_TOMBSTONE } from './sessionRetention';

/**
 * Session archives: objects, checkpoint manifests, the `latest`
 * pointer and the session index, for one tenant at a time.
 *
 * Store layout, per session `<sid>`: `<sid>/blocks/<generation>/<index>`, `<sid>/tails/<checkpointId>/<generation>`,
 * `<sid>/checkpoints/<checkpointId>` (the manifest), `<sid>/latest` (the pointer).
 *
 * Promises:
 * - Tenancy: a session belongs to the tenant that first writes to it (decided by the index before
 *   any byte is written); another tenant's write is ForbiddenError `tenant mismatch`, its read is
 *   NotFoundError, exactly as for a session that does not exist.
 * - Publish order: objects (uploaded by the client beforehand) → the immutable manifest (only when
 *   every referenced object is stored with the right size) → `latest`, moved only from `parent` →
 *   the session index. A failure at any step leaves the previous checkpoint readable and complete;
 *   publishing the same request again completes the checkpoint (every step is idempotent).
 * - Restore streams a file block by block (a bounded read-ahead, never the whole file) and checks
 *   the size of every object and the SHA-256 of the whole file; a mismatch is IntegrityError,
 *   raised before the last bytes are released.
 * - Absent is NotFoundError, a storage fault StorageUnavailableError: never confused.
 * - Objects are read and written as the owner's store gives them ({@link ArchiveStorage.objectsOf}):
 *   sealed at rest for a tenant whose policy asks for it, with plain sizes either way.
 * - A publish may rely on objects stored long ago (blocks of a generation an earlier, now
 *   unreferenced checkpoint uploaded; an upload of bytes stored already keeps their old storage
 *   time), and a prune that read the session's manifests before this publish's manifest existed may
 *   be about to collect them. Every object the publish checked in storage and found stored more
 *   than half an hour ago (`TOUCH_OLDER_THAN_MS`) is touched (its storage time made now) before
 *   the manifest is written: the prune's delete, conditioned on the object being older than its cutoff, then
 *   leaves it, and an object deleted before its touch is missing (422, no manifest written).
 *   Objects this instance vouches for, and young ones, are not touched (no extra request). The
 *   parent's blocks are trusted: the parent is `latest` (the publish moves `latest` from it), and
 *   retention keeps every manifest of the chain from `latest` with its objects.
 */
export class SessionArchive {
  /**
   * Objects this instance stored (store key → size, and when, on the monotonic clock), so that
   * publishing a checkpoint right after uploading its objects through this instance need not ask
   * the storage about them again. Sound because objects are immutable and retention deletes an
   * unreferenced object, or one of a deleted session, only once it is older than an hour: an object
   * this instance stored less than {@link KNOWN_OBJECT_MS} ago is still stored with those bytes.
   * Anything else is checked in storage (listing or probes).
   */
  private readonly stored = lru<string, { size: number; at: number }>(KNOWN_OBJECTS);

  private readonly index: SessionIndex;

  constructor(
    private readonly storage: ArchiveStorage,
    /**
     * The audit trail: each published checkpoint is recorded (`checkpoint.published`), once per
     * checkpoint id; its marker is stored before `latest` moves, so a crash in between is repaired.
     */
    private readonly audit: TransactionalAuditLog = noTransactionalAuditLog,
    /** The clock (Unix ms) of events, `createdAt` and the index's `updatedAt` (tests move it). */
    private readonly now: () => number = Date.now,
  ) {
    this.index = storage.index;
  }

  /** Stores one block or tail. Idempotent: the same bytes again are `created: false`. */
  async putObject(
    tenant: string,
    sessionId: string,
    objectKey: string,
    bytes: Buffer,
  ): Promise<{ created: boolean }> {
    validateId(sessionId, 'sessionId');
    checkObjectSize(parseObjectKey(objectKey), bytes.length);
    await this.claimForWrite(tenant, sessionId);
    const key = `${sessionId}/${objectKey}`;
    const result = await this.storage.objectsOf(tenant).put(key, bytes);
    // Only an object this put created is known to be young: the same bytes stored already keep
    // their first storage time, however old, and retention may collect them at any moment.
    if (result.created) this.stored.set(key, { size: bytes.length, at: performance.now() });
    return result;
  }

  async getObject(tenant: string, sessionId: string, objectKey: string): Promise<Buffer> {
    validateId(sessionId, 'sessionId');
    parseObjectKey(objectKey);
    await this.checkReadable(tenant, sessionId);
    const bytes = await this.storage.objectsOf(tenant).get(`${sessionId}/${objectKey}`);
    if (bytes === null) throw new NotFoundError(`no object ${objectKey} in session ${sessionId}`);
    return bytes;
  }

  /**
   * Publishes a checkpoint (see the class comment for the order). Returns the new `latest`.
   * A stale publisher (`latest` is not `parent`) gets ConflictError with `latest` in its details.
   */
  async publishCheckpoint(
    tenant: string,
    sessionId: string,
    request: PublishRequest,
    actor?: string,
  ): Promise<{ checkpointId: string; latest: string }> {
    validateId(sessionId, 'sessionId');
    const { checkpointId, parent } = request;
    if ((await this.index.ownerOf(sessionId)) === null) {
      // Nobody has written to the session, so no object of it is stored (objects are written only
      // once the session is owned): refuse a checkpoint that needs any before claiming anything,
      // so that this failed request writes nothing.
      const missing = referencedObjects(checkpointId, request.files);
      if (missing.count > 0) throw new MissingObjectsError(missing.keys, missing.count);
    }
    await this.claimForWrite(tenant, sessionId);
    const objects = this.storage.objectsOf(tenant);
    const manifestKey = `${sessionId}/checkpoints/${checkpointId}`;
    const latestKey = `${sessionId}/latest`;

    // Independent reads, at once: a retry's manifest, the current latest, the parent's manifest.
    const [stored, latest, parentManifest] = await Promise.all([
      this.storedManifest(objects, manifestKey, request),
      objects.readPointer(latestKey),
      parent === null ? null : objects.get(`${sessionId}/checkpoints/${parent}`),
    ]);
    if (latest === SESSION_TOMBSTONE) throw beingDeleted(sessionId);
    let manifest = stored;
    if (manifest === null) {
      // Tell a stale publisher early, before it leaves a manifest nobody will point to.
      if (latest !== parent && latest !== checkpointId) throw staleParent(latest);
      const verified = parentManifest === null ? new Map<string, number>() : verifiedBlocks(parentManifest);
      const missing = await this.findMissingObjects(
        objects,
        sessionId,
        checkpointId,
        request.files,
        verified,
      );
      if (missing.count > 0) throw new MissingObjectsError(missing.keys, missing.count);
      // Old objects are touched before the manifest is written (see the class comment).
      const gone = await touchOldObjects(objects, missing.found, this.now(), TOUCH_CONCURRENCY);
      if (gone.length > 0) throw new MissingObjectsError(gone, gone.length);
      const fresh: Manifest = { ...request, createdAt: new Date(this.now()).toISOString() };
      const { created } = await objects
        .put(manifestKey, serializeManifest(fresh))
        .catch(async (error: unknown) => {
          // A concurrent publisher of the same checkpoint id stored its manifest first.
          if ((await this.storedManifest(objects, manifestKey, request)) !== null) return { created: false };
          throw error;
        });
      manifest = created ? fresh : await this.storedManifest(objects, manifestKey, request);
      if (manifest === null) throw new InternalError('the stored manifest disappeared');
    }

    // One event per checkpoint id: a retry, or a concurrent publisher of the same checkpoint, has
    // the same id, and only the publisher that moves `latest` appends it. Markers of publishes that
    // did not move it are dropped by the repair (it finds `latest` never reached the checkpoint).
    const event = pendingEvent(
      {
        id: `checkpoint.published:${sessionId}:${checkpointId}`,
        tenant,
        action: 'checkpoint.published',
        ...(actor === undefined ? {} : { actor }),
        subject: `${sessionId}/${checkpointId}`,
        outcome: 'ok',
        details: { sessionId, checkpointId, parent, files: manifest.files.length },
      },
      this.now(),
    );
    if (this.audit.enabled) {
      await this.audit.begin(tenant, [event], { kind: 'archive', sessionId, checkpointId });
    }
    const swap = await objects.swapPointer(latestKey, parent, checkpointId);
    if (!swap.swapped && swap.current === SESSION_TOMBSTONE) throw beingDeleted(sessionId);
    // Already moved to this checkpoint: a retry of a publish that got this far.
    if (!swap.swapped && swap.current !== checkpointId) throw staleParent(swap.current);
    if (swap.swapped && this.audit.enabled) await this.audit.commit(tenant, [event]);

    await this.recordInIndex(objects, tenant, sessionId, manifest);
    return { checkpointId, latest: checkpointId };
  }

  /**
   * Whether `latest` of the session ever reached `checkpointId` (for the audit repair): walks back
   * from `latest` through the parents while their manifests are younger than `sinceMs` (a minute of
   * clock skew allowed): a checkpoint published after the marker has only such descendants. Null
   * when a manifest on the way is missing (it cannot tell).
   */
  async wasPublished(
    tenant: string,
    sessionId: string,
    checkpointId: string,
    sinceMs: number,
  ): Promise<boolean | null> {
    return wasPublished(this.storage, tenant, sessionId, checkpointId, sinceMs);
  }

  /** The manifest of `checkpointId`, or of the latest checkpoint for `latest`. */
  async readManifest(tenant: string, sessionId: string, checkpointId: string): Promise<Manifest> {
    validateId(sessionId, 'sessionId');
    if (checkpointId !== LATEST) validateId(checkpointId, 'checkpointId');
    await this.checkReadable(tenant, sessionId);
    const objects = this.storage.objectsOf(tenant);
    let id = checkpointId;
    if (checkpointId === LATEST) {
      const latest = await objects.readPointer(`${sessionId}/latest`);
      if (latest === null) throw new NotFoundError(`session ${sessionId} has no checkpoint yet`);
      if (latest === SESSION_TOMBSTONE) throw new NotFoundError(`session ${sessionId} is being deleted`);
      id = latest;
    }
    const bytes = await objects.get(`${sessionId}/checkpoints/${id}`);
    if (bytes === null) {
      // `latest` only ever points at a stored manifest (publish order): its absence is a fault.
      if (checkpointId === LATEST)
        throw new IntegrityError(`latest names checkpoint ${id}, which is not stored`);
      throw new NotFoundError(`no checkpoint ${id} in session ${sessionId}`);
    }
    return deserializeManifest(bytes);
  }

  /**
   * One file of a checkpoint as a stream of its bytes. The objects were checked when the checkpoint
   * was published, and a kept checkpoint's objects are never deleted, so nothing is listed first; what is
   * read is checked as it passes: every object's size (a missing or wrongly sized one is
   * IntegrityError), and the SHA-256 of the whole file before its last chunk. The first object is
   * read and checked before this returns, so that a file whose objects are gone fails before its
   * answer starts.
   */
  async restoreFile(
    tenant: string,
    sessionId: string,
    checkpointId: string,
    path: string,
  ): Promise<{ file: ManifestFile; stream: Readable }> {
    validateKey(path, 'path');
    const manifest = await this.readManifest(tenant, sessionId, checkpointId);
    const file = manifest.files.find((candidate) => candidate.path === path);
    if (file === undefined) throw new NotFoundError(`no file ${path} in checkpoint ${manifest.checkpointId}`);
    const chunks = this.fileBytes(this.storage.objectsOf(tenant), sessionId, manifest.checkpointId, file);
    const first = await chunks.next();
    const rest = async function* (): AsyncGenerator<Buffer> {
      try {
        if (first.done !== true) yield first.value;
        yield* chunks;
      } finally {
        // A reader that stops early (a cut connection) ends the reads too.
        await chunks.return(undefined);
      }
    };
    return { file, stream: Readable.from(rest(), { objectMode: false }) };
  }

  async getSession(tenant: string, sessionId: string): Promise<SessionRecord> {
    validateId(sessionId, 'sessionId');
    const record = await this.index.get(tenant, sessionId);
    if (record === null) throw new NotFoundError(`no session ${sessionId} in the index`);
    return record;
  }

  async listSessions(tenant: string, options: { after?: string; limit: number }): Promise<SessionPage> {
    return this.index.list(tenant, options);
  }

  /** The caller must own the session, or become its owner now (first writer wins). */
  private async claimForWrite(tenant: string, sessionId: string): Promise<void> {
    const owner = await this.index.claim(sessionId, tenant);
    if (owner !== tenant) throw new ForbiddenError('tenant mismatch');
  }

  /** Another tenant's session answers exactly as an absent one. */
  private async checkReadable(tenant: string, sessionId: string): Promise<void> {
    const owner = await this.index.ownerOf(sessionId);
    if (owner !== tenant) throw new NotFoundError(`no session ${sessionId}`);
  }

  /** The stored manifest when it is this very request (a retry); null when none; 409 when another. */
  private async storedManifest(
    objects: ImmutableObjectStore,
    manifestKey: string,
    request: PublishRequest,
  ): Promise<Manifest | null> {
    const bytes = await objects.get(manifestKey);
    if (bytes === null) return null;
    const stored = deserializeManifest(bytes);
    if (manifestIdentity(stored) !== manifestIdentity(request)) {
      throw new ConflictError(
        `a different manifest is stored under checkpoint ${request.checkpointId}; publish under a new checkpoint id`,
      );
    }
    return stored;
  }

  /**
   * The object keys a set of files needs that are absent or of the wrong size. Blocks `0 … n-1` of
   * a generation in `verified` were checked when an earlier checkpoint was published (objects are
   * immutable, and retention keeps every object the latest checkpoint references), and so were the blocks this instance stored itself (see
   * {@link stored}); only the blocks after those are checked in storage: a few by one probe each,
   * more by one listing of the generation (2,000 blocks cost one or two list requests, not 2,000
   * probes). The checkpoint's tails are checked by one listing unless this instance stored them
   * all.
   */
  private async findMissingObjects(
    objects: ImmutableObjectStore,
    sessionId: string,
    checkpointId: string,
    files: readonly ManifestFile[],
    verified: ReadonlyMap<string, number>,
  ): Promise<MissingKeys> {
    const missing = new MissingKeys();
    const found = (key: string, info: ObjectInfo | undefined) => {
      if (info !== undefined)
        missing.found.push({ key: `${sessionId}/${key}`, name: key, storedAt: info.storedAt });
    };
    const toCheck = files
      .map((file) => {
        const blocks = Math.floor(file.size / BLOCK_BYTES);
        let from = Math.min(verified.get(file.generation) ?? 0, blocks);
        // Bounded by the number of objects known, whatever size the manifest claims.
        while (
          from < blocks &&
          this.isStored(`${sessionId}/${blockKey(file.generation, from)}`, BLOCK_BYTES)
        ) {
          from++;
        }
        return { file, from, blocks };
      })
      .filter(({ from, blocks }) => from < blocks);
    await forEachLimited(toCheck, CHECK_CONCURRENCY, async ({ file, from, blocks }) => {
      const prefix = `${sessionId}/blocks/${file.generation}/`;
      let infos: Map<string, ObjectInfo>;
      if (blocks - from <= PROBE_AT_MOST) {
        const probes = Array.from({ length: blocks - from }, (_, offset) => from + offset);
        const probed = await Promise.all(probes.map((index) => objects.head(`${prefix}${index}`)));
        infos = new Map();
        probes.forEach((index, position) => {
          const info = probed[position];
          if (info !== null && info !== undefined) infos.set(String(index), info);
        });
      } else {
        infos = await infosByName(objects.list(prefix), prefix);
      }
      const sizes = new Map([...infos].map(([name, info]) => [name, info.size]));
      // Bounded by what is stored plus the keys reported, whatever size the manifest claims.
      let present = 0;
      for (const [name, info] of infos) {
        const index = Number(name);
        if (info.size === BLOCK_BYTES && String(index) === name && index >= from && index < blocks) {
          present++;
          found(blockKey(file.generation, index), info);
        }
      }
      missing.count += blocks - from - present;
      for (let index = from; index < blocks && missing.keys.length < MissingKeys.LISTED; index++) {
        if (sizes.get(String(index)) !== BLOCK_BYTES) missing.keys.push(blockKey(file.generation, index));
      }
    });
    const withTails = files.filter(
      (file) =>
        file.size % BLOCK_BYTES > 0 &&
        !this.isStored(`${sessionId}/${tailKey(checkpointId, file.generation)}`, file.size % BLOCK_BYTES),
    );
    if (withTails.length > 0) {
      const prefix = `${sessionId}/tails/${checkpointId}/`;
      const infos = await infosByName(objects.list(prefix), prefix);
      for (const file of withTails) {
        const info = infos.get(file.generation);
        if (info?.size !== file.size % BLOCK_BYTES) missing.add(tailKey(checkpointId, file.generation));
        else found(tailKey(checkpointId, file.generation), info);
      }
    }
    missing.keys.sort();
    return missing;
  }

  /** True when this instance stored the object `key` of `size` bytes recently enough to vouch for it. */
  private isStored(key: string, size: number): boolean {
    const known = this.stored.get(key);
    return known !== undefined && known.size === size && performance.now() - known.at < KNOWN_OBJECT_MS;
  }

  /**
   * Records the checkpoint in the index if it is still the latest when the record is written (a
   * compare-and-swap on the record, re-checking `latest` after each read): concurrent publishers
   * converge on the true latest, whichever finishes last.
   */
  private async recordInIndex(
    objects: ImmutableObjectStore,
    tenant: string,
    sessionId: string,
    manifest: Manifest,
  ): Promise<void> {
    await this.index.update(tenant, sessionId, async (current) => {
      if (current?.checkpointId === manifest.checkpointId) return null;
      const latest = await objects.readPointer(`${sessionId}/latest`);
      if (latest !== manifest.checkpointId) return null;
      return {
        id: sessionId,
        checkpointId: manifest.checkpointId,
        updatedAt: new Date(this.now()).toISOString(),
        data: manifest.data,
      };
    });
  }

  /** The bytes of one file, read ahead a bounded number of objects, verified as they pass. */
  private async *fileBytes(
    objects: ImmutableObjectStore,
    sessionId: string,
    checkpointId: string,
    file: ManifestFile,
  ): AsyncGenerator<Buffer> {
    const blocks = Math.floor(file.size / BLOCK_BYTES);
    const tailBytes = file.size % BLOCK_BYTES;
    const keys = Array.from({ length: blocks }, (_, index) => blockKey(file.generation, index));
    if (tailBytes > 0) keys.push(tailKey(checkpointId, file.generation));
    const pending: Promise<Buffer | null>[] = [];
    let launched = 0;
    const hash = createHash('sha256');
    for (let position = 0; position < keys.length; position++) {
      while (launched < keys.length && pending.length < READ_AHEAD) {
        const read = objects.get(`${sessionId}/${keys[launched++] ?? ''}`);
        // Awaited in order below; the no-op handler keeps a failure of a later read from being
        // reported as unhandled while an earlier one is awaited.
        read.catch(() => undefined);
        pending.push(read);
      }
      const key = keys[position] ?? '';
      const bytes = await pending.shift();
      const expected = position < blocks ? BLOCK_BYTES : tailBytes;
      if (bytes === null || bytes === undefined || bytes.length !== expected) {
        throw new IntegrityError(`object ${key} of ${file.path} is missing or has the wrong size`);
      }
      hash.update(bytes);
      if (position === keys.length - 1) checkDigest(hash.digest('hex'), file);
      yield bytes;
    }
    if (keys.length === 0) checkDigest(hash.digest('hex'), file);
  }
}

/** Missing object keys: how many in all, and the first {@link MissingKeys.LISTED} of them. */
class MissingKeys {
  static readonly LISTED = 1000;
  readonly keys: string[] = [];
  count = 0;
  /** The objects checked in storage and found with their size (named by keys within the session). */
  readonly found: FoundObject[] = [];

  add(key: string): void {
    this.count++;
    if (this.keys.length < MissingKeys.LISTED) this.keys.push(key);
  }
}

/** Every object key the files of a checkpoint reference (the first 1,000, sorted; all counted). */
function referencedObjects(checkpointId: string, files: readonly ManifestFile[]): MissingKeys {
  const missing = new MissingKeys();
  for (const file of files) {
    const blocks = Math.floor(file.size / BLOCK_BYTES);
    missing.count += blocks;
    for (let index = 0; index < blocks && missing.keys.length < MissingKeys.LISTED; index++) {
      missing.keys.push(blockKey(file.generation, index));
    }
    if (file.size % BLOCK_BYTES > 0) missing.add(tailKey(checkpointId, file.generation));
  }
  missing.keys.sort();
  return missing;
}

/** Objects a publish touches at once. */
const TOUCH_CONCURRENCY = 16;

/** Objects a restore reads ahead of the one it sends (1 MiB of blocks). */
const READ_AHEAD = 16;
/** Generations a publish checks in storage at once. */
const CHECK_CONCURRENCY = 8;

/** Objects an instance remembers having stored (about 8 MB; 65,536 blocks are 4 GiB of files). */
const KNOWN_OBJECTS = 65_536;
/**
 * How long an instance vouches for an object it stored without asking the storage again: shorter
 * than the hour retention spares unreferenced objects for, by a margin for clocks (this instance's,
 * another instance's, the storage's).
 */
const KNOWN_OBJECT_MS = 45 * 60 * 1000;

/** New blocks up to this many are probed one by one; more are checked by listing the generation. */
const PROBE_AT_MOST = 4;

/** Generation → number of full blocks a stored (hence verified) manifest references. */
function verifiedBlocks(manifestBytes: Buffer): Map<string, number> {
  const verified = new Map<string, number>();
  for (const file of deserializeManifest(manifestBytes).files) {
    verified.set(file.generation, Math.floor(file.size / BLOCK_BYTES));
  }
  return verified;
}

function checkDigest(actual: string, file: ManifestFile): void {
  if (actual !== file.sha256) {
    throw new IntegrityError(
      `the bytes of ${file.path} do not match its SHA-256; the stored archive is damaged`,
    );
  }
}

/** Retention is deleting the session (its time to live ran out): nothing can be published meanwhile. */
function beingDeleted(sessionId: string): ConflictError {
  return new ConflictError(
    `session ${sessionId} is being deleted (its retention period ran out); publish again with parent null once it is gone`,
    { latest: null },
  );
}

function staleParent(latest: string | null): ConflictError {
  return new ConflictError(
    latest === null
      ? 'the session has no checkpoint yet: publish with parent null'
      : `the latest checkpoint is ${latest}, not the parent given: rebase on it and publish again`,
    { latest },
  );
}

async function infosByName(
  items: AsyncIterable<ObjectInfo>,
  prefix: string,
): Promise<Map<string, ObjectInfo>> {
  const infos = new Map<string, ObjectInfo>();
  for await (const item of items) infos.set(item.key.slice(prefix.length), item);
  return infos;
}

/**
 * Whether a checkpoint was published (its `latest` moved to it), looking back no further than
 * checkpoints made since `sinceMs`; null when it cannot tell.
 */
async function wasPublished(
  storage: ArchiveStorage,
  tenant: string,
  sessionId: string,
  checkpointId: string,
  sinceMs: number,
): Promise<boolean | null> {
  if ((await storage.index.ownerOf(sessionId)) !== tenant) return false;
  const objects = storage.objectsOf(tenant);
  let id = await objects.readPointer(`${sessionId}/latest`);
  while (id !== null) {
    if (id === checkpointId) return true;
    const bytes = await objects.get(`${sessionId}/checkpoints/${id}`);
    if (bytes === null) return null;
    const manifest = deserializeManifest(bytes);
    if (Date.parse(manifest.createdAt) < sinceMs - 60_000) return false;
    id = manifest.parent;
  }
  return false;
}

/**
 * The session archive's part of the audit trail's repair (see audit/pending.ts): a checkpoint's
 * publish (`archive`) committed when the session's `latest` moved to it.
 */
export function archiveRepairCheck(storage: ArchiveStorage): RepairCheck {
  return {
    kinds: ['archive'],
    fateOf: async (tenant, event, check, trail) => {
      if (await trail.appended(tenant, event.id)) return 'committed';
      const published = await wasPublished(
        storage,
        tenant,
        String(check['sessionId']),
        String(check['checkpointId']),
        event.createdAtMs,
      );
      return published === null ? 'undecided' : published ? 'committed' : 'not-committed';
    },
  };
}
