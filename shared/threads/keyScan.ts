import { InvalidArgumentError } from '../protocol/errors';
import { compareKeys } from '../protocol/keyOrderWalk';
import type { KeyValueStore } from '../storage/keyValueStore';

/**
 * Walks the keys under a prefix in ascending order, a listing page at a time, and hands out its
 * position as an opaque cursor that resumes exactly after the last key it returned: the store's
 * own cursor of the page that key was on, plus that key (keys up to it are skipped on resuming).
 * Resuming costs one listing request, wherever the position is.
 *
 * A start by key (`afterKey`) has no store cursor to begin from: it lists from the first key and
 * skips, 1,000 keys per request.
 */
export interface ScanStart {
  /** A {@link KeyScan.position} of a scan of the same prefix. */
  readonly cursor?: string;
  /** Only keys after this one (whole keys, prefix included). */
  readonly afterKey?: string;
}

const PAGE_SIZE = 1000;

interface Position {
  /** The listing's prefix. */
  readonly p: string;
  /** The store cursor of the page holding the last key returned (null: the first page). */
  readonly c: string | null;
  /** That key, without the prefix. */
  readonly k: string;
}

export class KeyScan {
  private page: string[] = [];
  private index = 0;
  private pageCursor: string | null;
  private nextCursor: string | null = null;
  private loaded = false;
  private after: string | undefined;
  private last: string | undefined;
  /** Listing requests made so far. */
  pagesRead = 0;

  /** The ETags of the page last listed, when asked for (`withEtags`). */
  private etags: Map<string, string> | undefined;
  private readonly firstPagesSize: number;

  constructor(
    private readonly store: KeyValueStore,
    private readonly prefix: string,
    start: ScanStart,
    options: {
      /** List each key's ETag too (the same one request), for {@link etagOf}. */
      readonly withEtags?: boolean;
      /**
       * Keys the first two listings ask for (default 1000, as the next ones): a scan that needs few
       * keys lists few, and a scan resumed from its position lists the page that holds its last key
       * again, from that page's start.
       */
      readonly firstPagesSize?: number;
    } = {},
  ) {
    if (options.withEtags === true) this.etags = new Map();
    this.firstPagesSize = options.firstPagesSize ?? PAGE_SIZE;
    if (start.cursor !== undefined) {
      const position = decodePosition(start.cursor);
      if (position.p !== prefix) throw new InvalidArgumentError('cursor', 'was made for another listing');
      this.pageCursor = position.c;
      this.after = prefix + position.k;
    } else {
      this.pageCursor = null;
      this.after = start.afterKey;
    }
  }

  /** The next key, without taking it; null at the end. */
  async peek(): Promise<string | null> {
    for (;;) {
      while (this.index < this.page.length) {
        const key = this.page[this.index] as string;
        if (this.after === undefined || compareKeys(key, this.after) > 0) return key;
        this.index++;
      }
      if (this.loaded && this.nextCursor === null) return null;
      await this.load();
    }
  }

  /** Takes the next key; null at the end. */
  async next(): Promise<string | null> {
    const key = await this.peek();
    if (key === null) return null;
    this.index++;
    this.last = key;
    return key;
  }

  async hasMore(): Promise<boolean> {
    return (await this.peek()) !== null;
  }

  /** Where to resume: after the last key taken. */
  position(): string {
    const key = this.last ?? (this.after?.startsWith(this.prefix) === true ? this.after : this.prefix);
    const position: Position = { p: this.prefix, c: this.pageCursor, k: key.slice(this.prefix.length) };
    return Buffer.from(JSON.stringify(position)).toString('base64url');
  }

  /** The ETag the listing gave `key` (of the page last listed), when the scan lists ETags. */
  etagOf(key: string): string | undefined {
    return this.etags?.get(key);
  }

  private async load(): Promise<void> {
    const cursor = this.loaded ? this.nextCursor : this.pageCursor;
    const limit = this.pagesRead < 2 ? Math.min(PAGE_SIZE, this.firstPagesSize) : PAGE_SIZE;
    const options = { prefix: this.prefix, limit, ...(cursor === null ? {} : { cursor }) };
    let page: { keys: string[]; cursor: string | null };
    if (this.etags === undefined) {
      page = await this.store.list(options);
    } else {
      // The same one listing request, with each key's ETag.
      const listed = await this.store.listItems(options);
      this.etags = new Map(listed.items.map((item) => [item.key, item.etag]));
      page = { keys: listed.items.map((item) => item.key), cursor: listed.cursor };
    }
    this.pagesRead++;
    this.loaded = true;
    this.pageCursor = cursor;
    this.nextCursor = page.cursor;
    this.page = page.keys;
    this.index = 0;
  }
}

function decodePosition(cursor: string): Position {
  let body: unknown;
  try {
    body = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw new InvalidArgumentError('cursor', 'is not a cursor returned by this API');
  }
  const position = body as Position;
  if (
    typeof body !== 'object' ||
    body === null ||
    typeof position.p !== 'string' ||
    (position.c !== null && typeof position.c !== 'string') ||
    typeof position.k !== 'string'
  ) {
    throw new InvalidArgumentError('cursor', 'is not a cursor returned by this API');
  }
  return position;
}
