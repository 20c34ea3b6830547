import { LATEST, validateId } from '@cairn-state/protocol/archive/identifiers';
import type { Manifest, ManifestFile } from '@cairn-state/protocol/archive/manifest';
import type { Session, SessionPage as SessionPageSchema } from '@cairn-state/protocol/sessions';
import type { z } from 'zod';

import { emptyTarget, restoreTree } from './archive/restore.js';
import {
  readUploadState,
  type SessionFile,
  type UploadedFile,
  writeUploadState,
} from './archive/sessionDirectory.js';
import { filesToPublish, newId, ObjectConflict, uploadFiles } from './archive/upload.js';
import { failure, keyPath, readJson, segment, Transport, type TransportOptions } from './transport.js';
import type { Wire } from './wire.js';

/**
 * The agent's side of session archives, for Node code and the `cairn` CLI.
 *
 * Publish splits every file of a session directory (`events.jsonl`, `native/**`) into 64 KiB blocks
 * of a generation, uploads only the blocks not uploaded before (it remembers them in
 * `uploaded.json`) plus each file's tail, `concurrency` requests at a time with retries, then
 * publishes the manifest on the current `latest`. A file that shrank or whose uploaded part changed
 * (a rewrite, not an append) starts a new generation.
 *
 * Restore downloads a checkpoint into an empty (or absent) directory and only moves a complete,
 * verified tree into place.
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
  /** Called after every object uploaded. */
  readonly onProgress?: (progress: PublishProgress) => void;
}

export interface PublishProgress {
  /** The files being published. */
  readonly files: number;
  readonly objectsUploaded: number;
  readonly bytesUploaded: number;
}

export interface RestoreOptions {
  /** Default: the latest checkpoint. */
  readonly checkpointId?: string;
  /** Called as each file's download starts. */
  readonly onProgress?: (progress: RestoreProgress) => void;
}

export interface RestoreProgress {
  readonly files: number;
  readonly bytes: number;
  /** Files whose download started, this one included, and their bytes. */
  readonly filesStarted: number;
  readonly bytesStarted: number;
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

/** A session of the caller's, as the session index shows it: its latest checkpoint and its `data`. */
export type SessionRecord = Wire<z.output<typeof Session>>;

/** A page of sessions; `next` is passed as `after` for the next page, null after the last one. */
export type SessionPage = Wire<z.output<typeof SessionPageSchema>>;

/** `latest` is not the parent this publish was based on: another publisher got there first. */
export class StaleCheckpointError extends Error {
  constructor(readonly latest: string | null) {
    super(`the session's latest checkpoint is ${latest ?? 'none'}: publish again on it`);
    this.name = 'StaleCheckpointError';
  }
}

interface ManifestToPublish {
  readonly checkpointId: string;
  readonly parent: string | null;
  readonly files: readonly ManifestFile[];
  readonly data: Record<string, unknown> | undefined;
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
    return (await readJson<Manifest>(response, 200)).checkpointId;
  }

  /** A checkpoint's manifest (default the latest); `not_found` when the session or checkpoint is not there. */
  async readManifest(sessionId: string, checkpointId = LATEST): Promise<Manifest> {
    validateId(sessionId, 'sessionId');
    const response = await this.transport.send(
      'GET',
      `/sessions/${segment(sessionId)}/checkpoints/${segment(checkpointId)}`,
    );
    return readJson<Manifest>(response, 200);
  }

  /** The session's index record; `not_found` when it has no checkpoint (or is not the caller's). */
  async getSession(sessionId: string): Promise<SessionRecord> {
    validateId(sessionId, 'sessionId');
    return readJson(await this.transport.call('GET', `/sessions/${segment(sessionId)}`), 200);
  }

  /** One page of the caller's sessions with ids after `after`, ascending (`limit` 1-1000, default 100). */
  async listSessionsPage(
    options: { readonly after?: string; readonly limit?: number } = {},
  ): Promise<SessionPage> {
    const reply = await this.transport.call('GET', '/sessions', {
      query: { after: options.after, limit: options.limit },
    });
    return readJson(reply, 200);
  }

  /** Every session of the caller's, ascending by id, fetched a page at a time. */
  async *listSessions(
    options: { readonly pageSize?: number } = {},
  ): AsyncGenerator<SessionRecord, void, undefined> {
    let after: string | undefined;
    for (;;) {
      const page = await this.listSessionsPage({
        ...(after === undefined ? {} : { after }),
        ...(options.pageSize === undefined ? {} : { limit: options.pageSize }),
      });
      yield* page.sessions;
      if (page.next === null) return;
      after = page.next;
    }
  }

  async publishCheckpoint(
    dir: string,
    sessionId: string,
    options: PublishOptions = {},
  ): Promise<PublishReport> {
    validateId(sessionId, 'sessionId');
    const requestsBefore = this.transport.counts.requests;
    const files = await filesToPublish(dir);
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
      const uploads = await this.uploadSessionFiles(sessionId, checkpointId, files, previous, totals, () =>
        options.onProgress?.({
          files: files.length,
          objectsUploaded: totals.objects,
          bytesUploaded: totals.bytes,
        }),
      );
      const parent = await parentRead;
      const manifest = {
        checkpointId,
        parent,
        files: uploads.map((upload) => upload.entry),
        data: options.data,
      };
      if ((await this.postManifest(sessionId, manifest, attempt === 0)) === 'missing objects') {
        // Cairn lacks objects the state file says were uploaded (a state file from elsewhere, a
        // reset store): upload everything again under new generations, once.
        previous = {};
        continue;
      }
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
  }

  async restoreCheckpoint(
    sessionId: string,
    dir: string,
    options: RestoreOptions = {},
  ): Promise<RestoreReport> {
    const target = await emptyTarget(dir);
    const manifest = await this.readManifest(sessionId, options.checkpointId ?? LATEST);
    const route = `/sessions/${segment(sessionId)}/checkpoints/${segment(manifest.checkpointId)}/files/`;
    const files = manifest.files.length;
    const bytes = manifest.files.reduce((sum, file) => sum + file.size, 0);
    const started = new Set<string>(); // a file fetched again after a bad download counts once
    let bytesStarted = 0;
    await restoreTree(target, sessionId, manifest, this.restoreConcurrency, (file) => {
      if (!started.has(file.path)) {
        started.add(file.path);
        bytesStarted += file.size;
        options.onProgress?.({ files, bytes, filesStarted: started.size, bytesStarted });
      }
      return this.transport.send('GET', route + keyPath(file.path));
    });
    return {
      checkpointId: manifest.checkpointId,
      files: manifest.files.length,
      bytes: manifest.files.reduce((sum, file) => sum + file.size, 0),
    };
  }

  private uploadSessionFiles(
    sessionId: string,
    checkpointId: string,
    files: readonly SessionFile[],
    previous: Readonly<Record<string, UploadedFile>>,
    totals: { objects: number; bytes: number },
    uploaded: () => void,
  ) {
    return uploadFiles(files, checkpointId, previous, this.concurrency, async (key, bytes) => {
      const sent = await this.putObject(sessionId, key, bytes);
      totals.objects++;
      totals.bytes += bytes.length;
      uploaded();
      return sent;
    });
  }

  /**
   * Publishes the manifest (idempotent: the same manifest again answers as the first time did).
   * `missing objects` when Cairn lacks objects and `tolerateMissing`; a stale parent throws
   * {@link StaleCheckpointError}; any other refusal its `CairnHttpError`.
   */
  private async postManifest(
    sessionId: string,
    manifest: ManifestToPublish,
    tolerateMissing: boolean,
  ): Promise<'published' | 'missing objects'> {
    const response = await this.transport.send('POST', `/sessions/${segment(sessionId)}/checkpoints`, {
      json: manifest,
      idempotent: true,
    });
    if (response.status === 201) {
      await response.discard();
      return 'published';
    }
    if (response.status === 422 && tolerateMissing) {
      await response.discard();
      return 'missing objects';
    }
    const error = await failure(response);
    if (error.status === 409 && 'latest' in error.details) {
      throw new StaleCheckpointError((error.details['latest'] as string | null) ?? null);
    }
    throw error;
  }

  /** PUTs one object; resolves with its size, throws ObjectConflict for 409, CairnHttpError else. */
  private async putObject(sessionId: string, key: string, bytes: Buffer): Promise<number> {
    const response = await this.transport.send('PUT', `/sessions/${segment(sessionId)}/objects/${key}`, {
      body: bytes,
    });
    if (response.status === 200 || response.status === 201) {
      await response.discard();
      return bytes.length;
    }
    if (response.status === 409) {
      await response.discard();
      throw new ObjectConflict(key);
    }
    throw await failure(response);
  }
}
