import { createHash } from 'node:crypto';

import type { SessionArchive } from '../../shared/archive/sessionArchive';
import type { ManifestFile } from '../../shared/protocol/archive/manifest';
import type { KeyValueStore, ListedItem } from '../../shared/storage/keyValueStore';
import type { TypedBytes } from '../../shared/threads/records';
import type { CheckpointPut, ThreadStore } from '../../shared/threads/threadStore';
import { restoreBytes, splitFile } from './archiveTestKit';

/** Data for retention tests: checkpoints with values and writes, session checkpoints, key listings. */

export const json = (value: unknown): TypedBytes => ({
  type: 'json',
  data: Buffer.from(JSON.stringify(value)),
});

/**
 * A put of `checkpointId` on `parent` in which every channel of `changed` gets a new version (and a
 * value naming the checkpoint), and `static` keeps version 1 (its value stays the first one's).
 */
export function put(
  checkpointId: string,
  parent: string | null,
  options: { ns?: string; changed?: readonly string[]; version?: number; runId?: string } = {},
): CheckpointPut {
  const changed = options.changed ?? ['messages'];
  const version = options.version ?? 1;
  const values: Record<string, TypedBytes | null> = {};
  const channelVersions: Record<string, number> = { static: 1 };
  for (const channel of changed) {
    values[channel] = json({ channel, checkpointId, padding: 'x'.repeat(200) });
    channelVersions[channel] = version;
  }
  if (parent === null) values['static'] = json({ static: true });
  return {
    checkpointId,
    ns: options.ns ?? '',
    parent,
    ...(options.runId === undefined ? {} : { runId: options.runId }),
    v: 4,
    checkpoint: json({ id: checkpointId }),
    metadata: { step: version },
    channelVersions,
    values,
  };
}

/** `count` checkpoints `<prefix>1 … <prefix><count>` in a line, each with a pending write. */
export async function putLine(
  threads: ThreadStore,
  tenant: string,
  threadId: string,
  count: number,
  options: { prefix?: string; ns?: string; from?: string | null; firstVersion?: number } = {},
): Promise<string[]> {
  const prefix = options.prefix ?? 'c';
  const ids: string[] = [];
  let parent = options.from ?? null;
  for (let index = 1; index <= count; index++) {
    const id = `${prefix}${String(index).padStart(3, '0')}`;
    await threads.putCheckpoint(
      tenant,
      threadId,
      put(id, parent, {
        version: (options.firstVersion ?? 1) + index,
        ...(options.ns === undefined ? {} : { ns: options.ns }),
      }),
    );
    await threads.putWrites(tenant, threadId, {
      ns: options.ns ?? '',
      checkpointId: id,
      taskId: 'task',
      taskPath: '',
      writes: [{ channel: 'messages', idx: 0, value: json(`write of ${id}`) }],
    });
    ids.push(id);
    parent = id;
  }
  return ids;
}

/** Every listed item of a store under `prefix`. */
export async function allItems(store: KeyValueStore, prefix = ''): Promise<ListedItem[]> {
  const items: ListedItem[] = [];
  let cursor: string | undefined;
  do {
    const page = await store.listItems({ prefix, limit: 5000, ...(cursor === undefined ? {} : { cursor }) });
    items.push(...page.items);
    cursor = page.cursor ?? undefined;
  } while (cursor !== undefined);
  return items;
}

export const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

/** Deterministic bytes of a file (`size` bytes, seeded by `seed`). */
export function fileBytes(size: number, seed: string): Buffer {
  const bytes = Buffer.alloc(size);
  let block = createHash('sha256').update(seed).digest();
  for (let offset = 0; offset < size; offset += block.length) {
    block.copy(bytes, offset);
    block = createHash('sha256').update(block).digest();
  }
  return bytes;
}

/** Uploads a file's objects and publishes it as `checkpointId` on `parent`. */
export async function publishFile(
  archive: SessionArchive,
  tenant: string,
  sessionId: string,
  checkpointId: string,
  parent: string | null,
  bytes: Buffer,
  generation = 'g1',
): Promise<ManifestFile> {
  const { objects, file } = splitFile('events.jsonl', bytes, generation, checkpointId);
  for (const [key, object] of objects) await archive.putObject(tenant, sessionId, key, object);
  await archive.publishCheckpoint(tenant, sessionId, { checkpointId, parent, files: [file], data: null });
  return file;
}

export async function restored(
  archive: SessionArchive,
  tenant: string,
  sessionId: string,
  checkpointId = 'latest',
): Promise<Buffer> {
  return restoreBytes(archive, tenant, sessionId, checkpointId, 'events.jsonl');
}
