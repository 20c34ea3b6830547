import type { KeyPage as KeyPageSchema, WriteResult as WriteResultSchema } from '@cairn-state/protocol/kv';
import type { z } from 'zod';

import { failure, type HttpReply, keyPath, readJson, type Transport } from './transport.js';

/**
 * The tenant's key/value space (`/api/kv/{key}`, `/api/keys`): values are bytes, every write
 * changes the key's ETag, and writes can be made conditional on it (compare-and-swap).
 *
 * Absence is an answer, not an error: `get` and `head` resolve null for an absent key. Everything
 * else the service refuses is thrown as a `CairnHttpError`; a condition not met is `code`
 * `precondition_failed` (412) with the key's current `etag` when it exists.
 *
 * Keys are `/`-separated paths; this client percent-encodes each segment. A key with a `.` or `..`
 * segment is refused with a `TypeError` before anything is sent.
 */

/** Conditions of a write or delete; at most one of them. */
export interface WriteConditions {
  /** Only if the key's current ETag is this one (quoted, as read), or `*`: only if it exists. */
  readonly ifMatch?: string;
  /** `*`: only if the key is absent (create-only). */
  readonly ifNoneMatch?: '*';
}

export interface StoredValue {
  readonly value: Buffer;
  readonly etag: string;
}

export interface ValueInfo {
  readonly etag: string;
  readonly size: number;
}

/** The answer to a write or append (its `size`: bytes stored under the key after the write). */
export interface WriteResult extends Readonly<z.output<typeof WriteResultSchema>> {
  /** True when the key did not exist before (the answer was 201). */
  readonly created: boolean;
}

/** One page of keys; pass `cursor` for the next page, null after the last one. */
export type KeyPage = Readonly<z.output<typeof KeyPageSchema>>;

export interface ListOptions {
  /** Keys starting with this string (a plain prefix, not a folder); default all. */
  readonly prefix?: string;
  /** Keys per request, 1-5000 (default 1000). */
  readonly pageSize?: number;
}

export class KeyValueClient {
  constructor(private readonly transport: Transport) {}

  /** The value and its ETag, or null when the key is absent. */
  async get(key: string): Promise<StoredValue | null> {
    const reply = await this.transport.call('GET', kvPath(key));
    if (reply.status === 404) return null;
    if (reply.status !== 200) throw await failure(reply);
    return { value: await reply.bytes(), etag: requireEtag(reply.header('etag')) };
  }

  /** The ETag and size without the value, or null when the key is absent. */
  async head(key: string): Promise<ValueInfo | null> {
    const reply = await this.transport.call('HEAD', kvPath(key));
    if (reply.status === 404) return null;
    if (reply.status !== 200) throw await failure(reply);
    return { etag: requireEtag(reply.header('etag')), size: Number(reply.header('content-length') ?? 0) };
  }

  /** Stores `value` (a string as UTF-8), replacing what is there unless `conditions` say otherwise. */
  async put(key: string, value: Uint8Array | string, conditions: WriteConditions = {}): Promise<WriteResult> {
    const reply = await this.transport.call('PUT', kvPath(key), {
      body: value,
      headers: conditionHeaders(conditions),
    });
    return writeResult(reply);
  }

  /**
   * Appends `bytes` atomically (concurrent appends are all kept, each contiguous); creates the key
   * when absent. Not idempotent: after a timeout or a cut connection it is not sent again, and the
   * `CairnNetworkError` leaves it to the caller to find out whether it landed.
   */
  async append(
    key: string,
    bytes: Uint8Array | string,
    conditions: WriteConditions = {},
  ): Promise<WriteResult> {
    const reply = await this.transport.call('POST', kvPath(key), {
      body: bytes,
      headers: conditionHeaders(conditions),
    });
    return writeResult(reply);
  }

  /** Deletes the key; an absent key is no error (unless `conditions` require it to exist). */
  async delete(key: string, conditions: WriteConditions = {}): Promise<void> {
    const reply = await this.transport.call('DELETE', kvPath(key), { headers: conditionHeaders(conditions) });
    if (reply.status !== 204 && reply.status !== 200) throw await failure(reply);
  }

  /** One page of keys in ascending order. */
  async listPage(options: ListOptions & { readonly cursor?: string | null } = {}): Promise<KeyPage> {
    const reply = await this.transport.call('GET', '/keys', {
      query: { prefix: options.prefix, limit: options.pageSize, cursor: options.cursor ?? undefined },
    });
    return readJson<KeyPage>(reply, 200);
  }

  /** Every key (with the prefix) in ascending order, each once, fetched a page at a time. */
  async *list(options: ListOptions = {}): AsyncGenerator<string, void, undefined> {
    let cursor: string | null = null;
    do {
      const page: KeyPage = await this.listPage({ ...options, cursor });
      yield* page.keys;
      cursor = page.cursor;
    } while (cursor !== null);
  }
}

function kvPath(key: string): string {
  if (key === '') throw new TypeError('a key must not be empty');
  // Proxies and hosts resolve dot segments before routing: such a key could reach another key.
  if (key.split('/').some((part) => part === '.' || part === '..')) {
    throw new TypeError(`a key must not have a "." or ".." segment: ${key}`);
  }
  return `/kv/${keyPath(key)}`;
}

function conditionHeaders(conditions: WriteConditions): Record<string, string> {
  return {
    ...(conditions.ifMatch === undefined ? {} : { 'if-match': conditions.ifMatch }),
    ...(conditions.ifNoneMatch === undefined ? {} : { 'if-none-match': conditions.ifNoneMatch }),
  };
}

async function writeResult(reply: HttpReply): Promise<WriteResult> {
  const body = await readJson<z.output<typeof WriteResultSchema>>(reply, 200, 201);
  return { key: body.key, etag: body.etag, size: body.size, created: reply.status === 201 };
}

function requireEtag(etag: string | undefined): string {
  if (etag === undefined) throw new Error('the answer carries no ETag');
  return etag;
}
