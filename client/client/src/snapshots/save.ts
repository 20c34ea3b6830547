import { createHash, type KeyObject, sign } from 'node:crypto';
import { constants, promises as fs } from 'node:fs';

import { forEachLimited } from '@cairn-state/protocol/pool';
import {
  PART_BYTES,
  partCount,
  partSize,
  validateWorkspaceId,
} from '@cairn-state/protocol/snapshots/identifiers';
import {
  MANIFEST_VERSION,
  parseManifest,
  serializeManifest,
  type SnapshotFile,
  snapshotIdOf,
  type SnapshotManifest,
} from '@cairn-state/protocol/snapshots/manifest';

import { MissingPartsError } from './errors.js';
import type { SnapshotRoutes } from './routes.js';
import { type TreeFile, walkWorkspace } from './workspaceTree.js';

/**
 * Saving a workspace folder as a signed snapshot:
 *
 * 1. walk the folder without following links; refuse (or, with `skipUnsupported`, report and skip)
 *    what a manifest cannot hold; check every path and symlink before reading any file;
 * 2. read the workspace's latest snapshot: files whose SHA-256 it lists are stored already;
 * 3. hash every file and upload the parts of the others (2 MiB each, `concurrency` files at once,
 *    one part in memory per file at a time); a file over 2 MiB is read twice (hash, then upload),
 *    each part checked against its hash from the first read, so a file that changes meanwhile
 *    fails the save instead of storing parts of two versions;
 * 4. sign the canonical manifest bytes and publish them on the latest snapshot read in step 2; a
 *    publish that finds parts missing (stored elsewhere, then collected) uploads those and tries
 *    again.
 */

export interface SaveOptions {
  readonly workspaceId: string;
  readonly privateKey: KeyObject;
  /** Files read and uploaded at once (default 16). */
  readonly concurrency?: number;
  readonly allowExternalSymlinks?: boolean;
  /** Report unsupported entries instead of refusing the save. */
  readonly skipUnsupported?: boolean;
  readonly onProgress?: (progress: SaveProgress) => void;
  /** The manifest's `createdAt` (default: now). */
  readonly now?: () => Date;
}

export interface SaveProgress {
  readonly files: number;
  readonly filesDone: number;
  readonly bytesRead: number;
  readonly partsUploaded: number;
}

export interface SaveReport {
  readonly id: string;
  readonly workspaceId: string;
  readonly parent: string | null;
  readonly files: number;
  readonly symlinks: number;
  readonly bytes: number;
  /** Parts sent that the service did not have. */
  readonly partsUploaded: number;
  /** Parts sent that the service had already (another workspace of the tenant stored them). */
  readonly partsAlreadyStored: number;
  readonly bytesUploaded: number;
  /** Entries skipped with `skipUnsupported`: `<path>: <reason>`. */
  readonly skipped: string[];
  readonly requests: number;
}

const DEFAULT_CONCURRENCY = 16;
const PUBLISH_ATTEMPTS = 3;

export async function saveSnapshot(
  api: SnapshotRoutes,
  dir: string,
  options: SaveOptions,
): Promise<SaveReport> {
  validateWorkspaceId(options.workspaceId);
  if (options.privateKey.asymmetricKeyType !== 'ed25519')
    throw new Error('the signing key must be an Ed25519 private key');
  const requestsBefore = api.requestCount;
  const tree = await walkWorkspace(dir);
  const skipped = tree.unsupported.map((entry) => `${entry.path}: ${entry.reason}`);
  if (skipped.length > 0 && options.skipUnsupported !== true) {
    throw new Error(
      `${skipped.length} entr${skipped.length === 1 ? 'y' : 'ies'} cannot be kept in a snapshot (skip them with --skip-unsupported):\n  ${skipped.slice(0, 20).join('\n  ')}`,
    );
  }
  const allowExternalSymlinks = options.allowExternalSymlinks === true;
  // Paths, the tree's shape and the symlinks are checked before any file is read or uploaded.
  checkShape(options.workspaceId, tree.files, tree.symlinks, allowExternalSymlinks);

  const latest = await api.read(options.workspaceId, 'latest');
  const stored = new Set<string>();
  if (latest !== null) {
    try {
      for (const file of (JSON.parse(latest.manifest.toString('utf8')) as SnapshotManifest).files) {
        stored.add(file.sha256);
      }
    } catch {
      // Only a hint of what need not be uploaded: without it, everything is.
    }
  }

  const totals = { partsUploaded: 0, partsAlreadyStored: 0, bytesUploaded: 0, bytesRead: 0, filesDone: 0 };
  const progress = () =>
    options.onProgress?.({
      files: tree.files.length,
      filesDone: totals.filesDone,
      bytesRead: totals.bytesRead,
      partsUploaded: totals.partsUploaded,
    });
  const upload = async (sha256: string, part: number, bytes: Buffer) => {
    if ((await api.putPart(options.workspaceId, sha256, part, bytes)).created) totals.partsUploaded++;
    else totals.partsAlreadyStored++;
    totals.bytesUploaded += bytes.length;
  };
  // One upload per distinct content, however many files hold it.
  const uploading = new Map<string, Promise<void>>();
  const entries: SnapshotFile[] = new Array<SnapshotFile>(tree.files.length);
  // Each content's file and the SHA-256 of each of its parts, to upload a part again if asked.
  const sources = new Map<string, { file: TreeFile; partDigests: string[] }>();
  await forEachLimited(tree.files, options.concurrency ?? DEFAULT_CONCURRENCY, async (file, index) => {
    const saved = await saveFile(file, stored, uploading, upload, (bytes) => {
      totals.bytesRead += bytes;
    });
    entries[index] = saved.entry;
    sources.set(saved.entry.sha256, { file, partDigests: saved.partDigests });
    totals.filesDone++;
    progress();
  });
  await Promise.all(uploading.values());

  const manifestBytes = serializeManifest({
    version: MANIFEST_VERSION,
    workspaceId: options.workspaceId,
    createdAt: (options.now?.() ?? new Date()).toISOString(),
    files: entries,
    symlinks: tree.symlinks,
  });
  parseManifest(manifestBytes, { allowExternalSymlinks });
  const signature = sign(null, manifestBytes, options.privateKey);
  const parent = latest?.id ?? null;
  for (let attempt = 1; ; attempt++) {
    try {
      const { id } = await api.publish(options.workspaceId, {
        manifest: manifestBytes,
        signature,
        parent,
        allowExternalSymlinks,
      });
      if (id !== snapshotIdOf(manifestBytes))
        throw new Error(`the service answered snapshot ${id}, not the one sent`);
      return {
        id,
        workspaceId: options.workspaceId,
        parent,
        files: entries.length,
        symlinks: tree.symlinks.length,
        bytes: entries.reduce((sum, entry) => sum + entry.size, 0),
        ...pick(totals, 'partsUploaded', 'partsAlreadyStored', 'bytesUploaded'),
        skipped,
        requests: api.requestCount - requestsBefore,
      };
    } catch (error) {
      if (!(error instanceof MissingPartsError) || attempt === PUBLISH_ATTEMPTS) throw error;
      // Parts the latest snapshot listed, gone meanwhile (deleted with it): upload them too.
      await forEachLimited(error.missing, options.concurrency ?? DEFAULT_CONCURRENCY, async (name) => {
        const [sha256 = '', part = ''] = name.split('/');
        const source = sources.get(sha256);
        const digest = source?.partDigests[Number(part)];
        if (source === undefined || digest === undefined) {
          throw new Error(`the service asks for a part of no file of this save: ${name}`);
        }
        await uploadPart(source.file, sha256, Number(part), digest, upload);
      });
    }
  }
}

function pick<T, K extends keyof T>(value: T, ...keys: K[]): Pick<T, K> {
  return Object.fromEntries(keys.map((key) => [key, value[key]])) as Pick<T, K>;
}

/** Checks paths, shape and symlinks with placeholder contents (one per path, so none conflict). */
function checkShape(
  workspaceId: string,
  files: readonly TreeFile[],
  symlinks: SnapshotManifest['symlinks'],
  allowExternalSymlinks: boolean,
): void {
  const placeholder = serializeManifest({
    version: MANIFEST_VERSION,
    workspaceId,
    createdAt: new Date(0).toISOString(),
    files: files.map((file) => ({
      path: file.path,
      sha256: createHash('sha256').update(file.path).digest('hex'),
      size: 0,
      mode: 0,
    })),
    symlinks,
  });
  try {
    parseManifest(placeholder, { allowExternalSymlinks });
  } catch (error) {
    // Name the entry, not the field of a manifest the user never sees.
    const message = error instanceof Error ? error.message : String(error);
    const entry = /^manifest\.(files|symlinks)\.(\d+)\./.exec(message);
    const list = entry?.[1] === 'files' ? files : symlinks;
    const sorted = [...list]
      .map((item) => ('path' in item ? item.path : item.source))
      .sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
    const name = entry === null ? undefined : sorted[Number(entry[2])];
    throw new Error(name === undefined ? message : `${name}: ${message.replace(/^[^:]*: /, '')}`, {
      cause: error,
    });
  }
}

/**
 * Hashes one file and uploads its parts unless its content is `stored` or being uploaded. Opens
 * without following a link (an entry replaced by a link since the walk is refused) and fails when
 * the file changed while it was read.
 */
async function saveFile(
  file: TreeFile,
  stored: ReadonlySet<string>,
  uploading: Map<string, Promise<void>>,
  upload: (sha256: string, part: number, bytes: Buffer) => Promise<void>,
  onRead: (bytes: number) => void,
): Promise<{ entry: SnapshotFile; partDigests: string[] }> {
  const handle = await fs.open(file.absolute, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    const before = await handle.stat();
    if (!before.isFile()) throw new Error(`${file.path} is no longer a regular file`);
    const size = before.size;
    const mode = before.mode & 0o7777;
    if (size <= PART_BYTES) {
      // One part: read once, hashed and uploaded from the same bytes.
      const bytes = await readExactly(handle, 0, size, file.path);
      onRead(size);
      await checkUnchanged(handle, before, file.path);
      const sha256 = createHash('sha256').update(bytes).digest('hex');
      if (size > 0 && !stored.has(sha256) && !uploading.has(sha256)) {
        const done = upload(sha256, 0, bytes);
        uploading.set(sha256, done);
        await done;
      }
      return { entry: { path: file.path, sha256, size, mode }, partDigests: size > 0 ? [sha256] : [] };
    }
    const whole = createHash('sha256');
    const partDigests: string[] = [];
    for (let part = 0; part < partCount(size); part++) {
      const bytes = await readExactly(handle, part * PART_BYTES, partSize(size, part), file.path);
      whole.update(bytes);
      partDigests.push(createHash('sha256').update(bytes).digest('hex'));
      onRead(bytes.length);
    }
    await checkUnchanged(handle, before, file.path);
    const sha256 = whole.digest('hex');
    if (!stored.has(sha256) && !uploading.has(sha256)) {
      const done = (async () => {
        for (let part = 0; part < partCount(size); part++) {
          const bytes = await readExactly(handle, part * PART_BYTES, partSize(size, part), file.path);
          if (createHash('sha256').update(bytes).digest('hex') !== partDigests[part]) {
            throw new Error(`${file.path} changed while it was saved; save again`);
          }
          await upload(sha256, part, bytes);
        }
      })();
      uploading.set(sha256, done);
      await done;
    }
    return { entry: { path: file.path, sha256, size, mode }, partDigests };
  } finally {
    await handle.close();
  }
}

/** Uploads one part of a file again, only if its bytes are still those saved (`digest`). */
async function uploadPart(
  file: TreeFile,
  sha256: string,
  part: number,
  digest: string,
  upload: (sha256: string, part: number, bytes: Buffer) => Promise<void>,
): Promise<void> {
  const handle = await fs.open(file.absolute, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    const size = (await handle.stat()).size;
    const bytes = await readExactly(handle, part * PART_BYTES, partSize(size, part), file.path);
    if (createHash('sha256').update(bytes).digest('hex') !== digest) {
      throw new Error(`${file.path} changed while it was saved; save again`);
    }
    await upload(sha256, part, bytes);
  } finally {
    await handle.close();
  }
}

async function checkUnchanged(
  handle: fs.FileHandle,
  before: { size: number; mtimeMs: number },
  name: string,
) {
  const after = await handle.stat();
  if (after.size !== before.size || after.mtimeMs !== before.mtimeMs) {
    throw new Error(`${name} changed while it was saved; save again`);
  }
}

async function readExactly(
  handle: fs.FileHandle,
  position: number,
  length: number,
  name: string,
): Promise<Buffer> {
  const buffer = Buffer.allocUnsafe(length);
  let filled = 0;
  while (filled < length) {
    const { bytesRead } = await handle.read(buffer, filled, length - filled, position + filled);
    if (bytesRead === 0) throw new Error(`${name} shrank while it was saved; save again`);
    filled += bytesRead;
  }
  return buffer;
}
