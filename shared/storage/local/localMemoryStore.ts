import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';

import { lru } from '../../lru';
import { factId, keyDigest, parseFactId, segmentDigests } from '../../memory/layout';
import type {
  FactHeader,
  FactHeaderPage,
  FactPage,
  FactWrite,
  FeedChanges,
  MemoryIndex,
  MemoryStore,
  StoredFact,
  SubtreeDeletion,
} from '../../memory/memoryStore';
import { writeEachAlone } from '../../memory/memoryStore';
import { IntegrityError, InternalError, PreconditionFailedError } from '../../protocol/errors';
import { KeyedMutex } from '../keyedMutex';
import { writeDurableTempFile } from './durableTempFile';
import {
  errnoOf,
  guarded,
  isAbsence,
  makeFoldersDurably,
  readFileNoFollow,
  refuseSymlinks,
  symlinkFound,
  syncFolder,
  unlinkDurably,
} from './localFiles';

/**
 * Memory facts on the local filesystem, under `<dataDir>/memory/<tenant>/`: one folder per
 * namespace segment, named by the segment's digest (shared/memory/layout.ts), and in it one JSON
 * file per fact, `<digest of the key>.json`, holding the names, times, version, incarnation, audit
 * outbox and the sealed value (base64). So a namespace and everything below it is one folder tree (a search reads only that),
 * and names of any length and any characters fit the filesystem's limits.
 *
 * - Writes never change a file in place: a synced temp file replaces the fact by `rename` (the
 *   folder synced after it, before the write is answered; a delete likewise), so a
 *   crash leaves the old fact or the new one. A compare-and-swap reads, checks and renames under a
 *   per-fact lock of this process (the local backend serves one process per data folder).
 * - Versions are random (96 bits) per write, so A→B→A gives three ETags.
 * - Deleting a fact removes the folders it leaves empty; a write racing that removal makes its
 *   folder again.
 * - A tenant's vector index is `<dataDir>/memory-index/<tenant>.json` (`{"dims": n}`), outside
 *   the facts' folder tree, so no scan or deletion of facts meets it.
 * - The change feed is kept in this process's memory, per data folder and tenant: the local
 *   backend serves one process per data folder, so every reader of the feed is in this process,
 *   and a restart starts the feed (with a new epoch) as it starts every cache fed by it. A change
 *   is listed once its file is renamed or unlinked, before the call returns.
 */
export class LocalMemoryStore implements MemoryStore {
  private readonly root: string;
  private readonly tmpDir: string;

  constructor(private readonly dataDir: string) {
    this.root = path.join(dataDir, 'memory');
    this.tmpDir = path.join(dataDir, 'tmp');
  }

  async changes(tenant: string, since: string | null): Promise<FeedChanges> {
    const feed = this.feedOf(tenant);
    const position = `${feed.epoch}:${feed.seq}`;
    if (since === position) return { position, ids: [] };
    const at = since?.lastIndexOf(':') ?? -1;
    const from = since === null ? NaN : Number(since.slice(at + 1));
    if (
      since === null ||
      since.slice(0, at) !== feed.epoch ||
      !Number.isSafeInteger(from) ||
      from > feed.seq ||
      feed.seq - from > feed.ring.length
    ) {
      return { position, ids: null };
    }
    const ids = new Set<string>();
    for (const change of feed.ring.slice(feed.ring.length - (feed.seq - from))) {
      for (const id of change) ids.add(id);
    }
    return { position, ids: [...ids] };
  }

  async fetch(tenant: string, ids: readonly string[]): Promise<Map<string, StoredFact>> {
    return guarded(async () => {
      const found = new Map<string, StoredFact>();
      for (const id of ids) {
        const parsed = parseFactId(id);
        if (parsed === null) continue;
        const file = path.join(this.root, tenant, ...parsed.segments, `${parsed.key}.json`);
        const fact = await readFact(this.dataDir, file);
        if (fact !== null) found.set(id, fact);
      }
      return found;
    });
  }

  private feedOf(tenant: string): LocalFeed {
    const key = JSON.stringify([path.resolve(this.dataDir), tenant]);
    let feed = feeds.get(key);
    if (feed === undefined) {
      feed = { epoch: randomBytes(9).toString('base64url'), seq: 0, ring: [] };
      feeds.set(key, feed);
    }
    return feed;
  }

  /** Lists a change of the rows `ids` in the tenant's feed. */
  private changed(tenant: string, ids: string[]): void {
    if (ids.length === 0) return;
    const feed = this.feedOf(tenant);
    feed.seq++;
    feed.ring.push(ids);
    if (feed.ring.length > LOCAL_FEED_CHANGES) feed.ring.shift();
  }

  async readIndex(tenant: string): Promise<MemoryIndex | null> {
    return guarded(() => readIndexFile(this.dataDir, this.indexFileOf(tenant)));
  }

  async createIndex(tenant: string, index: MemoryIndex): Promise<MemoryIndex> {
    const file = this.indexFileOf(tenant);
    return guarded(() =>
      locks.run(file, async () => {
        const current = await readIndexFile(this.dataDir, file);
        if (current !== null) return current;
        await refuseSymlinks(this.dataDir, this.tmpDir);
        const { temp } = await writeDurableTempFile(
          this.tmpDir,
          Buffer.from(JSON.stringify({ dims: index.dims }), 'utf8'),
        );
        try {
          // Durable like a fact before it is answered: every later vector is checked against it.
          await makeFoldersDurably(path.dirname(file));
          await fs.rename(temp, file);
          await syncFolder(path.dirname(file));
        } catch (error) {
          await fs.rm(temp, { force: true });
          throw error;
        }
        return { dims: index.dims };
      }),
    );
  }

  private indexFileOf(tenant: string): string {
    return path.join(this.dataDir, 'memory-index', `${tenant}.json`);
  }

  async get(tenant: string, namespace: string, key: string): Promise<StoredFact | null> {
    return guarded(async () => {
      const fact = await readFact(this.dataDir, this.fileOf(tenant, namespace, key));
      if (fact !== null && (fact.namespace !== namespace || fact.key !== key)) {
        throw new InternalError('two facts share a storage file; refusing to answer with the other one');
      }
      return fact;
    });
  }

  async write(tenant: string, fact: FactWrite, ifEtag: string | null): Promise<StoredFact> {
    const file = this.fileOf(tenant, fact.namespace, fact.key);
    return guarded(() =>
      locks.run(file, async () => {
        const current = await readFact(this.dataDir, file);
        if (ifEtag === null ? current !== null : current?.etag !== ifEtag) {
          throw new PreconditionFailedError(ifEtag === null ? 'the fact exists' : 'the fact has changed');
        }
        const stored: StoredFact = { ...fact, etag: `"${randomBytes(12).toString('hex')}"` };
        await refuseSymlinks(this.dataDir, this.tmpDir);
        const { temp } = await writeDurableTempFile(this.tmpDir, serialise(stored));
        try {
          for (let attempt = 0; ; attempt++) {
            await makeFoldersDurably(path.dirname(file));
            try {
              await fs.rename(temp, file);
            } catch (error) {
              // The folder was removed by a deletion that emptied it just now: make it again.
              if (errnoOf(error) !== 'ENOENT' || attempt >= 8) throw error;
              continue;
            }
            // Acknowledged only once the new entry is on disk too.
            await syncFolder(path.dirname(file));
            this.changed(tenant, [factId(fact.namespace, fact.key)]);
            return stored;
          }
        } catch (error) {
          await fs.rm(temp, { force: true });
          throw error;
        }
      }),
    );
  }

  async writeMany(
    tenant: string,
    writes: readonly { fact: FactWrite; ifEtag: string | null }[],
  ): Promise<(StoredFact | null)[]> {
    // One file per fact: each write on its own, as `write`.
    return writeEachAlone(this, tenant, writes);
  }

  async delete(tenant: string, namespace: string, key: string, ifEtag?: string): Promise<boolean> {
    const file = this.fileOf(tenant, namespace, key);
    return guarded(() =>
      locks.run(file, async () => {
        const current = await readFact(this.dataDir, file);
        if (current === null) return false;
        if (ifEtag !== undefined && current.etag !== ifEtag) {
          throw new PreconditionFailedError('the fact has changed');
        }
        await unlinkDurably(file);
        this.changed(tenant, [factId(namespace, key)]);
        await this.removeEmptyFolders(tenant, path.dirname(file));
        return true;
      }),
    );
  }

  async relist(tenant: string, ids: readonly string[]): Promise<void> {
    this.changed(tenant, [...ids]);
  }

  async scan(
    tenant: string,
    namespace: string,
    options: { cursor?: string; pageSize: number; part?: number },
  ): Promise<FactPage> {
    return guarded(async () => {
      const base = this.folderOf(tenant, namespace);
      let files = (await factFilesUnder(this.dataDir, base)).sort();
      // A part: the namespace's own files, or the folders below whose digest starts with one digit.
      if (options.part !== undefined) {
        const part = options.part;
        files = files.filter((file) =>
          part === 0 ? !file.includes('/') : file.includes('/') && file.startsWith((part - 1).toString(16)),
        );
      }
      const start =
        options.cursor === undefined ? 0 : files.findIndex((file) => file > (options.cursor as string));
      const chosen = start < 0 ? [] : files.slice(start, start + options.pageSize);
      const facts: StoredFact[] = [];
      for (const file of chosen) {
        const fact = await readFact(this.dataDir, path.join(base, file));
        if (fact !== null) facts.push(fact);
      }
      const last = chosen[chosen.length - 1];
      const more = start >= 0 && start + options.pageSize < files.length;
      return { facts, cursor: more && last !== undefined ? last : null };
    });
  }

  async headers(
    tenant: string,
    namespace: string,
    options: { cursor?: string; pageSize: number },
  ): Promise<FactHeaderPage> {
    const page = await this.scan(tenant, namespace, options);
    return { headers: page.facts.map(headerOf), cursor: page.cursor };
  }

  async namespaces(
    tenant: string,
    prefix: string,
    options: { now: number; max: number },
  ): Promise<{ namespaces: string[]; complete: boolean }> {
    return guarded(async () => {
      const found: string[] = [];
      const visit = async (folder: string): Promise<boolean> => {
        const entries = await listFolder(this.dataDir, folder);
        for (const name of entries.filter((entry) => entry.endsWith('.json')).sort()) {
          const fact = await readFact(this.dataDir, path.join(folder, name));
          if (fact !== null && (fact.expiresAt === null || fact.expiresAt > options.now)) {
            found.push(fact.namespace);
            break;
          }
        }
        if (found.length >= options.max) return false;
        for (const name of entries.filter((entry) => !entry.endsWith('.json')).sort()) {
          if (!(await visit(path.join(folder, name)))) return false;
        }
        return true;
      };
      const complete = await visit(this.folderOf(tenant, prefix));
      return { namespaces: found, complete };
    });
  }

  async deleteSubtree(
    tenant: string,
    namespace: string,
    options: { now: number; budget: number },
  ): Promise<SubtreeDeletion> {
    return guarded(async () => {
      const base = this.folderOf(tenant, namespace);
      const files = (await factFilesUnder(this.dataDir, base)).sort();
      let deleted = 0;
      const folders = new Set<string>();
      for (const relative of files.slice(0, options.budget)) {
        const file = path.join(base, relative);
        await locks.run(file, async () => {
          const fact = await readFact(this.dataDir, file);
          if (fact === null) return;
          await unlinkDurably(file);
          this.changed(tenant, [factId(fact.namespace, fact.key)]);
          folders.add(path.dirname(file));
          if (fact.expiresAt === null || fact.expiresAt > options.now) deleted++;
        });
      }
      // Deepest first, so that a parent is emptied by its children before it is tried.
      for (const folder of [...folders].sort((a, b) => b.length - a.length)) {
        await this.removeEmptyFolders(tenant, folder);
      }
      return { deleted, more: files.length > options.budget };
    });
  }

  async pruneExpired(
    tenant: string,
    options: { now: number; budget: number; keep?: (row: FactHeader) => Promise<boolean> },
  ): Promise<SubtreeDeletion> {
    return guarded(async () => {
      const base = this.folderOf(tenant, '');
      let deleted = 0;
      for (const relative of (await factFilesUnder(this.dataDir, base)).sort()) {
        const file = path.join(base, relative);
        const found = await readFact(this.dataDir, file);
        if (found === null || found.expiresAt === null || found.expiresAt > options.now) continue;
        if (options.keep !== undefined && (await options.keep(headerOf(found)))) continue;
        if (deleted >= options.budget) return { deleted, more: true };
        await locks.run(file, async () => {
          // On the version found: a fact written again since then is not expired any more.
          const current = await readFact(this.dataDir, file);
          if (current?.etag !== found.etag) return;
          await unlinkDurably(file);
          this.changed(tenant, [factId(found.namespace, found.key)]);
          await this.removeEmptyFolders(tenant, path.dirname(file));
          deleted++;
        });
      }
      return { deleted, more: false };
    });
  }

  private folderOf(tenant: string, namespace: string): string {
    return path.join(this.root, tenant, ...segmentDigests(namespace));
  }

  private fileOf(tenant: string, namespace: string, key: string): string {
    return path.join(this.folderOf(tenant, namespace), `${keyDigest(key)}.json`);
  }

  /** Removes `folder` and the folders above it while they are empty, up to the tenant's folder. */
  private async removeEmptyFolders(tenant: string, folder: string): Promise<void> {
    const top = path.join(this.root, tenant);
    for (let current = folder; current.startsWith(top + path.sep); current = path.dirname(current)) {
      try {
        await fs.rmdir(current);
      } catch (error) {
        const code = errnoOf(error);
        if (code === 'ENOTEMPTY' || code === 'EEXIST' || isAbsence(error)) return;
        throw error;
      }
    }
  }
}

/** One lock table per process: two store objects on the same folder must not race each other. */
const locks = new KeyedMutex();

/** Changes a local feed remembers the ids of; a reader further behind reads afresh. */
const LOCAL_FEED_CHANGES = 256;

interface LocalFeed {
  /** Given when the feed starts (in this process): positions of another epoch are unknown. */
  readonly epoch: string;
  seq: number;
  /** The ids of the last changes, oldest first (change `seq` last). */
  readonly ring: string[][];
}

/**
 * The feeds of this process, per data folder and tenant (bounded: a feed dropped starts again
 * with another epoch, and its readers read afresh).
 */
const feeds = lru<string, LocalFeed>(10_000);

interface FactFile {
  readonly namespace: string;
  readonly key: string;
  readonly createdAt: number;
  readonly updatedAt: number;
  readonly expiresAt: number | null;
  readonly etag: string;
  /** Absent in files written before incarnations and outboxes were kept. */
  readonly incarnation?: string | null;
  readonly outbox?: string | null;
  /** The sealed value, base64. */
  readonly value: string;
}

function headerOf(fact: StoredFact): FactHeader {
  const { namespace, key, createdAt, updatedAt, expiresAt, incarnation, outbox, etag } = fact;
  return { namespace, key, createdAt, updatedAt, expiresAt, incarnation, outbox, etag };
}

function serialise(fact: StoredFact): Buffer {
  const file: FactFile = { ...fact, value: fact.value.toString('base64') };
  return Buffer.from(JSON.stringify(file), 'utf8');
}

async function readFact(dataDir: string, file: string): Promise<StoredFact | null> {
  const bytes = await readFileNoFollow(dataDir, file);
  if (bytes === null) return null;
  try {
    const parsed = JSON.parse(bytes.toString('utf8')) as FactFile;
    return {
      namespace: parsed.namespace,
      key: parsed.key,
      createdAt: parsed.createdAt,
      updatedAt: parsed.updatedAt,
      expiresAt: parsed.expiresAt,
      etag: parsed.etag,
      incarnation: parsed.incarnation ?? null,
      outbox: parsed.outbox ?? null,
      value: Buffer.from(parsed.value, 'base64'),
    };
  } catch {
    throw new IntegrityError('a stored fact file is damaged');
  }
}

async function readIndexFile(dataDir: string, file: string): Promise<MemoryIndex | null> {
  const bytes = await readFileNoFollow(dataDir, file);
  if (bytes === null) return null;
  try {
    const parsed = JSON.parse(bytes.toString('utf8')) as { dims?: unknown };
    if (typeof parsed.dims === 'number' && Number.isSafeInteger(parsed.dims)) return { dims: parsed.dims };
  } catch {
    // Reported below.
  }
  throw new IntegrityError("a tenant's memory index file is damaged");
}

/** The names in `folder`; a symbolic link on its path or in it is refused (see refuseSymlinks). */
async function listFolder(dataDir: string, folder: string): Promise<string[]> {
  await refuseSymlinks(dataDir, folder);
  try {
    const entries = await fs.readdir(folder, { withFileTypes: true });
    const link = entries.find((entry) => entry.isSymbolicLink());
    if (link !== undefined) {
      throw symlinkFound(path.relative(dataDir, path.join(folder, link.name)).split(path.sep).join('/'));
    }
    return entries.map((entry) => entry.name);
  } catch (error) {
    if (isAbsence(error)) return [];
    throw error;
  }
}

/** Paths (relative to `folder`, `/`-separated) of every fact file in it and below. */
async function factFilesUnder(dataDir: string, folder: string): Promise<string[]> {
  const found: string[] = [];
  const walk = async (current: string, relative: string): Promise<void> => {
    for (const name of await listFolder(dataDir, current)) {
      const child = relative === '' ? name : `${relative}/${name}`;
      if (name.endsWith('.json')) found.push(child);
      else await walk(path.join(current, name), child);
    }
  };
  await walk(folder, '');
  return found;
}
