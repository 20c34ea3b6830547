import { describe, expect, it } from 'vitest';

import { FactColumns } from '../../shared/memory/factColumns';
import { compareNamespaces, type MemoryItem, type ScoredItem } from '../../shared/memory/facts';
import { bm25Scores, documentTerms, queryWords } from '../../shared/memory/keywordSearch';
import { factId } from '../../shared/memory/layout';
import type { StoredFact } from '../../shared/memory/memoryStore';
import { best, rank } from '../../shared/memory/ranking';
import { closeness, packFact, RRF_K, vectorScore } from '../../shared/memory/vectors';
import type { Distance } from '../../shared/protocol/memory';

/**
 * The ranking over columns (a bounded heap, ranks of the fusion worked out without sorting every
 * fact) against the exhaustive one: every fact scored as a plain object, every ranking sorted in
 * full, then cut. Seeded data with ties of time and closeness, facts without vectors, with two,
 * expired ones, and words shared by many facts.
 */

function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    return state / 2 ** 31;
  };
}

const DIMS = 6;
const NOW = 1_000_000;
const VOCABULARY = ['tea', 'coffee', 'green', 'black', 'cup', 'pot', 'milk', 'sugar'];

interface Fact {
  readonly namespace: string;
  readonly key: string;
  readonly value: { text: string; n: number };
  readonly vectors: Map<string, Float32Array>;
  readonly updatedAt: number;
  readonly expiresAt: number | null;
}

function makeFacts(seed: number, count: number): Fact[] {
  const next = random(seed);
  const vector = () => Float32Array.from({ length: DIMS }, () => Math.round((next() * 2 - 1) * 4) / 4);
  const shared = vector();
  return Array.from({ length: count }, (_, i) => {
    const vectors = new Map<string, Float32Array>();
    const kind = next();
    // Some share one vector (ties of closeness), some have two, some none.
    if (kind < 0.15) vectors.set('text', shared);
    else if (kind < 0.75) vectors.set('text', vector());
    else if (kind < 0.85) vectors.set('text', vector()).set('title', vector());
    const words = Array.from({ length: 1 + Math.floor(next() * 5) }, () => {
      return VOCABULARY[Math.floor(next() * VOCABULARY.length)] as string;
    });
    return {
      namespace: ['a', 'a/b', 'a/b/c', 'a-b', 'z'][Math.floor(next() * 5)] as string,
      key: `k${i}`,
      value: { text: words.join(' '), n: i },
      vectors,
      // Few distinct times: many ties, broken by namespace and key.
      updatedAt: 100 + Math.floor(next() * 6),
      expiresAt: next() < 0.1 ? NOW - 1 : next() < 0.1 ? NOW + 1000 : null,
    };
  });
}

function stored(fact: Fact): StoredFact {
  return {
    namespace: fact.namespace,
    key: fact.key,
    value: packFact(Buffer.from(JSON.stringify(fact.value)), fact.vectors),
    createdAt: 50,
    updatedAt: fact.updatedAt,
    expiresAt: fact.expiresAt,
    incarnation: null,
    outbox: null,
    etag: `"${fact.key}"`,
  };
}

function itemOf(fact: Fact): MemoryItem {
  return {
    namespace: fact.namespace.split('/'),
    key: fact.key,
    value: fact.value,
    ...(fact.vectors.size === 0 ? {} : { vectorFields: [...fact.vectors.keys()] }),
    createdAt: 50,
    updatedAt: fact.updatedAt,
    ...(fact.expiresAt === null ? {} : { expiresAt: fact.expiresAt }),
    etag: `"${fact.key}"`,
  };
}

function newestFirst(a: MemoryItem, b: MemoryItem): number {
  return (
    b.updatedAt - a.updatedAt ||
    compareNamespaces(a.namespace, b.namespace) ||
    (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)
  );
}

/** The exhaustive ranking: every fact a candidate object, every ranking sorted in full. */
function reference(
  facts: readonly Fact[],
  request: { text?: string; vector?: Float32Array; distance: Distance; offset: number; limit: number },
): ScoredItem[] {
  const query = request.text === undefined ? null : queryWords(request.text);
  const live = facts.filter((fact) => fact.expiresAt === null || fact.expiresAt > NOW);
  const candidates = live.map((fact) => {
    let close: number | null = null;
    if (request.vector !== undefined) {
      for (const vector of fact.vectors.values()) {
        const c = closeness(request.vector, vector, request.distance);
        if (close === null || c > close) close = c;
      }
    }
    return {
      item: itemOf(fact),
      close,
      terms: query === null ? null : documentTerms(fact.key, fact.value, query),
    };
  });
  const matching = candidates.filter(
    ({ terms }) => terms !== null && terms.counts.some((count) => count > 0),
  );
  const total = candidates.reduce((sum, { terms }) => sum + (terms?.length ?? 0), 0);
  const scores = bm25Scores(
    matching.map(({ terms }) => terms as NonNullable<typeof terms>),
    candidates.length,
    candidates.length === 0 ? 0 : total / candidates.length,
    query?.length ?? 0,
  );
  const keyword = new Map(matching.map((candidate, i) => [candidate, scores[i] as number]));
  const byCloseness = candidates
    .filter(({ close }) => close !== null)
    .sort((a, b) => (b.close as number) - (a.close as number) || newestFirst(a.item, b.item));
  const byKeywords = [...matching].sort(
    (a, b) => (keyword.get(b) as number) - (keyword.get(a) as number) || newestFirst(a.item, b.item),
  );
  let ranked: ScoredItem[];
  if (query === null && request.vector === undefined) {
    ranked = candidates.map(({ item }) => item).sort(newestFirst);
  } else if (request.vector === undefined) {
    ranked = byKeywords.map((candidate) => ({ ...candidate.item, score: keyword.get(candidate) as number }));
  } else if (query === null) {
    ranked = [
      ...byCloseness.map(({ item, close }) => ({
        ...item,
        score: vectorScore(close as number, request.distance),
      })),
      ...candidates
        .filter(({ close }) => close === null)
        .map(({ item }) => item)
        .sort(newestFirst),
    ];
  } else {
    const sums = new Map<(typeof candidates)[number], number>();
    for (const ranking of [byCloseness, byKeywords]) {
      ranking.forEach((candidate, i) =>
        sums.set(candidate, (sums.get(candidate) ?? 0) + 1 / (RRF_K + i + 1)),
      );
    }
    ranked = [...sums]
      .map(([{ item }, sum]) => ({ ...item, score: Math.min(1, sum / (2 / (RRF_K + 1))) }))
      .sort((a, b) => b.score - a.score || newestFirst(a, b));
  }
  return ranked.slice(request.offset, request.offset + request.limit);
}

/** Columns holding `facts`, each stored as the search index stores it. */
function columnsOf(facts: readonly Fact[]): FactColumns {
  const columns = new FactColumns();
  for (const fact of facts) {
    const row = stored(fact);
    columns.put(factId(fact.namespace, fact.key), row, row.value);
  }
  return columns;
}

describe('memory search ranking', () => {
  it('answers exactly what sorting every fact answers, for every kind of search, offset and limit', () => {
    const facts = makeFacts(7, 400);
    const columns = columnsOf(facts);
    // Replace and remove some, so that slots and vector rows are reused.
    for (const fact of facts.slice(0, 40)) columns.remove(factId(fact.namespace, fact.key));
    for (const fact of facts.slice(40, 60)) {
      const row = stored(fact);
      columns.put(factId(fact.namespace, fact.key), row, row.value);
    }
    let kept = facts.slice(40);
    const next = random(11);
    const queryVector = () => Float32Array.from({ length: DIMS }, () => Math.round((next() * 2 - 1) * 4) / 4);
    const compareAll = () => {
      const slots = Int32Array.from(columns.slotOf.values());
      let compared = 0;
      for (const distance of ['cosine', 'dot', 'l2'] as const) {
        for (const [offset, limit] of [
          [0, 10],
          [0, 1],
          [5, 7],
          [0, 1000],
          [300, 50],
        ] as const) {
          const requests = [
            {},
            { text: 'tea' },
            { text: 'green cup sugar' },
            { text: 'nothing' },
            { vector: queryVector() },
            { vector: queryVector(), text: 'black milk' },
            { vector: queryVector(), text: 'pot' },
          ];
          for (const request of requests) {
            const got = rank(columns, slots, {
              words: request.text === undefined ? null : queryWords(request.text),
              vector: request.vector ?? null,
              distance,
              now: NOW,
              offset,
              limit,
            });
            expect(got).toEqual(reference(kept, { ...request, distance, offset, limit }));
            compared += got.length;
          }
        }
      }
      return compared;
    };
    expect(compareAll()).toBeGreaterThan(4000);
    // Words counted now: replacing and removing facts keeps the inverted lists right.
    for (const fact of kept.slice(0, 60)) columns.remove(factId(fact.namespace, fact.key));
    for (const fact of kept.slice(0, 30)) {
      const row = stored(fact);
      columns.put(factId(fact.namespace, fact.key), row, row.value);
    }
    kept = [...kept.slice(0, 30), ...kept.slice(60)];
    expect(compareAll()).toBeGreaterThan(4000);
    // Removed together (as a truncated read or a catch-up removes them): two namespaces' facts, whose
    // words every list shares, then some put back into the freed slots.
    const gone = kept.filter((fact) => fact.namespace === 'a/b' || fact.namespace === 'z');
    columns.removeAll(gone.map((fact) => factId(fact.namespace, fact.key)));
    for (const fact of gone.slice(0, 10)) {
      const row = stored(fact);
      columns.put(factId(fact.namespace, fact.key), row, row.value);
    }
    kept = [...kept.filter((fact) => !gone.includes(fact)), ...gone.slice(0, 10)];
    expect(gone.length).toBeGreaterThan(80);
    expect(compareAll()).toBeGreaterThan(2000);
    // Most removed: the columns are compacted (facts and vectors moved to the first slots and rows),
    // and facts put afterwards go on from there.
    const highWater = columns.size;
    const rest = kept.slice(50);
    columns.removeAll(rest.map((fact) => factId(fact.namespace, fact.key)));
    expect(columns.size).toBe(50);
    for (const fact of rest.slice(0, 20)) {
      const row = stored(fact);
      columns.put(factId(fact.namespace, fact.key), row, row.value);
    }
    kept = [...kept.slice(0, 50), ...rest.slice(0, 20)];
    expect(columns.size).toBeLessThan(highWater / 4);
    expect(compareAll()).toBeGreaterThan(1000);
  });

  it('scores the vectors of a block of several segments as the exhaustive ranking does', () => {
    // More vector rows than a segment holds, twice over; gaps (removed facts) so that the rows
    // scored four at a time meet a segment's end at every offset.
    const facts = makeFacts(5, 2600);
    const columns = columnsOf(facts);
    const removed = new Set(facts.filter((_, i) => i % 7 === 3 || (i > 1010 && i < 1030 && i % 3 === 0)));
    for (const fact of removed) columns.remove(factId(fact.namespace, fact.key));
    const kept = facts.filter((fact) => !removed.has(fact));
    expect([...columns.blocks.values()].some((block) => block.segments.length > 2)).toBe(true);
    const slots = Int32Array.from(columns.slotOf.values());
    const next = random(13);
    for (const distance of ['cosine', 'dot', 'l2'] as const) {
      for (const [offset, limit] of [
        [0, 10],
        [0, 3000],
      ] as const) {
        const vector = Float32Array.from({ length: DIMS }, () => Math.round((next() * 2 - 1) * 4) / 4);
        const got = rank(columns, slots, { words: null, vector, distance, now: NOW, offset, limit });
        expect(got).toEqual(reference(kept, { vector, distance, offset, limit }));
      }
    }
  });

  it('weighs the columns and vector blocks as allocated, and releases them once most facts are removed', () => {
    const columns = new FactColumns();
    const vectors = new Map([['text', new Float32Array(256).fill(0.5)]]);
    const ids: string[] = [];
    for (let i = 0; i < 2000; i++) {
      const fact = {
        namespace: 'w',
        key: `k${i}`,
        value: { text: 'x', n: i },
        vectors,
        updatedAt: 1,
        expiresAt: null,
      };
      const row = stored(fact);
      ids.push(factId(fact.namespace, fact.key));
      columns.put(ids[i] as string, row, row.value);
    }
    const blockBytes = () => [...columns.blocks.values()].reduce((sum, block) => sum + block.byteLength, 0);
    // 2,000 rows of 256 floats: 2 MB at least, all in the weight.
    expect(blockBytes()).toBeGreaterThan(2000 * 256 * 4);
    expect(columns.weight).toBeGreaterThan(blockBytes());
    // Half removed: the blocks keep their rows (reused by the next puts), and weigh as much.
    columns.removeAll(ids.slice(0, 1000));
    expect(blockBytes()).toBeGreaterThan(2000 * 256 * 4);
    expect(columns.weight).toBeGreaterThan(blockBytes());
    // All but 10 removed: compacted, the memory released and the weight down with it.
    columns.removeAll(ids.slice(1000, 1990));
    expect(columns.size).toBe(10);
    expect(blockBytes()).toBeLessThan(20 * 256 * 4);
    expect(columns.weight).toBeGreaterThan(blockBytes());
    expect(columns.weight).toBeLessThan(30_000);
    const near = rank(columns, Int32Array.from(columns.slotOf.values()), {
      words: null,
      vector: new Float32Array(256).fill(0.5),
      distance: 'cosine',
      now: NOW,
      offset: 0,
      limit: 100,
    });
    expect(near.map((item) => item.key).sort()).toEqual(Array.from({ length: 10 }, (_, i) => `k${1990 + i}`));
  });

  it('keeps the first ones of a total order in that order', () => {
    const next = random(3);
    const values = Array.from({ length: 500 }, () => Math.floor(next() * 50));
    const compare = (a: number, b: number) => (values[a] as number) - (values[b] as number) || a - b;
    const slots = values.map((_, i) => i);
    for (const count of [0, 1, 7, 499, 500, 600]) {
      expect(best(slots, count, compare)).toEqual([...slots].sort(compare).slice(0, count));
    }
  });
});
