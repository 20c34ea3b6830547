import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

import { BlobServiceClient, StorageSharedKeyCredential } from '@azure/storage-blob';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import { azuriteTable } from './tables';

/**
 * Everything an app has stored, as a map from a name to the hash of its content: every file under
 * its data folder, every entity of its tables (ETag and timestamp included, so that a rewrite of the
 * same content counts too) and every blob of its containers. Two snapshots taken around requests
 * that were all refused must be equal: a refused request writes nothing.
 */
export interface StorageSpec {
  readonly dataDir?: string;
  readonly tableEndpoint?: string;
  readonly tables?: readonly string[];
  readonly blobEndpoint?: string;
  /** The app's base container: its own and every `<base>-…` container are read. */
  readonly container?: string;
}

export type StorageSnapshot = ReadonlyMap<string, string>;

const hash = (bytes: Buffer | string) => createHash('sha256').update(bytes).digest('hex');

function walk(root: string, folder: string, into: Map<string, string>): void {
  let entries;
  try {
    entries = readdirSync(folder, { withFileTypes: true });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw error;
  }
  for (const entry of entries) {
    const full = path.join(folder, entry.name);
    const name = `file:${path.relative(root, full)}`;
    if (entry.isDirectory()) {
      into.set(`${name}/`, 'folder');
      walk(root, full, into);
    } else {
      try {
        into.set(name, hash(readFileSync(full)));
      } catch (error) {
        // A file renamed away between the listing and the read is a change of its own.
        into.set(name, `unreadable: ${(error as NodeJS.ErrnoException).code ?? String(error)}`);
      }
    }
  }
}

export async function takeSnapshot(spec: StorageSpec): Promise<StorageSnapshot> {
  const snapshot = new Map<string, string>();
  if (spec.dataDir !== undefined) walk(spec.dataDir, spec.dataDir, snapshot);
  if (spec.tableEndpoint !== undefined) {
    for (const table of spec.tables ?? []) {
      const client = azuriteTable(spec.tableEndpoint, table);
      try {
        for await (const entity of client.listEntities<Record<string, unknown>>()) {
          const text = JSON.stringify(entity, (_key, value: unknown) =>
            typeof value === 'bigint'
              ? `${value}n`
              : value instanceof Uint8Array
                ? Buffer.from(value).toString('base64')
                : value,
          );
          snapshot.set(`table:${table}/${entity.partitionKey}/${entity.rowKey}`, hash(text));
        }
      } catch (error) {
        // The app creates its tables when it first needs them.
        if ((error as { statusCode?: number }).statusCode !== 404) throw error;
      }
    }
  }
  if (spec.blobEndpoint !== undefined && spec.container !== undefined) {
    const service = new BlobServiceClient(
      spec.blobEndpoint,
      new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY),
    );
    for await (const container of service.listContainers({ prefix: spec.container })) {
      if (container.name !== spec.container && !container.name.startsWith(`${spec.container}-`)) continue;
      snapshot.set(`container:${container.name}`, 'container');
      const client = service.getContainerClient(container.name);
      for await (const blob of client.listBlobsFlat()) {
        snapshot.set(
          `blob:${container.name}/${blob.name}`,
          `${blob.properties.etag ?? ''} ${blob.properties.contentLength ?? ''}`,
        );
      }
    }
  }
  return snapshot;
}

/** What differs between two snapshots, one line per name; empty when they are equal. */
export function snapshotDifferences(before: StorageSnapshot, after: StorageSnapshot): string[] {
  const lines: string[] = [];
  for (const [name, value] of after) {
    const old = before.get(name);
    if (old === undefined) lines.push(`added ${name}`);
    else if (old !== value) lines.push(`changed ${name}`);
  }
  for (const name of before.keys()) if (!after.has(name)) lines.push(`removed ${name}`);
  return lines;
}
