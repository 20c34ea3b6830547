import {
  BaseStore,
  type GetOperation,
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

import { CairnClient, type CairnClientOptions } from '../cairnClient';
import type { MemoryClient, MemoryFact, MemorySearchHit } from '../memoryClient';

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
 *   `%XX` (and an empty label as a lone `%`), an encoding that maps different labels to different
 *   segments and is undone on the way back. Keys are encoded the same way (except `/`, which keys
 *   may hold). The encoded namespace must fit Cairn's limits (at most 16 segments with the
 *   scope, 512 bytes); longer ones are refused by the service (400).
 * - `put` replaces the item (keeping `createdAt`); `put(..., { ttl })` takes minutes, as
 *   LangGraph's Postgres store does, and a put without one clears any earlier ttl; `index` is
 *   ignored (no vectors: `query` is Cairn's keyword search, with its `score` in [0, 1]). Reads
 *   never extend a ttl.
 * - `search`: the namespace prefix and below; `filter` on top-level value fields
 *   (`$eq $ne $gt $gte $lt $lte $in $nin $exists`) is applied by the service before `offset` and
 *   `limit`, so pages are exact. Without `query`, newest first.
 * - `listNamespaces`: prefix, suffix, `maxDepth` (namespaces cut to that depth, then distinct),
 *   `limit`, `offset`, done by the service; a `*` label in a prefix or suffix (any label) makes the
 *   store read every namespace under the literal part of the prefix and match here. Results are
 *   ordered label by label in UTF-16 code unit order of the encoded labels.
 * - `batch` runs its operations one after another, in order.
 */

export interface CairnStoreScope {
  /** A Cairn namespace path (`'apps/support'`) or its segments; default `langgraph`. */
  readonly scope?: string | readonly string[];
}

export type CairnStoreOptions = (CairnClientOptions | { readonly client: CairnClient }) & CairnStoreScope;

/** The most namespaces the service answers in one page. */
const NAMESPACE_PAGE = 1000;
const DEFAULT_SCOPE = ['langgraph'];

export class CairnStore extends BaseStore {
  private readonly memory: MemoryClient;
  private readonly scope: readonly string[];

  constructor(options: CairnStoreOptions) {
    super();
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

  async batch<Op extends Operation[]>(operations: Op): Promise<OperationResults<Op>> {
    const results: unknown[] = [];
    for (const operation of operations) results.push(await this.run(operation));
    return results as OperationResults<Op>;
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

  private async run(operation: Operation): Promise<unknown> {
    if ('namespacePrefix' in operation) return this.runSearch(operation);
    if ('value' in operation) return this.runPut(operation);
    if ('key' in operation) return this.runGet(operation);
    if ('limit' in operation) return this.runListNamespaces(operation);
    throw new TypeError(`unknown store operation: ${JSON.stringify(operation)}`);
  }

  private async runGet(operation: GetOperation): Promise<Item | null> {
    const fact = await this.memory.recall(
      this.cairnNamespace(operation.namespace),
      encodeName(operation.key),
    );
    return fact === null ? null : this.itemOf(fact);
  }

  private async runPut(operation: PutOperation & { ttl?: number }): Promise<void> {
    const namespace = this.cairnNamespace(operation.namespace);
    const key = encodeName(operation.key);
    if (operation.value === null) {
      await this.memory.forget(namespace, key);
      return;
    }
    const ttl = operation.ttl === undefined ? undefined : Math.max(1, Math.ceil(operation.ttl * 60));
    await this.memory.remember(namespace, key, operation.value, ttl === undefined ? {} : { ttl });
  }

  private async runSearch(operation: SearchOperation): Promise<SearchItem[]> {
    const { items } = await this.memory.search(this.cairnNamespace(operation.namespacePrefix), {
      ...(operation.query === undefined || operation.query === '' ? {} : { text: operation.query }),
      limit: operation.limit ?? 10,
      offset: operation.offset ?? 0,
      ...(operation.filter === undefined || Object.keys(operation.filter).length === 0
        ? {}
        : { filter: operation.filter }),
    });
    return items.map((hit: MemorySearchHit) => ({
      ...this.itemOf(hit),
      ...(hit.score === undefined ? {} : { score: hit.score }),
    }));
  }

  private async runListNamespaces(operation: ListNamespacesOperation): Promise<string[][]> {
    const conditions = operation.matchConditions ?? [];
    const prefix = conditions.find((condition) => condition.matchType === 'prefix')?.path ?? [];
    const suffix = conditions.find((condition) => condition.matchType === 'suffix')?.path ?? [];
    const wildcard = conditions.some((condition) => condition.path.includes('*'));
    const depth = this.scope.length;
    if (!wildcard) {
      const { namespaces } = await this.memory.listNamespaces({
        prefix: this.cairnNamespace(prefix),
        ...(suffix.length === 0 ? {} : { suffix: suffix.map(encodeName) }),
        ...(operation.maxDepth === undefined ? {} : { maxDepth: operation.maxDepth + depth }),
        limit: operation.limit,
        offset: operation.offset,
      });
      // A suffix longer than a namespace could only match into the scope: not a match in LangGraph.
      return namespaces
        .map((segments) => this.labelsOf(segments))
        .filter((labels) => labels.length > 0 && labels.length >= suffix.length);
    }
    // Wildcards: every namespace under the literal start of the prefix, matched here.
    const literal = prefix.slice(0, Math.max(0, prefix.indexOf('*')));
    const all: string[][] = [];
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
const ESCAPED = /[%/\u0000-\u001f\u007f]/g;

/**
 * A LangGraph label (or key) as a Cairn segment: `%`, `/` and control characters as `%XX`, the
 * empty label as a lone `%` (which no other label encodes to). Different labels give different
 * segments.
 */
export function encodeName(label: string): string {
  if (label === '') return '%';
  return label.replace(
    ESCAPED,
    (char) => `%${char.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`,
  );
}

/** The label a segment made by {@link encodeName} stands for. */
export function decodeName(segment: string): string {
  if (segment === '%') return '';
  return segment.replace(/%([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
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
