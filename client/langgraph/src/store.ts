import type {
  MemoryBatchOperation,
  MemoryBatchResult,
  MemoryClient,
  MemoryFact,
  MemorySearchHit,
} from '@cairn-state/client';
import { CairnClient, type CairnClientOptions, vectorBase64 } from '@cairn-state/client';
import { CairnHttpError } from '@cairn-state/client';
import { MAX_NAMESPACE_SEGMENTS } from '@cairn-state/protocol/memory';
import {
  BaseStore,
  getTextAtPath,
  type IndexConfig,
  type Item,
  type ListNamespacesOperation,
  type MatchCondition,
  type Operation,
  type OperationResults,
  type PutOperation,
  type SearchItem,
  type SearchOperation,
  validateNamespace,
} from '@langchain/langgraph-checkpoint';

/**
 * A LangGraph store (`BaseStore`) on Cairn's long-term memory: every item is a memory fact of the
 * caller's tenant, so several processes (and other Cairn clients) share it.
 *
 *     const store = new CairnStore({ url: 'http://127.0.0.1:7071/api', token: apiKey, scope: 'support-bot' });
 *     const graph = builder.compile({ store });
 *
 * Mapping:
 * - A LangGraph namespace `["users", "42"]` is the Cairn namespace `<scope>/users/42`. `scope`
 *   (default `langgraph`, a Cairn namespace path) keeps one store's items apart from another's in
 *   the same tenant. Labels may hold any character: `%`, `/` and control characters are written as
 *   `%XX`, Unicode noncharacters and unpaired surrogates as `%U` and six hex digits (and an empty
 *   label as a lone `%`), an encoding that maps different labels to different
 *   segments and is undone on the way back. Keys are encoded the same way (except `/`, which keys
 *   may hold). The encoded namespace must fit Cairn's limits (at most 16 segments with the
 *   scope, 512 bytes); longer ones are refused by the service (400).
 * - `put` replaces the item (keeping `createdAt`); `put(..., { ttl })` takes minutes, as
 *   LangGraph's Postgres store does, and a put without one clears any earlier ttl. Reads never
 *   extend a ttl.
 * - `index: { dims, embeddings, fields }` (LangGraph's `IndexConfig`): a put embeds the texts at
 *   the fields (default `["$"]`, the whole value; `put(..., index)` overrides them per item, `false`
 *   embeds nothing) and stores the vectors with the fact, as LangGraph's stores name them (`path`,
 *   or `path.i` for the i-th of several texts; at most 8 per item). A search with `query` then ranks
 *   by cosine similarity to the query's embedding, its `score` the similarity in [-1, 1] as
 *   LangGraph's stores give it, items without vectors after the others (without score). Without an
 *   index `query` is Cairn's keyword search (`score` in [0, 1]).
 * - When the embedder fails (or answers vectors of another dimension count), a put stores the item
 *   without vectors and a search falls back to the keyword search; neither fails, and each calls
 *   `onWarning` (default `console.warn`) saying so.
 * - `search`: the namespace prefix and below; `filter` on top-level value fields
 *   (`$eq $ne $gt $gte $lt $lte $in $nin $exists`) is applied by the service before `offset` and
 *   `limit`, so pages are exact. Without `query`, newest first.
 * - `listNamespaces`: prefix, suffix, `maxDepth` (namespaces cut to that depth, then distinct),
 *   `limit`, `offset`, done by the service; a `*` label in a prefix or suffix (any label) makes the
 *   store read every namespace under the literal part of the prefix and match here. Results are
 *   ordered label by label in UTF-16 code unit order of the encoded labels.
 * - `batch` sends its operations in one request (`POST /api/memory/batch`), run in order there.
 */

export interface CairnStoreScope {
  /** A Cairn namespace path (`'apps/support'`) or its segments; default `langgraph`. */
  readonly scope?: string | readonly string[];
}

export interface CairnStoreIndex {
  /** LangGraph's index config: `dims`, `embeddings` (a LangChain `Embeddings`) and `fields`. */
  readonly index?: IndexConfig;
  /** Told when the embedder failed and a put or search went on without it; default console.warn. */
  readonly onWarning?: (message: string, error: unknown) => void;
}

export type CairnStoreOptions = (CairnClientOptions | { readonly client: CairnClient }) &
  CairnStoreScope &
  CairnStoreIndex;

/** An operation as sent in a batch, and how its answer becomes LangGraph's result. */
interface Sent {
  readonly operation: MemoryBatchOperation;
  readonly finish: (answer: MemoryBatchResult) => unknown;
}

/** Operations per batch request (the service takes at most 1,000). */
const BATCH_LIMIT = 1000;

function isWildcardListing(operation: Operation): boolean {
  return (
    'limit' in operation &&
    !('namespacePrefix' in operation) &&
    (operation.matchConditions ?? []).some((condition) => condition.path.includes('*'))
  );
}

/** The most namespaces the service answers in one page. */
const NAMESPACE_PAGE = 1000;
const DEFAULT_SCOPE = ['langgraph'];

export class CairnStore extends BaseStore {
  private readonly memory: MemoryClient;
  private readonly scope: readonly string[];
  private readonly index: IndexConfig | undefined;
  private readonly onWarning: (message: string, error: unknown) => void;

  constructor(options: CairnStoreOptions) {
    super();
    this.index = options.index;
    this.onWarning = options.onWarning ?? ((message, error) => console.warn(`CairnStore: ${message}`, error));
    this.memory = ('client' in options ? options.client : new CairnClient(options)).memory;
    const scope =
      options.scope === undefined
        ? DEFAULT_SCOPE
        : typeof options.scope === 'string'
          ? options.scope.split('/')
          : [...options.scope];
    if (scope.length === 0 || scope.some((segment) => segment === '' || segment.includes('/'))) {
      throw new TypeError('scope must be a Cairn namespace path of non-empty segments, e.g. "apps/support"');
    }
    this.scope = scope;
  }

  /**
   * Sends the operations to the service in one request (`POST /api/memory/batch`, up to 1,000 per
   * request), run there in order; a listing with a `*` label runs on its own, in its place. Puts
   * are embedded first (all at once). When an operation fails, the others still took effect and
   * the first failure is thrown (a CairnHttpError with its route's status).
   */
  async batch<Op extends Operation[]>(operations: Op): Promise<OperationResults<Op>> {
    const results: unknown[] = new Array<unknown>(operations.length).fill(undefined);
    let failure: CairnHttpError | undefined;
    let pending: { at: number; sent: Sent }[] = [];
    const flush = async () => {
      for (let from = 0; from < pending.length; from += BATCH_LIMIT) {
        const part = pending.slice(from, from + BATCH_LIMIT);
        const answers = await this.memory.batch(part.map(({ sent }) => sent.operation));
        answers.forEach((answer, i) => {
          const { at, sent } = part[i] as { at: number; sent: Sent };
          if (answer.error !== undefined) {
            failure ??= new CairnHttpError(
              answer.status,
              answer.error.code,
              answer.error.message,
              answer.error,
              answer.etag,
            );
          } else {
            results[at] = sent.finish(answer);
          }
        });
      }
      pending = [];
    };
    const prepared = await Promise.all(
      operations.map((operation) =>
        isWildcardListing(operation) ? Promise.resolve(null) : this.sendable(operation),
      ),
    );
    for (const [at, operation] of operations.entries()) {
      const sent = prepared[at];
      if (sent === null || sent === undefined) {
        await flush();
        results[at] = await this.runListNamespaces(operation as ListNamespacesOperation);
      } else {
        pending.push({ at, sent });
      }
    }
    await flush();
    if (failure !== undefined) throw failure;
    return results as OperationResults<Op>;
  }

  /** The batch operation to send for `operation`, and how its answer becomes LangGraph's result. */
  private async sendable(operation: Operation): Promise<Sent> {
    if ('namespacePrefix' in operation) return this.searchSent(operation);
    if ('value' in operation) return this.putSent(operation);
    if ('key' in operation) {
      return {
        operation: {
          op: 'get',
          namespace: this.cairnNamespace(operation.namespace),
          key: encodeName(operation.key),
        },
        finish: (answer) =>
          answer.item === null || answer.item === undefined ? null : this.itemOf(answer.item),
      };
    }
    if ('limit' in operation) return this.listingSent(operation);
    throw new TypeError(`unknown store operation: ${JSON.stringify(operation)}`);
  }

  /** Stores an item; `options.ttl` is minutes until it expires (absent: never). */
  override async put(
    namespace: string[],
    key: string,
    value: Record<string, unknown>,
    index?: false | string[],
    options?: { ttl?: number | null },
  ): Promise<void> {
    validateNamespace(namespace);
    const operation: PutOperation & { ttl?: number } = {
      namespace,
      key,
      value,
      ...(index === undefined ? {} : { index }),
      ...(options?.ttl === undefined || options.ttl === null ? {} : { ttl: options.ttl }),
    };
    await this.batch([operation]);
  }

  private async putSent(operation: PutOperation & { ttl?: number }): Promise<Sent> {
    const namespace = this.cairnNamespace(operation.namespace);
    const key = encodeName(operation.key);
    if (operation.value === null)
      return { operation: { op: 'delete', namespace, key }, finish: () => undefined };
    const ttl = operation.ttl === undefined ? undefined : Math.max(1, Math.ceil(operation.ttl * 60));
    const vectors = await this.vectorsOf(operation);
    return {
      operation: {
        op: 'put',
        namespace,
        key,
        value: operation.value,
        ...(ttl === undefined ? {} : { ttl }),
        ...(vectors === null ? {} : { vectors }),
      },
      finish: () => undefined,
    };
  }

  /**
   * The item's vectors by field, as LangGraph's stores name them, in base64 of float32 (a quarter
   * of the JSON numbers' size, and nothing for the service to parse); null without any.
   */
  private async vectorsOf(operation: PutOperation): Promise<Record<string, string> | null> {
    if (this.index === undefined || operation.index === false || operation.value === null) return null;
    const paths = operation.index ?? this.index.fields ?? ['$'];
    const named: [string, string][] = [];
    for (const path of paths) {
      const texts = getTextAtPath(operation.value, path);
      if (texts.length === 1) named.push([path, texts[0] as string]);
      else texts.forEach((text, i) => named.push([`${path}.${i}`, text]));
    }
    if (named.length === 0) return null;
    try {
      const embedded = await this.index.embeddings.embedDocuments(named.map(([, text]) => text));
      this.checkDims(embedded);
      return Object.fromEntries(named.map(([path], i) => [path, vectorBase64(embedded[i] as number[])]));
    } catch (error) {
      this.onWarning('the embedder failed; the item is stored without vectors (found by keywords)', error);
      return null;
    }
  }

  private checkDims(vectors: readonly (readonly number[] | undefined)[]): void {
    const dims = this.index?.dims;
    if (vectors.some((vector) => !Array.isArray(vector) || (dims !== undefined && vector.length !== dims))) {
      throw new TypeError(
        `the embedder answered vectors that are not of ${dims ?? 'the configured'} dimensions`,
      );
    }
  }

  /** The query's embedding, or null (after a warning) when the embedder fails. */
  private async queryVector(query: string): Promise<number[] | null> {
    if (this.index === undefined) return null;
    try {
      const vector = await this.index.embeddings.embedQuery(query);
      this.checkDims([vector]);
      return vector;
    } catch (error) {
      this.onWarning('the embedder failed; this search ranks by keywords instead', error);
      return null;
    }
  }

  private async searchSent(operation: SearchOperation): Promise<Sent> {
    const query = operation.query === undefined || operation.query === '' ? null : operation.query;
    const vector = query === null ? null : await this.queryVector(query);
    return {
      operation: {
        op: 'search',
        namespace: this.cairnNamespace(operation.namespacePrefix),
        ...(vector !== null ? { vector } : query === null ? {} : { text: query }),
        limit: operation.limit ?? 10,
        offset: operation.offset ?? 0,
        ...(operation.filter === undefined || Object.keys(operation.filter).length === 0
          ? {}
          : { filter: operation.filter }),
      },
      finish: (answer): SearchItem[] =>
        (answer.items ?? []).map((hit: MemorySearchHit) => ({
          ...this.itemOf(hit),
          // A vector search's score (1 + cos) / 2 back to the cosine similarity LangGraph's stores give.
          ...(hit.score === undefined ? {} : { score: vector === null ? hit.score : 2 * hit.score - 1 }),
        })),
    };
  }

  /** A listing without `*` labels, answered by the service. */
  private listingSent(operation: ListNamespacesOperation): Sent {
    const conditions = operation.matchConditions ?? [];
    const prefix = conditions.find((condition) => condition.matchType === 'prefix')?.path ?? [];
    const suffix = conditions.find((condition) => condition.matchType === 'suffix')?.path ?? [];
    return {
      operation: {
        op: 'listNamespaces',
        prefix: this.cairnNamespace(prefix),
        ...(suffix.length === 0 ? {} : { suffix: suffix.map(encodeName).join('/') }),
        // Past the deepest a namespace goes, a depth cuts nothing: the service takes at most that.
        ...(operation.maxDepth === undefined
          ? {}
          : { maxDepth: Math.min(MAX_NAMESPACE_SEGMENTS, operation.maxDepth + this.scope.length) }),
        limit: operation.limit,
        offset: operation.offset,
      },
      // A suffix longer than a namespace could only match into the scope: not a match in LangGraph.
      finish: (answer) =>
        (answer.namespaces ?? [])
          .map((segments) => this.labelsOf(segments))
          .filter((labels) => labels.length > 0 && labels.length >= suffix.length),
    };
  }

  /** A listing with `*` labels: every namespace under the literal start of the prefix, matched here. */
  private async runListNamespaces(operation: ListNamespacesOperation): Promise<string[][]> {
    const conditions = operation.matchConditions ?? [];
    const prefix = conditions.find((condition) => condition.matchType === 'prefix')?.path ?? [];
    const depth = this.scope.length;
    // Wildcards: every namespace under the literal start of the prefix, matched here.
    const literal = prefix.slice(0, Math.max(0, prefix.indexOf('*')));
    const all: (readonly string[])[] = [];
    for (let offset = 0; ; offset += NAMESPACE_PAGE) {
      const page = await this.memory.listNamespaces({
        prefix: this.cairnNamespace(literal),
        limit: NAMESPACE_PAGE,
        offset,
      });
      all.push(...page.namespaces);
      if (page.namespaces.length < NAMESPACE_PAGE) break;
    }
    const distinct = new Map<string, string[]>();
    for (const segments of all) {
      const encoded = segments.slice(depth);
      const labels = encoded.map(decodeName);
      if (labels.length === 0 || !conditions.every((condition) => matches(condition, labels))) continue;
      const cut = operation.maxDepth === undefined ? encoded : encoded.slice(0, operation.maxDepth);
      distinct.set(cut.join('/'), cut);
    }
    return [...distinct.values()]
      .sort(compareSegments)
      .slice(operation.offset, operation.offset + operation.limit)
      .map((encoded) => encoded.map(decodeName));
  }

  private cairnNamespace(labels: readonly string[]): string {
    return [...this.scope, ...labels.map(encodeName)].join('/');
  }

  private labelsOf(segments: readonly string[]): string[] {
    return segments.slice(this.scope.length).map(decodeName);
  }

  private itemOf(fact: MemoryFact): Item {
    return {
      namespace: this.labelsOf(fact.namespace),
      key: decodeName(fact.key),
      value: fact.value as Record<string, unknown>,
      createdAt: new Date(fact.createdAt),
      updatedAt: new Date(fact.updatedAt),
    };
  }
}

// eslint-disable-next-line no-control-regex
const ESCAPED = /[%/\u0000-\u001f\u007f]|\p{Noncharacter_Code_Point}|\p{Surrogate}/gu;

/**
 * A LangGraph label (or key) as a Cairn segment: `%`, `/` and control characters as `%XX`; Unicode
 * noncharacters and unpaired surrogates, which Cairn names may not hold either, as `%U` and six hex
 * digits of the code point; the empty label as a lone `%` (which no other label encodes to).
 * Different labels give different segments: every `%` of a segment starts an escape, and `U` is no
 * hex digit.
 */
export function encodeName(label: string): string {
  if (label === '') return '%';
  return label.replace(ESCAPED, (char) => {
    const code = char.codePointAt(0) as number;
    const hex = code.toString(16).toUpperCase();
    return code < 0x80 ? `%${hex.padStart(2, '0')}` : `%U${hex.padStart(6, '0')}`;
  });
}

/** The label a segment made by {@link encodeName} stands for. */
export function decodeName(segment: string): string {
  if (segment === '%') return '';
  return segment.replace(/%(?:([0-9A-F]{2})|U([0-9A-F]{6}))/g, (_, byte?: string, code?: string) =>
    // A code point of an escape is a noncharacter or one surrogate: fromCodePoint makes either.
    byte === undefined
      ? String.fromCodePoint(parseInt(code as string, 16))
      : String.fromCharCode(parseInt(byte, 16)),
  );
}

function matches(condition: MatchCondition, labels: readonly string[]): boolean {
  const { path } = condition;
  if (path.length > labels.length) return false;
  const start = condition.matchType === 'prefix' ? 0 : labels.length - path.length;
  return path.every((label, i) => label === '*' || labels[start + i] === label);
}

function compareSegments(a: readonly string[], b: readonly string[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const x = a[i] as string;
    const y = b[i] as string;
    if (x !== y) return x < y ? -1 : 1;
  }
  return a.length - b.length;
}
