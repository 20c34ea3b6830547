import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';

import {
  BLOCK_BYTES,
  blockKey,
  MAX_FILES_PER_CHECKPOINT,
  tailKey,
} from '@cairn-state/protocol/archive/identifiers';
import type { ManifestFile } from '@cairn-state/protocol/archive/manifest';

import { BoundaryHash } from './boundaryHash.js';
import { listSessionFiles, type SessionFile, type UploadedFile } from './sessionDirectory.js';

/**
 * The upload half of a publish: which files a session directory publishes, and for each file the
 * blocks and tail it must upload (only what was not uploaded before), sent `concurrency` at a time.
 * Files are read as streams of blocks: memory stays at about `concurrency` × 64 KiB whatever the
 * file sizes.
 */

/** Different bytes are stored under an object key this publish wanted: its generation is spoilt. */
export class ObjectConflict extends Error {}

/** Stores one object; resolves with its size, rejects with ObjectConflict when other bytes are stored. */
export type PutObject = (key: string, bytes: Buffer) => Promise<number>;

export interface FileUpload {
  readonly entry: ManifestFile;
  readonly uploaded: UploadedFile;
  readonly uploads: Promise<number>[];
}

/** The files of `dir` a checkpoint publishes; throws when there are none or too many. */
export async function filesToPublish(dir: string): Promise<SessionFile[]> {
  const files = await listSessionFiles(dir);
  if (files.length === 0) {
    throw new Error(`${dir} holds no session files (events.jsonl, native/): nothing to publish`);
  }
  if (files.length > MAX_FILES_PER_CHECKPOINT) {
    throw new Error(
      `${dir} holds ${files.length} session files; a checkpoint holds at most ${MAX_FILES_PER_CHECKPOINT}`,
    );
  }
  return files;
}

/** Uploads what each file needs; files whose generation turns out spoilt are redone once. */
export async function uploadFiles(
  files: readonly SessionFile[],
  checkpointId: string,
  previous: Readonly<Record<string, UploadedFile>>,
  concurrency: number,
  put: PutObject,
): Promise<FileUpload[]> {
  const pool = new UploadPool(concurrency);
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
  put: PutObject,
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

/** A new id in the session-id alphabet: time-ordered, unique across agents. */
export function newId(kind: 'c' | 'g'): string {
  return `${kind}${Date.now().toString(36)}-${randomBytes(6).toString('hex')}`;
}
