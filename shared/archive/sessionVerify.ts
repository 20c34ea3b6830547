import { createHash } from 'node:crypto';

import { BLOCK_BYTES, blockKey, tailKey } from '../protocol/archive/identifiers';
import type { Manifest, ManifestFile } from '../protocol/archive/manifest';
import { IntegrityError } from '../protocol/errors';
import type { VerifyPart } from '../retention/parts';
import type { HashSample, VerifyCollector } from '../retention/verifyReport';
import { sampled } from '../retention/verifyReport';
import type { ImmutableObjectStore } from '../storage/immutableObjectStore';
import type { SessionIndex, SessionRecord } from '../storage/sessionIndex';
import type { ArchiveStorage } from './sealedArchive';
import { readSession, referencedObjects, SESSION_TOMBSTONE } from './sessionRetention';

/**
 * `cairn verify` for one tenant's archive sessions (those in its index): `latest` names a stored
 * manifest, every object the chain of manifests from `latest` references is stored with its size,
 * files hash to their SHA-256 (one file of the latest checkpoint per session, or every file of
 * every checkpoint with `readData`), and objects and manifests no kept manifest references are
 * orphans. A session being deleted is skipped.
 */

const INDEX_PAGE = 1000;

export async function verifySessions(
  objects: ImmutableObjectStore,
  index: SessionIndex,
  tenant: string,
  collector: VerifyCollector,
  sample: HashSample,
  /** Opens a record's sealed `data` (`index` is read as stored); absent when nothing is sealed. */
  openIndexData?: ArchiveStorage['openIndexData'],
): Promise<void> {
  let after: string | undefined;
  do {
    const page = await index.list(tenant, { limit: INDEX_PAGE, ...(after === undefined ? {} : { after }) });
    for (const record of page.sessions) {
      if (openIndexData !== undefined) await verifyIndexData(openIndexData, tenant, record, collector);
      await verifySession(objects, record.id, collector, sample);
    }
    after = page.next ?? undefined;
  } while (after !== undefined);
}

/**
 * A record whose sealed `data` does not open (changed or moved in the table) fails the listing and
 * reads of its session with an integrity error: damage to report, as an object that does not open
 * is. Its session's objects are still checked: they do not depend on the record.
 */
async function verifyIndexData(
  openIndexData: NonNullable<ArchiveStorage['openIndexData']>,
  tenant: string,
  record: SessionRecord,
  collector: VerifyCollector,
): Promise<void> {
  try {
    await openIndexData(tenant, record);
  } catch (error) {
    if (!(error instanceof IntegrityError)) throw error;
    collector.finding({
      domain: 'sessions',
      kind: 'unreadable',
      where: `session ${record.id}`,
      key: `index/${record.id}`,
      detail: `the data of its session index record does not open: ${error.message}`,
    });
  }
}

async function verifySession(
  objects: ImmutableObjectStore,
  sessionId: string,
  collector: VerifyCollector,
  sample: HashSample,
): Promise<void> {
  const where = `session ${sessionId}`;
  const contents = await readSession(objects, sessionId, collector.now - collector.graceMs);
  if (contents.latest === SESSION_TOMBSTONE) return;
  collector.checked.sessions += 1;
  if (contents.latest === null || !contents.manifests.has(contents.latest)) {
    collector.finding({
      domain: 'sessions',
      kind: 'dangling_latest',
      where,
      key: `${sessionId}/latest`,
      detail:
        contents.latest === null
          ? 'the session index lists the session, but it has no latest checkpoint'
          : `latest names checkpoint ${contents.latest}, which is not stored`,
    });
  }
  if (contents.gap !== null && contents.gap !== contents.latest) {
    const child = contents.chain.at(-1) ?? '';
    collector.finding({
      domain: 'sessions',
      kind: 'missing',
      where,
      key: `${sessionId}/checkpoints/${contents.gap}`,
      detail: `checkpoint ${child} names checkpoint ${contents.gap} as its parent; its manifest is not stored`,
    });
  }
  const referenced = new Set<string>();
  for (const id of contents.kept) {
    const manifest = contents.manifests.get(id);
    if (manifest === null) {
      collector.finding({
        domain: 'sessions',
        kind: 'unreadable',
        where,
        key: `${sessionId}/checkpoints/${id}`,
        detail: `the manifest of checkpoint ${id} is not readable`,
      });
      continue;
    }
    if (manifest === undefined) continue;
    collector.checked.manifests += 1;
    for (const [key, size] of referencedObjects(manifest)) {
      if (referenced.has(key)) continue;
      referenced.add(key);
      collector.checked.archiveObjects += 1;
      const stored = contents.objects.get(key);
      if (stored === undefined) {
        collector.finding({
          domain: 'sessions',
          kind: 'missing',
          where,
          key: `${sessionId}/${key}`,
          detail: `checkpoint ${id} references it; it is not stored`,
        });
      } else if (stored.size !== size) {
        collector.finding({
          domain: 'sessions',
          kind: 'wrong_size',
          where,
          key: `${sessionId}/${key}`,
          detail: `checkpoint ${id} references ${size} bytes; ${stored.size} are stored`,
        });
      }
    }
  }
  for (const [key, info] of contents.objects) {
    const manifestId = key.startsWith('checkpoints/') ? key.slice('checkpoints/'.length) : null;
    if (manifestId === null ? !referenced.has(key) : !contents.kept.has(manifestId)) {
      collector.orphan('sessions', info.key, info.size, info.storedAt);
    }
  }
  // Content: every file of every checkpoint of the chain, or one file of the latest.
  const files: { manifest: Manifest; file: ManifestFile }[] = [];
  const chain = sample.readData ? contents.chain : contents.chain.slice(0, 1);
  for (const id of chain) {
    const manifest = contents.manifests.get(id);
    if (manifest) for (const file of manifest.files) files.push({ manifest, file });
  }
  const chosen = sample.readData ? files : sampled(files, { ...sample, oneIn: Number.POSITIVE_INFINITY });
  for (const { manifest, file } of chosen) {
    const hash = await hashFile(objects, sessionId, manifest.checkpointId, file);
    if (hash === null) continue;
    if (typeof hash === 'object') {
      collector.finding({
        domain: 'sessions',
        kind: 'unreadable',
        where,
        key: `${sessionId}/${hash.unreadable}`,
        detail: `an object of ${file.path} does not open: it was changed, moved, or sealed with a key that is not configured`,
      });
      continue;
    }
    collector.hashed(file.size);
    if (hash !== file.sha256) {
      collector.finding({
        domain: 'sessions',
        kind: 'wrong_hash',
        where,
        key: `${sessionId}/checkpoints/${manifest.checkpointId}`,
        detail: `the bytes of ${file.path} do not match its SHA-256`,
      });
    }
  }
}

/**
 * The SHA-256 of a file read object by object; null when an object is missing or of the wrong size
 * (reported by the size checks), the key of the first object that does not open when sealed.
 */
async function hashFile(
  objects: ImmutableObjectStore,
  sessionId: string,
  checkpointId: string,
  file: ManifestFile,
): Promise<string | null | { unreadable: string }> {
  const hash = createHash('sha256');
  const blocks = Math.floor(file.size / BLOCK_BYTES);
  const keys = Array.from({ length: blocks }, (_, index) => blockKey(file.generation, index));
  if (file.size % BLOCK_BYTES > 0) keys.push(tailKey(checkpointId, file.generation));
  for (const [position, key] of keys.entries()) {
    let bytes: Buffer | null;
    try {
      bytes = await objects.get(`${sessionId}/${key}`);
    } catch (error) {
      if (error instanceof IntegrityError) return { unreadable: key };
      throw error;
    }
    const expected = position < blocks ? BLOCK_BYTES : file.size % BLOCK_BYTES;
    if (bytes === null || bytes.length !== expected) return null;
    hash.update(bytes);
  }
  return hash.digest('hex');
}

/** The session archive's part of `cairn verify`, for tenants that store sessions. */
export function sessionVerifyPart(storage: ArchiveStorage): VerifyPart {
  return {
    name: 'sessions',
    verify: async (tenant, domains, collector, sample) => {
      if (domains.has('sessions')) {
        const { index, openIndexData } = storage;
        await verifySessions(storage.objectsOf(tenant), index, tenant, collector, sample, openIndexData);
      }
    },
  };
}
