import { channelSegment, idOfInverted, invertedId, namespaceSegment } from './identifiers';

/**
 * Where the thread store keeps what, in a tenant's thread space (docs/threads.md, "Storage layout"),
 * shared by the store, retention and verify so that the layout is written down once:
 *
 * - `t/<threadId>`: the thread record;
 * - `d/<threadId>/<incarnation>/c/<inverted checkpoint id>/<namespace segment>`: checkpoint records;
 * - `d/.../v/<namespace segment>/<producer checkpoint id>/<channel segment>/<digest>`: values;
 * - `d/.../p/<namespace segment>/<checkpoint id>`: the pack of a checkpoint whose record retention
 *   removed while later checkpoints still name chunks of it;
 * - `d/.../w/<namespace segment>/<checkpoint id>`: pending writes;
 * - `d/.../n/<namespace segment>`: namespace marks.
 */

export const THREAD_RECORD_PREFIX = 't/';
export const DATA_PREFIX = 'd/';

export const threadKey = (threadId: string) => `${THREAD_RECORD_PREFIX}${threadId}`;

/** Every key of one incarnation of a thread starts with this. */
export const incarnationPrefix = (threadId: string, incarnation: string) =>
  `${DATA_PREFIX}${threadId}/${incarnation}/`;

export function keysOf(thread: { readonly threadId: string; readonly incarnation: string }) {
  const data = incarnationPrefix(thread.threadId, thread.incarnation);
  return {
    data,
    checkpoints: `${data}c/`,
    record: (checkpointId: string, ns: string) =>
      `${data}c/${invertedId(checkpointId)}/${namespaceSegment(ns)}`,
    /** `source` is a record's value source: `<producing checkpoint id>/<digest of the value>`. */
    value: (ns: string, source: string, channel: string) => {
      const slash = source.lastIndexOf('/');
      const producer = source.slice(0, slash);
      const digest = source.slice(slash + 1);
      return `${data}v/${namespaceSegment(ns)}/${producer}/${channelSegment(channel)}/${digest}`;
    },
    /** Where a checkpoint's pack is once its record is gone (see CheckpointRecord.pack). */
    pack: (ns: string, checkpointId: string) => `${data}p/${namespaceSegment(ns)}/${checkpointId}`,
    writes: (ns: string, checkpointId: string) => `${data}w/${namespaceSegment(ns)}/${checkpointId}`,
    namespaceMark: (ns: string) => `${data}n/${namespaceSegment(ns)}`,
  };
}

/** The namespace segment of a checkpoint record key (`<prefix><inverted id>/<namespace>`). */
export function namespaceOfRecordKey(key: string, prefix: string): string | undefined {
  return key.slice(prefix.length).split('/')[1];
}

/** A key of a thread's data, read back from its parts (null when it is none of the kinds). */
export type DataKey =
  | { readonly kind: 'record'; readonly checkpointId: string; readonly nsSegment: string }
  | {
      readonly kind: 'value';
      readonly nsSegment: string;
      readonly producer: string;
      readonly channelSegment: string;
      readonly digest: string;
    }
  | { readonly kind: 'writes'; readonly nsSegment: string; readonly checkpointId: string }
  | { readonly kind: 'pack'; readonly nsSegment: string; readonly checkpointId: string }
  | { readonly kind: 'mark'; readonly nsSegment: string };

export interface ParsedDataKey {
  readonly threadId: string;
  readonly incarnation: string;
  readonly item: DataKey | null;
}

/** Parses `d/<threadId>/<incarnation>/...`; null when `key` is not under `d/`. */
export function parseDataKey(key: string): ParsedDataKey | null {
  if (!key.startsWith(DATA_PREFIX)) return null;
  const [threadId = '', incarnation = '', kind, ...rest] = key.slice(DATA_PREFIX.length).split('/');
  if (threadId === '' || incarnation === '') return null;
  const item = ((): DataKey | null => {
    if (kind === 'c' && rest.length === 2) {
      const checkpointId = idOfInverted(rest[0] ?? '');
      return checkpointId === null ? null : { kind: 'record', checkpointId, nsSegment: rest[1] ?? '' };
    }
    if (kind === 'v' && rest.length === 4) {
      const [nsSegment = '', producer = '', channel = '', digest = ''] = rest;
      return { kind: 'value', nsSegment, producer, channelSegment: channel, digest };
    }
    if (kind === 'w' && rest.length === 2) {
      return { kind: 'writes', nsSegment: rest[0] ?? '', checkpointId: rest[1] ?? '' };
    }
    if (kind === 'p' && rest.length === 2) {
      return { kind: 'pack', nsSegment: rest[0] ?? '', checkpointId: rest[1] ?? '' };
    }
    if (kind === 'n' && rest.length === 1) return { kind: 'mark', nsSegment: rest[0] ?? '' };
    return null;
  })();
  return { threadId, incarnation, item };
}
