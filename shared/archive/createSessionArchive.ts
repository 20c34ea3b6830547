import path from 'node:path';

import type { BlobServiceClient } from '@azure/storage-blob';

import type { Config } from '../config';
import { BlobImmutableObjectStore } from '../storage/blobImmutableObjectStore';
import type { ImmutableObjectStore } from '../storage/immutableObjectStore';
import { LocalImmutableObjectStore } from '../storage/localImmutableObjectStore';
import { createSessionTableClient, TableSessionIndex } from '../storage/sessionIndexTable';
import { SessionArchive } from './sessionArchive';

/** Blob names of archives start with this, in the container named exactly CAIRN_BLOB_CONTAINER. */
export const ARCHIVE_BLOB_PREFIX = 'sessions/';

/**
 * The archive objects of the configured backend. Session ids are global (a session belongs to the
 * tenant that first writes to it), so archives live outside the per-tenant key/value space:
 * `<dataDir>/sessions/<sid>/...` locally, blobs `sessions/<sid>/...` in the container named exactly
 * CAIRN_BLOB_CONTAINER on Blob (tenant containers are `<base>-<hash>`, so names never collide).
 */
export function createArchiveObjectStore(
  config: Config,
  blobService?: BlobServiceClient,
): ImmutableObjectStore {
  const { backend } = config;
  if (backend.kind === 'blob' && blobService !== undefined) {
    return new BlobImmutableObjectStore(
      blobService.getContainerClient(backend.container),
      ARCHIVE_BLOB_PREFIX,
      config.storageTimeoutMs,
    );
  }
  return new LocalImmutableObjectStore(
    path.join(config.dataDir, 'sessions'),
    path.join(config.dataDir, 'tmp'),
  );
}

/** The session archive, or undefined when the session index has no table service (CAIRN_TABLE_ENDPOINT). */
export function createSessionArchive(
  config: Config,
  blobService?: BlobServiceClient,
): SessionArchive | undefined {
  const { tableService, tableName } = config.sessionIndex;
  if (tableService === undefined) return undefined;
  const index = new TableSessionIndex(
    createSessionTableClient(tableService, tableName),
    config.storageTimeoutMs,
  );
  return new SessionArchive(createArchiveObjectStore(config, blobService), index);
}
