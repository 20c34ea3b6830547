import { createHash, type Hash, randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';

import {
  BLOCK_BYTES,
  blockKey,
  LATEST,
  MAX_FILES_PER_CHECKPOINT,
  tailKey,
  validateId,
} from '../shared/archive/identifiers';
import type { Manifest, ManifestFile } from '../shared/archive/manifest';
import { validateKey } from '../shared/keys';
import {
  listSessionFiles,
  readUploadState,
  type SessionFile,
  type UploadedFile,
  writeUploadState,
} from './sessionDirectory';
import { CairnHttpError, keyPath, segment, Transport, type TransportOptions } from './transport';

/**
 * The agent's side of session archives, for Node code and the `cairn` CLI.
 *
 * Publish splits every file of a session directory (`events.jsonl`, `native/**`) into 64 KiB blocks
 * of a generation, uploads only the blocks not uploaded before (it remembers them in
 * `uploaded.json`) plus each file's tail, `concurrency` requests at a time with retries, then
 * publishes the manifest on the current `latest`. A file that shrank or whose uploaded part changed
 * (a rewrite, not an append) starts a new generation. Files are read as streams of blocks: memory
 * stays at about `concurrency` × 64 KiB whatever the file sizes.
 *
 * Restore downloads a checkpoint into an empty (or absent) directory: every file is streamed to a
 * staging directory beside it and checked against its SHA-256, and only a complete, verified tree is
 * renamed into place, so a failed restore leaves nothing half-written.
 */

export interface ArchiveClientOptions extends TransportOptions {
  /** Object uploads in flight at once (default 32: on a small machine the extra hop through the service needs more requests in flight than raw storage calls do). */
  readonly concurrency?: number;
  /** Files downloaded at once by a restore (default 4). */
  readonly restoreConcurrency?: number;
}

export interface PublishOptions {
  /** Default: a new unique id. Passing the id of an earlier attempt retries that attempt. */
  readonly checkpointId?: string;
  /** Default: the session's current latest checkpoint (asked from Cairn). */
  readonly parent?: string | null;
  /** The checkpoint's `data` (a JSON object of at most 16 KiB). */
  readonly data?: Record<string, unknown>;
}

export interface PublishReport {
  readonly checkpointId: string;
  readonly parent: string | null;
  readonly files: number;
  /** Objects sent (blocks and tails), and their bytes. */
  readonly objectsUploaded: number;
  readonly bytesUploaded: number;
  /** HTTP requests sent, retries included. */
  readonly requests: number;
}

export interface RestoreReport {
  readonly checkpointId: string;
  readonly files: number;
  readonly bytes: number;
}

/** `latest` is not the parent this publish was based on: another publisher got there first. */
export class StaleCheckpointError extends Error {
  constructor(readonly latest: string | null) {
    super(`the session's latest checkpoint is ${latest ?? 'none'}: publish again on it`);
    this.name = 'StaleCheckpointError';
  }
}

/** Different bytes are stored under an object key this publish wanted: its generation is spoilt. */
class ObjectConflict extends Error {}

interface FileUpload {
  readonly entry: ManifestFile;
  readonly uploaded: UploadedFile;
  readonly uploads: Promise<number>[];
}

export class ArchiveClient {
  private readonly transport: Transport;
  private readonly concurrency: number;
  private readonly restoreConcurrency: number;

  constructor(options: ArchiveClientOptions) {
    this.transport = new Transport(options);
    this.concurrency = options.concurrency ?? 32;
    this.restoreConcurrency = options.restoreConcurrency ?? 4;
  }

  /** Requests sent so far by this client, retries included. */
  get requestCount(): number {
    return this.transport.counts.requests;
  }

  /** The id of the session's latest checkpoint, or null when it has none (or is not the caller's). */
  async latestCheckpointId(sessionId: string): Promise<string | null> {
    validateId(sessionId, 'sessionId');
    const response = await this.transport.send(
      'GET',
      `/sessions/${segment(sessionId)}/checkpoints/${LATEST}`,
    );
    if (response.status === 404) {
      await response.discard();
      return null;
    }
    if (response.status !== 200) return Transport.fail(response);
    return ((await response.json()) as Manifest).checkpointId;
  }

  async readManifest(sessionId: string, checkpointId = LATEST): Promise<Manifest> {
    validateId(sessionId, 'sessionId');
    const response = await this.transport.send(
      'GET',
      `/sessions/${segment(sessionId)}/checkpoints/${segment(checkpointId)}`,
    );
    if (response.status !== 200) return Transport.fail(response);
    return (await response.json()) as Manifest;
  }

  async publishCheckpoint(
    dir: string,
    sessionId: string,
    options: PublishOptions = {},
  ): Promise<PublishReport> {
    validateId(sessionId, 'sessionId');
    const requestsBefore = this.transport.counts.requests;
    const files = await listSessionFiles(dir);
    if (files.length === 0) {
      throw new Error(`${dir} holds no session files (events.jsonl, native/): nothing to publish`);
    }
    if (files.length > MAX_FILES_PER_CHECKPOINT) {
      throw new Error(
        `${dir} holds ${files.length} session files; a checkpoint holds at most ${MAX_FILES_PER_CHECKPOINT}`,
      );
    }
    const state = await readUploadState(dir, sessionId);
    // The parent only goes into the manifest: ask for it while the files are read and uploaded.
    const parentRead =
      options.parent !== undefined ? Promise.resolve(options.parent) : this.latestCheckpointId(sessionId);
    parentRead.catch(() => {}); // awaited below; a failure surfaces there, not as unhandled
    const checkpointId = options.checkpointId ?? newId('c');
    validateId(checkpointId, 'checkpointId');
    const totals = { objects: 0, bytes: 0 };

    let previous: Readonly<Record<string, UploadedFile>> = state?.files ?? {};
    for (let attempt = 0; ; attempt++) {
      const uploads = await this.uploadFiles(sessionId, checkpointId, files, previous, totals);
      const parent = await parentRead;
      const body = JSON.stringify({
        checkpointId,
        parent,
        files: uploads.map((upload) => upload.entry),
        ...(options.data === undefined ? {} : { data: options.data }),
      });
      const response = await this.transport.send('POST', `/sessions/${segment(sessionId)}/checkpoints`, body);
      if (response.status === 201) {
        await response.discard();
        await writeUploadState(dir, {
          version: 1,
          session: sessionId,
          checkpointId,
          files: Object.fromEntries(uploads.map((upload) => [upload.entry.path, upload.uploaded])),
        });
        return {
          checkpointId,
          parent,
          files: files.length,
          objectsUploaded: totals.objects,
          bytesUploaded: totals.bytes,
          requests: this.transport.counts.requests - requestsBefore,
        };
      }
      if (response.status === 422 && attempt === 0) {
        // Cairn lacks objects the state file says were uploaded (a state file from elsewhere, a
        // reset store): upload everything again under new generations, once.
        await response.discard();
        previous = {};
        continue;
      }
      if (response.status === 409) {
        const error = await Transport.fail(response).catch((e: unknown) => e);
        if (error instanceof CairnHttpError && 'latest' in error.details) {
          throw new StaleCheckpointError((error.details['latest'] as string | null) ?? null);
        }
        throw error;
      }
      return Transport.fail(response);
    }
  }

  async restoreCheckpoint(
    sessionId: string,
    dir: string,
    options: { checkpointId?: string } = {},
  ): Promise<RestoreReport> {
    const target = path.resolve(dir);
    const existing = await fs.readdir(target).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return [];
      throw error;
    });
    if (existing.length > 0) throw new Error(`${dir} is not empty: restore into an empty or new directory`);
    const manifest = await this.readManifest(sessionId, options.checkpointId ?? LATEST);
    for (const file of manifest.files) validateKey(file.path, 'path');

    const staging = path.join(
      path.dirname(target),
      `.${path.basename(target)}.restore-${randomBytes(6).toString('hex')}`,
    );
    await fs.mkdir(staging, { recursive: true });
    try {
      const uploaded: Record<string, UploadedFile> = {};
      let next = 0;
      await Promise.all(
        Array.from({ length: Math.min(this.restoreConcurrency, manifest.files.length) }, async () => {
          while (next < manifest.files.length) {
            const file = manifest.files[next++];
            if (file === undefined) break;
            uploaded[file.path] = await this.restoreFile(sessionId, manifest.checkpointId, file, staging);
          }
        }),
      );
      // What was restored counts as uploaded: the next publish from here is incremental.
      await writeUploadState(staging, {
        version: 1,
        session: sessionId,
        checkpointId: manifest.checkpointId,
        files: uploaded,
      });
      await fs.rmdir(target).catch((error: NodeJS.ErrnoException) => {
        if (error.code !== 'ENOENT') throw error;
      });
      await fs.rename(staging, target);
    } catch (error) {
      await fs.rm(staging, { recursive: true, force: true });
      throw error;
    }
    return {
      checkpointId: manifest.checkpointId,
      files: manifest.files.length,
      bytes: manifest.files.reduce((sum, file) => sum + file.size, 0),
    };
  }

  /** Uploads what each file needs; files whose generation turns out spoilt are redone once. */
  private async uploadFiles(
    sessionId: string,
    checkpointId: string,
    files: readonly SessionFile[],
    previous: Readonly<Record<string, UploadedFile>>,
    totals: { objects: number; bytes: number },
  ): Promise<FileUpload[]> {
    const pool = new UploadPool(this.concurrency);
    const put = async (key: string, bytes: Buffer) => {
      const sent = await this.putObject(sessionId, key, bytes);
      totals.objects++;
      totals.bytes += bytes.length;
      return sent;
    };
    const results: FileUpload[] = [];
    for (const file of files)
      results.push(await uploadFile(file, checkpointId, previous[file.path], pool, put));
    for (const [index, result] of results.entries()) {
      const outcomes = await Promise.allSettled(result.uploads);
      const failure = outcomes.find((outcome) => outcome.status === 'rejected');
      if (failure === undefined) continue;
      if (!(failure.reason instanceof ObjectConflict)) throw failure.reason;
      const file = files[index];
      if (file === undefined) continue;
      const redo = await uploadFile(file, checkpointId, undefined, pool, put);
      for (const outcome of await Promise.allSettled(redo.uploads)) {
        if (outcome.status === 'rejected') throw outcome.reason;
      }
      results[index] = redo;
    }
    return results;
  }

  /** PUTs one object; resolves with its size, throws ObjectConflict for 409, CairnHttpError else. */
  private async putObject(sessionId: string, key: string, bytes: Buffer): Promise<number> {
    const response = await this.transport.send(
      'PUT',
      `/sessions/${segment(sessionId)}/objects/${key}`,
      bytes,
    );
    if (response.status === 200 || response.status === 201) {
      await response.discard();
      return bytes.length;
    }
    if (response.status === 409) {
      await response.discard();
      throw new ObjectConflict(key);
    }
    return Transport.fail(response);
  }

  /** Streams one file into `staging`, checking size and SHA-256; retries a cut download. */
  private async restoreFile(
    sessionId: string,
    checkpointId: string,
    file: ManifestFile,
    staging: string,
  ): Promise<UploadedFile> {
    const destination = path.join(staging, ...file.path.split('/'));
    await fs.mkdir(path.dirname(destination), { recursive: true });
    const route = `/sessions/${segment(sessionId)}/checkpoints/${segment(checkpointId)}/files/${keyPath(file.path)}`;
    let lastError: unknown;
    for (let attempt = 0; attempt < 3; attempt++) {
      const response = await this.transport.send('GET', route);
      if (response.status !== 200) return Transport.fail(response);
      const handle = await fs.open(destination, 'w');
      try {
        const hash = new BoundaryHash(Math.floor(file.size / BLOCK_BYTES) * BLOCK_BYTES);
        let size = 0;
        for await (const bytes of response.body) {
          hash.update(bytes);
          size += bytes.length;
          await handle.write(bytes);
        }
        await handle.sync();
        const sha256 = hash.digest();
        if (size !== file.size || sha256 !== file.sha256) {
          throw new Error(`${file.path}: the bytes received do not match the manifest (size or SHA-256)`);
        }
        return {
          generation: file.generation,
          blocks: Math.floor(file.size / BLOCK_BYTES),
          prefixSha256: hash.prefixDigest(),
        };
      } catch (error) {
        // A cut connection surfaces here; a damaged archive is a 500 answered before any byte.
        lastError = error;
      } finally {
        await handle.close();
      }
    }
    throw lastError;
  }
}

/**
 * Runs at most `width` uploads at once; `run` waits for a free slot (so reading waits too). After
 * a failure other than a spoilt generation (403, 400, retries exhausted) it starts nothing more:
 * `run` throws that failure, so a refused publish stops at once instead of sending every block.
 */
class UploadPool {
  private readonly active = new Set<Promise<void>>();
  private failure: { readonly error: unknown } | undefined;

  constructor(private readonly width: number) {}

  /** Starts `task` once a slot is free; the returned box holds its (possibly failing) promise. */
  async run<T>(task: () => Promise<T>): Promise<{ readonly done: Promise<T> }> {
    while (this.active.size >= this.width) await Promise.race(this.active);
    if (this.failure !== undefined) throw this.failure.error;
    const done = task();
    const slot: Promise<void> = done.then(
      () => undefined,
      (error: unknown) => {
        if (!(error instanceof ObjectConflict)) this.failure ??= { error };
      },
    );
    this.active.add(slot);
    void slot.then(() => this.active.delete(slot));
    return { done };
  }
}

/**
 * Reads one file block by block (a snapshot of its size when opened: bytes appended meanwhile
 * belong to the next checkpoint), hashing it whole, and submits the blocks and tail it must upload.
 * With `previous`, blocks `0 … previous.blocks-1` are reused when the file still starts with the
 * same bytes; otherwise (or when the file shrank) the file gets a new generation.
 */
async function uploadFile(
  file: SessionFile,
  checkpointId: string,
  previous: UploadedFile | undefined,
  pool: UploadPool,
  put: (key: string, bytes: Buffer) => Promise<number>,
): Promise<FileUpload> {
  const handle = await fs.open(file.absolute, 'r');
  try {
    const size = (await handle.stat()).size;
    const blocks = Math.floor(size / BLOCK_BYTES);
    let reuse = previous !== undefined && previous.blocks <= blocks;
    for (;;) {
      const generation = reuse && previous !== undefined ? previous.generation : newId('g');
      const skip = reuse && previous !== undefined ? previous.blocks : 0;
      const hash = new BoundaryHash(blocks * BLOCK_BYTES);
      const uploads: Promise<number>[] = [];
      // The blocks uploaded before are only hashed (for the file's SHA-256).
      await hashPrefix(handle, skip * BLOCK_BYTES, hash, file.path);
      if (skip > 0 && hash.digestSoFar() !== previous?.prefixSha256) {
        reuse = false;
        continue;
      }
      for (let index = skip; index < blocks; index++) {
        const block = await readExactly(handle, index * BLOCK_BYTES, BLOCK_BYTES, file.path);
        hash.update(block);
        uploads.push((await pool.run(() => put(blockKey(generation, index), block))).done);
      }
      const tailBytes = size % BLOCK_BYTES;
      if (tailBytes > 0) {
        const tail = await readExactly(handle, blocks * BLOCK_BYTES, tailBytes, file.path);
        hash.update(tail);
        uploads.push((await pool.run(() => put(tailKey(checkpointId, generation), tail))).done);
      }
      return {
        entry: { path: file.path, generation, size, sha256: hash.digest() },
        uploaded: { generation, blocks, prefixSha256: hash.prefixDigest() },
        uploads,
      };
    }
  } finally {
    await handle.close();
  }
}

/** Read size for the part of a file that is hashed, not uploaded. */
const PREFIX_READ_BYTES = 4 * 1024 * 1024;

/**
 * Feeds bytes `0 … length-1` of the file to `hash`, in large chunks read into two buffers in turn:
 * the next chunk is read while this one is hashed.
 */
async function hashPrefix(
  handle: fs.FileHandle,
  length: number,
  hash: BoundaryHash,
  name: string,
): Promise<void> {
  if (length === 0) return;
  const buffers = [Buffer.allocUnsafe(PREFIX_READ_BYTES), Buffer.allocUnsafe(PREFIX_READ_BYTES)];
  const read = (position: number, turn: number) =>
    readExactly(handle, position, Math.min(PREFIX_READ_BYTES, length - position), name, buffers[turn % 2]);
  let reading: Promise<Buffer> | undefined = read(0, 0);
  for (let position = 0, turn = 1; reading !== undefined; turn++) {
    const chunk = await reading;
    position += chunk.length;
    reading = position < length ? read(position, turn) : undefined;
    hash.update(chunk);
  }
}

/** Reads `length` bytes at `position` into `into` (a new buffer by default); returns them. */
async function readExactly(
  handle: fs.FileHandle,
  position: number,
  length: number,
  name: string,
  into?: Buffer,
): Promise<Buffer> {
  const buffer = into === undefined ? Buffer.allocUnsafe(length) : into.subarray(0, length);
  let filled = 0;
  while (filled < length) {
    const { bytesRead } = await handle.read(buffer, filled, length - filled, position + filled);
    if (bytesRead === 0) throw new Error(`${name} shrank while it was read; publish again`);
    filled += bytesRead;
  }
  return buffer;
}

/** SHA-256 of a stream of bytes that also remembers the digest of its first `boundary` bytes. */
class BoundaryHash {
  private readonly hash: Hash = createHash('sha256');
  private seen = 0;
  private prefix: string | undefined;

  constructor(private readonly boundary: number) {
    if (boundary === 0) this.prefix = createHash('sha256').digest('hex');
  }

  update(bytes: Uint8Array): void {
    if (this.prefix === undefined && this.seen + bytes.length >= this.boundary) {
      const head = this.boundary - this.seen;
      this.hash.update(bytes.subarray(0, head));
      this.prefix = this.hash.copy().digest('hex');
      this.hash.update(bytes.subarray(head));
    } else {
      this.hash.update(bytes);
    }
    this.seen += bytes.length;
  }

  digestSoFar(): string {
    return this.hash.copy().digest('hex');
  }

  prefixDigest(): string {
    return this.prefix ?? '';
  }

  digest(): string {
    return this.hash.digest('hex');
  }
}

/** A new id in the session-id alphabet: time-ordered, unique across agents. */
function newId(kind: 'c' | 'g'): string {
  return `${kind}${Date.now().toString(36)}-${randomBytes(6).toString('hex')}`;
}
