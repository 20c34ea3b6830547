import { deleteObjects } from '../archive/sessionRetention';
import { forEachLimited } from '../protocol/pool';
import { MANIFEST_FILE, partCount, partSize } from '../protocol/snapshots/identifiers';
import type { PruneBudget, PruneCounts } from '../retention/budget';
import type { PrunePart } from '../retention/parts';
import type { ImmutableObjectStore, ObjectInfo } from '../storage/immutableObjectStore';

/**
 * The garbage of one tenant's snapshot storage (docs/retention.md): parts no stored manifest
 * references, signatures and parent records whose manifest is not stored, and id entries of no
 * stored snapshot, once older than the grace (a publish stores its parts, the id entry, the parent
 * record and the signature before its manifest; an instance vouches for parts it stored for 45
 * minutes). Snapshots themselves are deleted only on request; deleting one already collects its
 * own parts, and this collects what a failed collection or an abandoned upload left.
 */

const READ_CONCURRENCY = 16;

/** Everything stored in a tenant's snapshot storage, read for collection and verification. */
export interface SnapshotContents {
  readonly objects: Map<string, ObjectInfo>;
  /** Manifest key → referenced files (sha256 → size); null: stored but unreadable. */
  readonly manifests: Map<string, Map<string, number> | null>;
  /** Workspace id → its latest snapshot id. */
  readonly latest: Map<string, string>;
}

export async function readSnapshots(store: ImmutableObjectStore): Promise<SnapshotContents> {
  const objects = new Map<string, ObjectInfo>();
  for await (const item of store.list('')) objects.set(item.key, item);
  const manifests = new Map<string, Map<string, number> | null>();
  const manifestKeys = [...objects.keys()].filter(
    (key) => key.startsWith('workspaces/') && key.endsWith(`/${MANIFEST_FILE}`),
  );
  await forEachLimited(manifestKeys, READ_CONCURRENCY, async (key) => {
    const bytes = await store.get(key);
    if (bytes === null) return;
    manifests.set(key, filesOf(bytes));
  });
  const latest = new Map<string, string>();
  const pointers = [...objects.keys()].filter((key) => /^workspaces\/[^/]+\/latest$/.test(key));
  await forEachLimited(pointers, READ_CONCURRENCY, async (key) => {
    const id = await store.readPointer(key);
    if (id !== null) latest.set(key.split('/')[1] ?? '', id);
  });
  return { objects, manifests, latest };
}

function filesOf(manifest: Buffer): Map<string, number> | null {
  try {
    const parsed = JSON.parse(manifest.toString('utf8')) as { files: { sha256: string; size: number }[] };
    return new Map(parsed.files.filter((file) => file.size > 0).map((file) => [file.sha256, file.size]));
  } catch {
    return null;
  }
}

/** Part keys (`objects/<sha256>/<part>`) every stored manifest references, with their sizes. */
export function referencedParts(contents: SnapshotContents): Map<string, number> | null {
  const parts = new Map<string, number>();
  for (const files of contents.manifests.values()) {
    // An unreadable manifest: what it references cannot be known, so nothing may be collected.
    if (files === null) return null;
    for (const [sha256, size] of files) {
      for (let part = 0; part < partCount(size); part++)
        parts.set(`objects/${sha256}/${part}`, partSize(size, part));
    }
  }
  return parts;
}

/** Keys that nothing references: what {@link collectSnapshotGarbage} deletes once they are old. */
export function unreferencedSnapshotObjects(contents: SnapshotContents): ObjectInfo[] {
  const parts = referencedParts(contents);
  if (parts === null) return [];
  const manifestFolders = new Set(
    [...contents.manifests.keys()].map((key) => key.slice(0, -MANIFEST_FILE.length)),
  );
  const snapshotIds = new Set([...contents.manifests.keys()].map((key) => key.split('/')[3] ?? ''));
  const found: ObjectInfo[] = [];
  for (const [key, info] of contents.objects) {
    if (key.startsWith('objects/')) {
      if (!parts.has(key)) found.push(info);
    } else if (key.startsWith('ids/')) {
      if (!snapshotIds.has(key.slice('ids/'.length))) found.push(info);
    } else if (/^workspaces\/[^/]+\/snapshots\/[^/]+\/(manifest\.sig|parent)$/.test(key)) {
      if (!manifestFolders.has(key.slice(0, key.lastIndexOf('/') + 1))) found.push(info);
    }
  }
  return found;
}

/** Deletes the tenant's unreferenced snapshot objects older than the grace; false when the budget ran out. */
export async function collectSnapshotGarbage(options: {
  readonly store: ImmutableObjectStore;
  readonly graceMs: number;
  readonly now: number;
  readonly budget: PruneBudget;
  readonly counts: PruneCounts;
}): Promise<boolean> {
  const contents = await readSnapshots(options.store);
  const storedBefore = new Date(options.now - options.graceMs);
  return deleteObjects(
    options.store,
    unreferencedSnapshotObjects(contents),
    storedBefore,
    options.budget,
    options.counts,
  );
}

/** The snapshots' part of the prune run: on full passes, the garbage of each tenant's snapshots. */
export function snapshotPrunePart(stores: { forTenant(tenant: string): ImmutableObjectStore }): PrunePart {
  return {
    name: 'snapshots',
    prune: async ({ tenant, domains, full, graceMs, now, budget, counts }) => {
      if (!full || !domains.has('snapshots')) return { complete: true };
      return {
        complete: await collectSnapshotGarbage({
          store: stores.forTenant(tenant),
          graceMs,
          now,
          budget,
          counts,
        }),
      };
    },
  };
}
