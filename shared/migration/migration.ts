import { promises as fs } from 'node:fs';
import path from 'node:path';

import {
  CairnError,
  InvalidArgumentError,
  PreconditionFailedError,
  StorageUnavailableError,
} from '../protocol/errors';
import { commonPrefix, compareKeys, type WalkEntry, walkInKeyOrder } from '../protocol/keyOrderWalk';
import { validateKey } from '../protocol/keys';
import { forEachLimited } from '../protocol/pool';
import type { KeyValueStore } from '../storage/keyValueStore';
import { isInsideFolder } from './jobInput';

/**
 * Moving a machine's local state into a tenant's key/value space: every file under a source root is copied to `prefix/relative/path`
 * (the relative path alone for an empty prefix); a key that exists is skipped, never overwritten;
 * sources are never changed; a missing root is an error naming it; per-file problems are recorded and the rest
 * goes on; at the root prefix the poll-state, chat-cursor and lock keys are neither copied nor
 * counted (a machine's copies may be stale or another agent's: a copied cursor would replay).
 *
 * The work is split in pages so that an orchestration can drive it without ever holding a whole
 * listing: {@link planSourcePage} per page, then {@link listBatch} and {@link copyFiles} per batch.
 */

export interface MigrationSource {
  /** A folder on the host running Cairn. */
  readonly root: string;
  /** Key prefix in the target; '' is the root of the tenant's space. */
  readonly prefix: string;
}

export interface MigrationReport {
  copied: number;
  skipped: number;
  bytesCopied: number;
  keysCopied: string[];
  /** `[key, message]`. */
  errors: [string, string][];
}

export function emptyReport(): MigrationReport {
  return { copied: 0, skipped: 0, bytesCopied: 0, keysCopied: [], errors: [] };
}

export function mergeReports(into: MigrationReport, from: MigrationReport): MigrationReport {
  into.copied += from.copied;
  into.skipped += from.skipped;
  into.bytesCopied += from.bytesCopied;
  into.keysCopied.push(...from.keysCopied);
  into.errors.push(...from.errors);
  return into;
}

/** Keys a machine must not carry over at the root prefix. */
const EXCLUDED_ROOT_KEYS = new Set([
  'poll_state/email_cursor.txt',
  'email_cursor.txt',
  'watched_chats',
  'chat_id',
]);

export function isExcludedRootKey(key: string): boolean {
  return (
    EXCLUDED_ROOT_KEYS.has(key) ||
    key.startsWith('chat_cursors/') ||
    path.posix.basename(key).endsWith('.lock')
  );
}

export function targetKey(prefix: string, relativePath: string): string {
  return prefix === '' ? relativePath : `${prefix.replace(/\/+$/, '')}/${relativePath}`;
}

interface SourcePage {
  /** False when the root does not exist or is not a folder. */
  readonly exists: boolean;
  /** Relative POSIX paths, in key order (excluded root keys left out). */
  readonly files: string[];
  /** Pass as `after` for the next page; null on the last page. */
  readonly next: string | null;
}

/** What of a source is migrated: at the root prefix, everything but the excluded root keys. */
function sourceFilter(source: MigrationSource): (entry: WalkEntry) => boolean {
  return (entry) => !(source.prefix === '' && isExcludedRootKey(entry.key));
}

/**
 * One page of a source's files in key order, after `after`. Symbolic links and other non-regular
 * files (sockets, FIFOs) are listed, never followed or read: the copy reports them as errors, so
 * every file is accounted for. Excluded root keys are left out of the page, so they are
 * not counted either.
 */
async function listSourcePage(source: MigrationSource, after: string, limit: number): Promise<SourcePage> {
  const stat = await fs.stat(source.root).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT' || error.code === 'ENOTDIR') return null;
    throw error;
  });
  if (stat === null || !stat.isDirectory()) return { exists: false, files: [], next: null };
  const entries: WalkEntry[] = await walkInKeyOrder(source.root, {
    after,
    limit: limit + 1,
    include: sourceFilter(source),
  });
  const page = entries.slice(0, limit).map((entry) => entry.key);
  return {
    exists: true,
    files: page,
    next: entries.length > limit ? (page[page.length - 1] ?? null) : null,
  };
}

/**
 * The error of a source root that does not exist on the host, or is not a folder: a migration from
 * it would copy nothing and look like a success. `field` names the source (`sources.0.root`).
 */
export function missingSourceError(field: string, root: string): InvalidArgumentError {
  return new InvalidArgumentError(field, `${root} does not exist on the service's host or is not a folder`);
}

/**
 * Refuses ({@link missingSourceError}) a root that is not a folder on this host: the check the
 * starting route makes up front, so that a mistyped folder is a 400 and not a failed migration.
 */
export async function checkSourceFolder(field: string, root: string): Promise<void> {
  const stat = await fs.stat(root).catch(() => null);
  if (stat === null || !stat.isDirectory()) throw missingSourceError(field, root);
}

/**
 * Refuses (400 naming `field`) a root whose real folder, symbolic links resolved, is not inside the
 * real folder of one of `allowed`. {@link checkSourceRoot} checks the path as written: a link inside
 * an allowed folder, named as a root (or as a folder below it), would otherwise have the migration
 * read any folder of the host. A root that is not there is left to the other checks (the route's
 * 400, the orchestration's failure naming it).
 */
export async function checkSourceRealRoot(
  field: string,
  root: string,
  allowed: readonly string[],
): Promise<void> {
  let real: string;
  try {
    real = await fs.realpath(root);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return;
    throw error;
  }
  const bases = await Promise.all(allowed.map((base) => fs.realpath(base).catch(() => null)));
  if (!bases.some((base) => base !== null && isInsideFolder(base, real))) {
    throw new InvalidArgumentError(
      field,
      `${root} is a symbolic link (or below one) to a folder outside CAIRN_MIGRATION_SOURCE_ROOTS`,
    );
  }
}

/** A run of consecutive files of a source to copy: the keys in `(after, through]`, `count` of them. */
export interface CopyBatch {
  readonly after: string;
  readonly through: string;
  readonly count: number;
}

/** What to do with one page of a source: only key ranges and counts, never the file names. */
export interface SourcePlan {
  /**
   * False when the root does not exist or is not a folder: the orchestration then fails naming it
   * ({@link missingSourceError}), instead of reporting an empty migration as a success.
   */
  readonly exists: boolean;
  /** Files of the page already stored in the target: skipped, never overwritten. */
  readonly stored: number;
  readonly batches: CopyBatch[];
  /** Pass as `after` for the next page; null on the last page. */
  readonly next: string | null;
}

/**
 * Plans one page of a source: lists it, lists the target range it maps to once (so a re-run costs
 * a few listing requests per thousand files, not one request per file), and cuts the files still
 * to copy into runs of at most `batchSize` consecutive keys. A plan holds ranges, not names, so an
 * orchestration's history stays small however many files there are.
 */
export async function planSourcePage(
  store: KeyValueStore,
  source: MigrationSource,
  after: string,
  limit: number,
  batchSize: number,
): Promise<SourcePlan> {
  const page = await listSourcePage(source, after, limit);
  if (!page.exists) return { exists: false, stored: 0, batches: [], next: null };
  const existing =
    page.files.length === 0
      ? new Set<string>()
      : await existingKeys(
          store,
          page.files.map((file) => targetKey(source.prefix, file)),
        );
  const batches: { -readonly [K in keyof CopyBatch]: CopyBatch[K] }[] = [];
  let previous = after;
  let current: (typeof batches)[number] | undefined;
  for (const file of page.files) {
    if (existing.has(targetKey(source.prefix, file))) {
      current = undefined;
    } else {
      if (current === undefined || current.count >= batchSize) {
        current = { after: previous, through: file, count: 0 };
        batches.push(current);
      }
      current.through = file;
      current.count++;
    }
    previous = file;
  }
  const toCopy = batches.reduce((sum, batch) => sum + batch.count, 0);
  return { exists: true, stored: page.files.length - toCopy, batches, next: page.next };
}

/**
 * The files of a planned batch, listed again: at most `count` keys in `(after, through]`. A file
 * created in the range since the plan may wait for the next run; one deleted is simply not there.
 */
export async function listBatch(source: MigrationSource, batch: CopyBatch): Promise<string[]> {
  const entries = await walkInKeyOrder(source.root, {
    after: batch.after,
    limit: batch.count,
    include: sourceFilter(source),
  });
  return entries.map((entry) => entry.key).filter((key) => compareKeys(key, batch.through) <= 0);
}

/**
 * The keys among `keys` (sorted) that exist in `store`: one listing of the range they span. Only an
 * optimisation: when the listing fails, nothing is known to exist and the create-only writes
 * decide (a real outage fails those writes too, and the caller retries).
 */
async function existingKeys(store: KeyValueStore, keys: readonly string[]): Promise<Set<string>> {
  try {
    return await listExisting(store, keys);
  } catch (error) {
    if (error instanceof StorageUnavailableError) return new Set();
    throw error;
  }
}

async function listExisting(store: KeyValueStore, keys: readonly string[]): Promise<Set<string>> {
  const existing = new Set<string>();
  const first = keys[0];
  const last = keys[keys.length - 1];
  if (first === undefined || last === undefined) return existing;
  const wanted = new Set(keys);
  const prefix = commonPrefix(first, last);
  let cursor: string | undefined;
  do {
    const page = await store.list({ prefix, limit: 1000, ...(cursor === undefined ? {} : { cursor }) });
    for (const key of page.keys) if (wanted.has(key)) existing.add(key);
    const lastListed = page.keys[page.keys.length - 1];
    if (page.cursor === null || (lastListed !== undefined && compareKeys(lastListed, last) > 0)) break;
    cursor = page.cursor;
  } while (cursor !== undefined);
  return existing;
}

export interface CopyOptions {
  readonly source: MigrationSource;
  /** Relative paths from {@link listBatch}, in key order. */
  readonly files: readonly string[];
  readonly dryRun: boolean;
  readonly maxValueBytes: number;
  /** Files copied at once. */
  readonly concurrency?: number;
}

/**
 * Copies `files` with create-only writes. Per-file problems (unreadable, too large, a symlink, an
 * invalid key, a local-backend folder conflict) become error entries; a storage fault is thrown,
 * so that the caller can retry the batch (create-only makes a retry safe; files the failed attempt
 * did copy are then counted as skipped).
 */
export async function copyFiles(store: KeyValueStore, options: CopyOptions): Promise<MigrationReport> {
  const report = emptyReport();
  const keys = options.files.map((file) => targetKey(options.source.prefix, file));
  const copyOne = async (index: number) => {
    const file = options.files[index] as string;
    const key = keys[index] as string;
    try {
      validateKey(key);
      const full = path.join(options.source.root, ...file.split('/'));
      const stat = await fs.lstat(full);
      if (stat.isSymbolicLink()) throw new Error('symbolic links are not copied');
      if (!stat.isFile()) throw new Error('not a regular file');
      if (stat.size > options.maxValueBytes)
        throw new Error(`larger than the ${options.maxValueBytes}-byte value limit`);
      if (options.dryRun) {
        // Stored keys were taken out when the page was planned; a dry run writes nothing.
        report.copied++;
        report.bytesCopied += stat.size;
        report.keysCopied.push(key);
        return;
      }
      const value = await fs.readFile(full);
      await store.write(key, value, { ifAbsent: true });
      report.copied++;
      report.bytesCopied += value.length;
      report.keysCopied.push(key);
    } catch (error) {
      if (error instanceof PreconditionFailedError) {
        report.skipped++;
        return;
      }
      if (error instanceof StorageUnavailableError) throw error;
      const message = error instanceof CairnError || error instanceof Error ? error.message : String(error);
      report.errors.push([key, message]);
    }
  };
  await forEachLimited(options.files, options.concurrency ?? 16, (_, index) => copyOne(index));
  // Workers finish out of order; the report lists keys in key order.
  report.keysCopied.sort(compareKeys);
  return report;
}
