import type { SealingCodec } from '../crypto/encryption';
import type { ValuePlace } from '../crypto/valueCodec';
import { InternalError } from '../protocol/errors';
import type {
  ItemPage,
  KeyValueStore,
  ListOptions,
  ListPage,
  StoredItem,
  StoredValue,
  WriteConditions,
  WriteResult,
} from '../storage/keyValueStore';

/**
 * A tenant's thread space with its values sealed at rest (encryption keys configured): the thread
 * store reads and writes plain bytes through it, and what reaches the storage is sealed, bound to
 * (tenant, kind, storage key). Which keys hold what follows the thread store's layout
 * (threadStore.ts):
 * - `t/<threadId>`, the thread record (heads with their checkpoint metadata, runs): sealed whole;
 * - `d/…/c/…` checkpoint records (their packs with them), `d/…/v/…` channel values and `d/…/p/…`
 *   packs kept apart by retention: sealed whole;
 * - `d/…/w/…` pending writes: every appended line is a sealed value of its own, stored as base64
 *   and a line break, so that concurrent appends stay atomic appends of whole lines;
 * - `d/…/n/…` namespace marks: empty, kept as they are.
 *
 * Sizes from `head` and from writes are stored sizes (the thread store uses them for existence and
 * cache accounting only). A stored value that is not sealed, or does not open at its key, is an
 * IntegrityError (from the codec), never returned and never taken for absent.
 */

export type ThreadKeyKind =
  'thread.record' | 'thread.checkpoint' | 'thread.value' | 'thread.pack' | 'thread.writes' | 'thread.mark';

const DATA_KINDS: Readonly<Record<string, ThreadKeyKind>> = {
  c: 'thread.checkpoint',
  v: 'thread.value',
  p: 'thread.pack',
  w: 'thread.writes',
  n: 'thread.mark',
};

/** What the key `key` of a thread space holds, or null for a key of no known shape. */
export function kindOfThreadKey(key: string): ThreadKeyKind | null {
  if (key.startsWith('t/')) return 'thread.record';
  const parts = key.split('/');
  if (parts[0] !== 'd' || parts.length < 5) return null;
  return DATA_KINDS[parts[3] ?? ''] ?? null;
}

/** Opens each stored line (base64 of a sealed line) of pending writes; returns the plain lines. */
export function openLines(codec: SealingCodec, stored: Buffer, place: ValuePlace): Buffer {
  const lines = stored
    .toString('latin1')
    .split('\n')
    .filter((line) => line !== '');
  return Buffer.concat(
    lines.map((line) => Buffer.concat([codec.open(Buffer.from(line, 'base64'), place), NEWLINE])),
  );
}

/** One plain line (its line break included or not) as a stored line. */
export function sealLine(codec: SealingCodec, line: Buffer, place: ValuePlace): Buffer {
  const body = line.at(-1) === 0x0a ? line.subarray(0, -1) : line;
  return Buffer.from(`${codec.seal(body, place).toString('base64')}\n`, 'latin1');
}

const NEWLINE = Buffer.from('\n');

export class SealedThreadSpace implements KeyValueStore {
  constructor(
    private readonly raw: KeyValueStore,
    private readonly tenant: string,
    private readonly codec: SealingCodec,
  ) {}

  async read(key: string): Promise<StoredValue | null> {
    await this.codec.prepare(this.tenant);
    const stored = await this.raw.read(key);
    if (stored === null) return null;
    const kind = this.kindOf(key);
    const place = this.place(kind, key);
    if (kind === 'thread.mark') return stored;
    if (kind === 'thread.writes')
      return { value: openLines(this.codec, stored.value, place), etag: stored.etag };
    return { value: this.codec.open(stored.value, place), etag: stored.etag };
  }

  head(key: string): Promise<StoredItem | null> {
    return this.raw.head(key);
  }

  async write(key: string, value: Buffer, conditions?: WriteConditions): Promise<WriteResult> {
    await this.codec.prepare(this.tenant);
    const kind = this.kindOf(key);
    return this.raw.write(key, this.sealed(kind, key, value), conditions);
  }

  async append(key: string, bytes: Buffer, conditions?: WriteConditions): Promise<WriteResult> {
    await this.codec.prepare(this.tenant);
    const kind = this.kindOf(key);
    if (kind !== 'thread.writes') throw new InternalError(`the thread store does not append to ${kind} keys`);
    return this.raw.append(key, this.sealed(kind, key, bytes), conditions);
  }

  delete(key: string, conditions?: Pick<WriteConditions, 'ifMatch'>): Promise<boolean> {
    return this.raw.delete(key, conditions);
  }

  list(options: ListOptions): Promise<ListPage> {
    return this.raw.list(options);
  }

  /** Sizes are of the stored (sealed) bytes: what the storage holds and a deletion frees. */
  listItems(options: ListOptions): Promise<ItemPage> {
    return this.raw.listItems(options);
  }

  private sealed(kind: ThreadKeyKind, key: string, value: Buffer): Buffer {
    const place = this.place(kind, key);
    if (kind === 'thread.mark') return value;
    if (kind !== 'thread.writes') return this.codec.seal(value, place);
    // Each line of a write is a line of its own when stored (a put appends one line).
    const lines: Buffer[] = [];
    for (let start = 0; start < value.length;) {
      const end = value.indexOf(0x0a, start);
      const stop = end < 0 ? value.length : end + 1;
      lines.push(sealLine(this.codec, value.subarray(start, stop), place));
      start = stop;
    }
    return Buffer.concat(lines);
  }

  private kindOf(key: string): ThreadKeyKind {
    const kind = kindOfThreadKey(key);
    if (kind === null) throw new InternalError(`${key} is no key of a thread space`);
    return kind;
  }

  private place(kind: ThreadKeyKind, key: string): ValuePlace {
    return { tenant: this.tenant, kind, key };
  }
}
