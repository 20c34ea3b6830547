import type {
  Distance,
  MemoryBatchResult as MemoryBatchResultSchema,
  MemoryBatchResults,
  MemoryForgotten,
  MemoryItem,
  MemoryNamespaceList,
  MemorySearchResult as MemorySearchResultSchema,
  ScoredMemoryItem,
} from '@cairn-state/protocol/memory';
import type { z } from 'zod';

import { failure, readJson, type Transport } from './transport.js';
import type { Wire } from './wire.js';

/**
 * Long-term memory (`/api/memory/...`): JSON facts under `/`-separated namespaces, per tenant.
 *
 * Absence is an answer, not an error: `recall` resolves null for an absent or expired fact, and
 * `forget` of an absent fact succeeds. Everything else the service refuses is thrown as a
 * `CairnHttpError`; a condition not met is `code` `precondition_failed` (412) with the fact's
 * current `etag` when it exists.
 *
 * A namespace is a path (`'users/42'`) or its segments (`['users', '42']`, joined with `/`: a
 * segment must not contain `/` itself). Names travel in the query string, so any name the service
 * accepts reaches it as written.
 */

export type Namespace = string | readonly string[];

/** A fact as answered. Times are Unix milliseconds; `expiresAt` is absent when it never expires. */
export type MemoryFact = Wire<z.output<typeof MemoryItem>>;

/** A search result: `score` in [0, 1] for a search with text or a vector (absent for a fact without vectors then). */
export type MemorySearchHit = Wire<z.output<typeof ScoredMemoryItem>>;

export interface RememberOptions {
  /** Seconds until the fact expires; absent: never (and a previous ttl is cleared). */
  readonly ttl?: number;
  /** Only if the fact's current ETag is this one, or `*`: only if it exists. */
  readonly ifMatch?: string;
  /** `*`: only if no live fact is there. */
  readonly ifNoneMatch?: '*';
  /**
   * Field path (`$`, `text`, `a.b[*]`) → its embedding (at most 8, 1-4096 numbers each, all of the
   * tenant's dimension count), as numbers or as {@link vectorBase64} of them (a quarter of the
   * request's size). A write without vectors leaves the fact without any.
   */
  readonly vectors?: Readonly<Record<string, readonly number[] | string>>;
}

export interface MemorySearchOptions {
  /** Words to look for: results best first with `score`. Absent: newest first. */
  readonly text?: string;
  /** A query embedding: facts with vectors closest first (with `text` too: rank fusion of both). */
  readonly vector?: readonly number[];
  /** How closeness is measured; default `cosine`. */
  readonly distance?: Distance;
  /** 1-1000 (default 10). */
  readonly limit?: number;
  /** 0-10000 (default 0). */
  readonly offset?: number;
  /** Conditions on the value's top-level fields (`{ status: 'active', score: { $gte: 3 } }`). */
  readonly filter?: Readonly<Record<string, unknown>>;
}

/** `truncated`: the namespace held more than one search reads; results cover what was read. */
export type MemorySearchResult = Wire<z.output<typeof MemorySearchResultSchema>>;

export interface NamespaceListOptions {
  readonly prefix?: Namespace;
  readonly suffix?: Namespace;
  readonly maxDepth?: number;
  /** 1-1000 (default 100). */
  readonly limit?: number;
  readonly offset?: number;
}

export type NamespaceList = Wire<z.output<typeof MemoryNamespaceList>>;

/** One operation of {@link MemoryClient.batch}, as the batch route takes it. */
export type MemoryBatchOperation =
  | { readonly op: 'get'; readonly namespace: Namespace; readonly key: string }
  | {
      readonly op: 'put';
      readonly namespace: Namespace;
      readonly key: string;
      readonly value: unknown;
      readonly ttl?: number;
      readonly vectors?: Readonly<Record<string, readonly number[] | string>>;
      readonly ifMatch?: string;
      readonly ifNoneMatch?: '*';
    }
  | { readonly op: 'delete'; readonly namespace: Namespace; readonly key: string; readonly ifMatch?: string }
  | ({ readonly op: 'search'; readonly namespace: Namespace } & MemorySearchOptions)
  | ({ readonly op: 'listNamespaces' } & NamespaceListOptions);

/** One operation's answer in a batch: its route's status and result fields, or its error. */
export type MemoryBatchResult = Wire<z.output<typeof MemoryBatchResultSchema>>;

export class MemoryClient {
  constructor(private readonly transport: Transport) {}

  /** Stores `value` (any JSON) under the namespace and key; `created` when no live fact was there. */
  async remember(
    namespace: Namespace,
    key: string,
    value: unknown,
    options: RememberOptions = {},
  ): Promise<MemoryFact & { readonly created: boolean }> {
    const reply = await this.transport.call('PUT', '/memory/facts', {
      query: factQuery(namespace, key),
      json: {
        value,
        ...(options.ttl === undefined ? {} : { ttl: options.ttl }),
        ...(options.vectors === undefined ? {} : { vectors: options.vectors }),
      },
      headers: {
        ...(options.ifMatch === undefined ? {} : { 'if-match': options.ifMatch }),
        ...(options.ifNoneMatch === undefined ? {} : { 'if-none-match': options.ifNoneMatch }),
      },
      // A PUT: sending it again leaves the same value (a conditional one may answer 412 then).
      idempotent: true,
    });
    const fact = await readJson<MemoryFact>(reply, 200, 201);
    return { ...fact, created: reply.status === 201 };
  }

  /** The fact, or null when absent or expired. */
  async recall(namespace: Namespace, key: string): Promise<MemoryFact | null> {
    const reply = await this.transport.call('GET', '/memory/facts', { query: factQuery(namespace, key) });
    if (reply.status === 404) return null;
    return readJson<MemoryFact>(reply, 200);
  }

  /** Forgets the fact; an absent one is no error unless `ifMatch` names a version. */
  async forget(
    namespace: Namespace,
    key: string,
    options: { readonly ifMatch?: string } = {},
  ): Promise<void> {
    const reply = await this.transport.call('DELETE', '/memory/facts', {
      query: factQuery(namespace, key),
      headers: options.ifMatch === undefined ? {} : { 'if-match': options.ifMatch },
    });
    if (reply.status !== 204) throw await failure(reply);
  }

  /**
   * Runs memory operations in one request (`POST /api/memory/batch`, at most 1,000): answered in
   * order, each with the `status` its route would answer and its result, or its `error` JSON. Not
   * atomic: a failed operation fails alone. Throws only when the request itself fails.
   */
  async batch(operations: readonly MemoryBatchOperation[]): Promise<readonly MemoryBatchResult[]> {
    const reply = await this.transport.call('POST', '/memory/batch', {
      json: { operations: operations.map(wireOperation) },
    });
    return (await readJson<Wire<z.output<typeof MemoryBatchResults>>>(reply, 200)).results;
  }

  /** Facts in the namespace and below (`''`: every namespace). */
  async search(namespace: Namespace, options: MemorySearchOptions = {}): Promise<MemorySearchResult> {
    const reply = await this.transport.call('POST', '/memory/search', {
      json: { namespace: namespacePath(namespace), ...options },
      idempotent: true,
    });
    return readJson<MemorySearchResult>(reply, 200);
  }

  /**
   * Forgets the namespace and everything below it, calling again while the service says more
   * remain; resolves with the number of live facts deleted. `all: true` is needed for `''` (every
   * fact of the tenant).
   */
  async forgetAll(namespace: Namespace, options: { readonly all?: boolean } = {}): Promise<number> {
    let deleted = 0;
    for (;;) {
      const reply = await this.transport.call('DELETE', '/memory/namespaces', {
        query: { namespace: namespacePath(namespace), all: options.all === true ? 'true' : undefined },
      });
      const page = await readJson<Wire<z.output<typeof MemoryForgotten>>>(reply, 200);
      deleted += page.deleted;
      if (!page.more) return deleted;
    }
  }

  /** Distinct namespaces holding live facts (see the options), ordered segment by segment. */
  async listNamespaces(options: NamespaceListOptions = {}): Promise<NamespaceList> {
    const reply = await this.transport.call('GET', '/memory/namespaces', {
      query: {
        prefix: options.prefix === undefined ? undefined : namespacePath(options.prefix),
        suffix: options.suffix === undefined ? undefined : namespacePath(options.suffix),
        maxDepth: options.maxDepth,
        limit: options.limit,
        offset: options.offset,
      },
    });
    return readJson<NamespaceList>(reply, 200);
  }
}

/** A namespace as the service takes it: a path. */
/** A batch operation with its namespaces as paths, as the route takes them. */
function wireOperation(operation: MemoryBatchOperation): Record<string, unknown> {
  if (operation.op === 'listNamespaces') {
    const { prefix, suffix, ...rest } = operation;
    return {
      ...rest,
      ...(prefix === undefined ? {} : { prefix: namespacePath(prefix) }),
      ...(suffix === undefined ? {} : { suffix: namespacePath(suffix) }),
    };
  }
  return { ...operation, namespace: namespacePath(operation.namespace) };
}

export function namespacePath(namespace: Namespace): string {
  if (typeof namespace === 'string') return namespace;
  for (const segment of namespace) {
    if (segment.includes('/')) throw new TypeError(`a namespace segment must not contain "/": ${segment}`);
  }
  return namespace.join('/');
}

function factQuery(namespace: Namespace, key: string) {
  return { namespace: namespacePath(namespace), key };
}

/**
 * A vector as the service also takes it: base64 of its float32 numbers little-endian (4 bytes
 * each), a quarter of the size of the numbers written out in JSON and no number to parse. The
 * service stores float32 either way, so the stored vector is the same.
 */
export function vectorBase64(vector: readonly number[]): string {
  const bytes = Buffer.alloc(vector.length * 4);
  for (let i = 0; i < vector.length; i++) bytes.writeFloatLE(vector[i] as number, i * 4);
  return bytes.toString('base64');
}
