import { BLOCK_BYTES, blockKey, tailKey } from '../protocol/archive/identifiers';
import { deserializeManifest, type Manifest } from '../protocol/archive/manifest';
import { IntegrityError } from '../protocol/errors';
import { forEachLimited } from '../protocol/pool';
import { countObject, type PruneBudget, type PruneCounts } from '../retention/budget';
import type { PrunePart } from '../retention/parts';
import { withoutSessionIntent, withSessionIntent } from '../retention/pruneState';
import type { ImmutableObjectStore, ObjectInfo } from '../storage/immutableObjectStore';
import type { SessionIndex, SessionRecord } from '../storage/sessionIndex';
import type { ArchiveStorage } from './sealedArchive';

/**
 * Retention of one tenant's archive sessions (docs/retention.md): sessions whose latest checkpoint
 * was published longer ago than the time to live are deleted, and a full pass collects what no
 * kept manifest references in the others.
 *
 * Deleting a session, safe when runs overlap or die:
 * 1. an intent names the session (the prune state), so that the next run finishes a deletion this
 *    one began;
 * 2. `latest` moves from the checkpoint that expired to {@link SESSION_TOMBSTONE} by
 *    compare-and-swap: the decision, taken by exactly one run (which counts the session), and lost
 *    to a publish that came first. While the tombstone stands, reads answer 404 and publishes 409;
 * 3. the index record goes (the session leaves the tenant's listing), then the manifests, then the
 *    blocks and tails stored before the grace period (younger ones wait: an instance vouches for
 *    objects it stored in the last 45 minutes, see SessionArchive);
 * 4. once nothing is left, the tombstone is removed and the intent with it. The owner record stays
 *    (owners never change), so the id remains the tenant's.
 *
 * Collecting a kept session: the manifests kept are the chain from `latest` back, those published
 * onto `latest` (a publish that may still complete) and those younger than the grace; objects no
 * kept manifest references go once older than the grace, manifests before the objects.
 */

/** `latest` of a session being deleted; never a checkpoint id (`~` is not in the id alphabet). */
export const SESSION_TOMBSTONE = '~deleting';

export interface SessionIntentLog {
  add(sessionId: string): Promise<void>;
  remove(sessionId: string): Promise<void>;
}

export interface SessionPassOptions {
  readonly objects: ImmutableObjectStore;
  readonly index: SessionIndex;
  readonly tenant: string;
  readonly ttlMs: number | null;
  readonly graceMs: number;
  readonly now: number;
  readonly budget: PruneBudget;
  readonly counts: PruneCounts;
  /** Also collect the garbage of kept sessions. */
  readonly full: boolean;
  readonly intents: readonly string[];
  readonly intentLog: SessionIntentLog;
}

const INDEX_PAGE = 1000;
const SESSION_CONCURRENCY = 4;
const READ_CONCURRENCY = 16;

/** Prunes the tenant's sessions; false when the budget ran out first. */
export async function pruneSessions(options: SessionPassOptions): Promise<boolean> {
  for (const sessionId of options.intents) {
    if (options.budget.exhausted) return false;
    if (await continueDeletion(sessionId, options)) await options.intentLog.remove(sessionId);
  }
  if (options.ttlMs === null && !options.full) return true;
  let after: string | undefined;
  do {
    if (options.budget.exhausted) return false;
    const page = await options.index.list(options.tenant, {
      limit: INDEX_PAGE,
      ...(after === undefined ? {} : { after }),
    });
    let complete = true;
    await forEachLimited(
      page.sessions,
      SESSION_CONCURRENCY,
      async (record) => {
        const done = isExpired(record, options)
          ? await deleteSession(record, options)
          : options.full
            ? await collectSession(record.id, options)
            : true;
        if (!done) complete = false;
      },
      () => options.budget.exhausted,
    );
    if (!complete || options.budget.exhausted) return false;
    after = page.next ?? undefined;
  } while (after !== undefined);
  return true;
}

function isExpired(record: SessionRecord, options: SessionPassOptions): boolean {
  return options.ttlMs !== null && Date.parse(record.updatedAt) <= options.now - options.ttlMs;
}

const latestKey = (sessionId: string) => `${sessionId}/latest`;
const manifestKey = (sessionId: string, checkpointId: string) => `${sessionId}/checkpoints/${checkpointId}`;

/** Deletes an expired session (see the module comment); false when the budget cut it short. */
async function deleteSession(record: SessionRecord, options: SessionPassOptions): Promise<boolean> {
  const { objects } = options;
  const sessionId = record.id;
  const latest = await objects.readPointer(latestKey(sessionId));
  if (latest === null) return true;
  if (latest !== SESSION_TOMBSTONE) {
    // The index is written after `latest`: judge by the latest manifest, which a publish that
    // crashed before the index may have moved on.
    const manifest = await readManifestIfReadable(objects, sessionId, latest);
    const publishedAt = manifest === null ? record.updatedAt : manifest.createdAt;
    if (options.ttlMs === null || Date.parse(publishedAt) > options.now - options.ttlMs) return true;
  }
  await options.intentLog.add(sessionId);
  if (latest !== SESSION_TOMBSTONE) {
    const swap = await objects.swapPointer(latestKey(sessionId), latest, SESSION_TOMBSTONE);
    if (swap.swapped) {
      options.counts.sessionsDeleted += 1;
    } else if (swap.current !== SESSION_TOMBSTONE) {
      // A publish came first: the session lives on.
      await options.intentLog.remove(sessionId);
      return true;
    }
  }
  const done = await continueDeletion(sessionId, options);
  if (done) await options.intentLog.remove(sessionId);
  // Objects younger than the grace keep the deletion open (the intent stays): not the budget's doing.
  return done || !options.budget.exhausted;
}

/**
 * Deletes what is left of a session being deleted. True when there is nothing more to do: nothing
 * is left (the tombstone is then removed), or the tombstone is gone already (the deletion finished,
 * and anything stored since belongs to the session's new life).
 */
async function continueDeletion(sessionId: string, options: SessionPassOptions): Promise<boolean> {
  const { objects, budget, counts } = options;
  if ((await objects.readPointer(latestKey(sessionId))) !== SESSION_TOMBSTONE) return true;
  await options.index.remove(options.tenant, sessionId);
  const storedBefore = new Date(options.now - options.graceMs);
  const listed: ObjectInfo[] = [];
  for await (const item of objects.list(`${sessionId}/`)) {
    if (item.key !== latestKey(sessionId)) listed.push(item);
  }
  const isManifest = (item: ObjectInfo) => item.key.startsWith(`${sessionId}/checkpoints/`);
  const others = listed.filter((item) => !isManifest(item));
  const notDeleted: string[] = [];
  if (!(await deleteObjects(objects, listed.filter(isManifest), undefined, budget, counts, notDeleted))) {
    return false;
  }
  if (!(await deleteObjects(objects, others, storedBefore, budget, counts, notDeleted))) return false;
  if (others.some((item) => item.storedAt >= storedBefore)) return false;
  // A delete that deleted nothing found the object absent, or younger than the listing said: the
  // rewrap job re-seals objects in place, and on Blob that moves their Last-Modified. Such an
  // object is still there: the deletion is not done.
  const stillThere = await Promise.all(notDeleted.map((key) => objects.head(key)));
  if (stillThere.some((info) => info !== null)) return false;
  await objects.swapPointer(latestKey(sessionId), SESSION_TOMBSTONE, null);
  return true;
}

/** The manifest, or null when it is not stored or does not open (a sealed manifest moved or damaged). */
async function readManifestIfReadable(
  objects: ImmutableObjectStore,
  sessionId: string,
  checkpointId: string,
): Promise<Manifest | null> {
  try {
    const bytes = await objects.get(manifestKey(sessionId, checkpointId));
    return bytes === null ? null : deserializeManifest(bytes);
  } catch (error) {
    if (error instanceof IntegrityError || error instanceof SyntaxError) return null;
    throw error;
  }
}

/**
 * Deletes objects within the budget, each counted when this call removed it; with `storedBefore`,
 * an object stored at or after it stays (checked by the store, atomically where it can). True when
 * every object was attempted.
 */
export async function deleteObjects(
  objects: ImmutableObjectStore,
  items: readonly ObjectInfo[],
  storedBefore: Date | undefined,
  budget: PruneBudget,
  counts: PruneCounts,
  /** Gets the keys whose delete deleted nothing (absent, or younger than `storedBefore` by now). */
  notDeleted?: string[],
): Promise<boolean> {
  let complete = true;
  await forEachLimited(
    items.filter((item) => storedBefore === undefined || item.storedAt < storedBefore),
    READ_CONCURRENCY,
    async (item) => {
      if (!budget.take()) {
        complete = false;
        return;
      }
      const options = storedBefore === undefined ? {} : { storedBefore };
      if (await budget.deleting(() => objects.delete(item.key, options))) {
        countObject(counts, item.size);
      } else {
        notDeleted?.push(item.key);
      }
    },
    () => !complete,
  );
  return complete;
}

/** The object keys (within the session) that the files of a manifest reference, with their sizes. */
export function referencedObjects(manifest: Manifest): Map<string, number> {
  const referenced = new Map<string, number>();
  for (const file of manifest.files) {
    const blocks = Math.floor(file.size / BLOCK_BYTES);
    for (let index = 0; index < blocks; index++)
      referenced.set(blockKey(file.generation, index), BLOCK_BYTES);
    const tail = file.size % BLOCK_BYTES;
    if (tail > 0) referenced.set(tailKey(manifest.checkpointId, file.generation), tail);
  }
  return referenced;
}

/** What a session holds, read for collection and verification. */
export interface SessionContents {
  readonly latest: string | null;
  /** Every stored object but `latest`, by key within the session (`blocks/…`, `tails/…`, `checkpoints/…`). */
  readonly objects: Map<string, ObjectInfo>;
  /** Every stored manifest, by checkpoint id (null: stored but unreadable). */
  readonly manifests: Map<string, Manifest | null>;
  /** The chain from `latest` back, as far as manifests are stored. */
  readonly chain: string[];
  /**
   * The checkpoint of the chain (`latest`, or a parent one names) whose manifest is not stored, or
   * null when the chain reaches its first checkpoint.
   */
  readonly gap: string | null;
  /**
   * The manifests kept: the chain, those published onto `latest`, and those younger than the grace;
   * every manifest when the chain does not reach its first checkpoint (a manifest of it is not
   * stored or not readable).
   */
  readonly kept: Set<string>;
}

export async function readSession(
  objects: ImmutableObjectStore,
  sessionId: string,
  youngSince: number,
): Promise<SessionContents> {
  const prefix = `${sessionId}/`;
  const [latest, listed] = await Promise.all([
    objects.readPointer(latestKey(sessionId)),
    (async () => {
      const found = new Map<string, ObjectInfo>();
      for await (const item of objects.list(prefix)) {
        const key = item.key.slice(prefix.length);
        if (key !== 'latest') found.set(key, item);
      }
      return found;
    })(),
  ]);
  const manifests = new Map<string, Manifest | null>();
  const ids = [...listed.keys()]
    .filter((key) => key.startsWith('checkpoints/'))
    .map((key) => key.slice('checkpoints/'.length));
  await forEachLimited(ids, READ_CONCURRENCY, async (id) => {
    let bytes: Buffer | null;
    try {
      bytes = await objects.get(manifestKey(sessionId, id));
    } catch (error) {
      // A sealed manifest that does not open: unreadable, like one that does not parse.
      if (!(error instanceof IntegrityError)) throw error;
      manifests.set(id, null);
      return;
    }
    if (bytes === null) return;
    try {
      manifests.set(id, deserializeManifest(bytes));
    } catch {
      manifests.set(id, null);
    }
  });
  const chain: string[] = [];
  const live = latest !== null && latest !== SESSION_TOMBSTONE ? latest : null;
  let gap: string | null = null;
  let unreadable = false;
  for (let id = live; id !== null && !chain.includes(id);) {
    const manifest = manifests.get(id);
    if (manifest === undefined) {
      gap = id;
      break;
    }
    chain.push(id);
    unreadable = manifest === null;
    id = manifest?.parent ?? null;
  }
  const kept = new Set(chain);
  // The chain does not reach its first checkpoint (damage: retention never removes a manifest of
  // the chain): `latest` or a parent names a manifest that is not stored, or one that cannot be
  // read. What the checkpoints beyond reference cannot be known, so every manifest counts as kept
  // and nothing of the session is collected.
  const dangling = gap !== null || unreadable;
  for (const [id, manifest] of manifests) {
    if (dangling) {
      kept.add(id);
      continue;
    }
    const stored = listed.get(`checkpoints/${id}`);
    const young = stored !== undefined && stored.storedAt.getTime() >= youngSince;
    // Unreadable manifests are kept: what they reference cannot be known.
    if (manifest === null || young || (live !== null && manifest.parent === live)) kept.add(id);
  }
  return { latest, objects: listed, manifests, chain, gap, kept };
}

/** Collects the garbage of a kept session; false when the budget cut it short. */
async function collectSession(sessionId: string, options: SessionPassOptions): Promise<boolean> {
  const { objects, budget, counts } = options;
  const storedBefore = new Date(options.now - options.graceMs);
  const contents = await readSession(objects, sessionId, storedBefore.getTime());
  if (contents.latest === null || contents.latest === SESSION_TOMBSTONE) return true;
  const referenced = new Set<string>();
  for (const id of contents.kept) {
    const manifest = contents.manifests.get(id);
    if (manifest !== null && manifest !== undefined) {
      for (const key of referencedObjects(manifest).keys()) referenced.add(key);
    }
  }
  const doomedManifests: ObjectInfo[] = [];
  const doomedObjects: ObjectInfo[] = [];
  for (const [key, info] of contents.objects) {
    if (key.startsWith('checkpoints/')) {
      if (!contents.kept.has(key.slice('checkpoints/'.length))) doomedManifests.push(info);
    } else if (!referenced.has(key)) {
      doomedObjects.push(info);
    }
  }
  if (!(await deleteObjects(objects, doomedManifests, storedBefore, budget, counts))) return false;
  return deleteObjects(objects, doomedObjects, storedBefore, budget, counts);
}

/**
 * The session archive's part of the prune run: each tenant's sessions (time to live, garbage on
 * full passes), finishing first the deletions an earlier run began (the prune state's intents).
 */
export function sessionPrunePart(storage: ArchiveStorage): PrunePart {
  return {
    name: 'sessions',
    prune: async (pass) => {
      const { tenant, state, policy } = pass;
      if (!pass.domains.has('sessions') && state.sessionIntents.length === 0) return { complete: true };
      const complete = await pruneSessions({
        objects: storage.objectsOf(tenant),
        index: storage.index,
        tenant,
        ttlMs: policy.sessionTtlSeconds === null ? null : policy.sessionTtlSeconds * 1000,
        graceMs: pass.graceMs,
        now: pass.now,
        budget: pass.budget,
        counts: pass.counts,
        full: pass.full,
        intents: state.sessionIntents.map((intent) => intent.sessionId),
        intentLog: {
          add: async (sessionId) =>
            void (await pass.updateState((s) =>
              withSessionIntent(s, sessionId, new Date(pass.clock()).toISOString()),
            )),
          remove: async (sessionId) =>
            void (await pass.updateState((s) => withoutSessionIntent(s, sessionId))),
        },
      });
      return { complete };
    },
  };
}
