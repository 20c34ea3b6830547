import type { Distance } from '../protocol/memory';
import { type FactColumns, SEGMENT_SHIFT } from './factColumns';
import type { ScoredItem } from './facts';
import { bm25Scores, type DocumentTerms } from './keywordSearch';
import { matchesFilter, type ValueFilter } from './valueFilter';
import { RRF_K, vectorScore } from './vectors';

/**
 * The ranking of a search (the rules are on `MemoryFacts.search`), over the facts of a tenant's
 * {@link FactColumns}: every fact is scored, but only the `offset + limit` best are ordered (a
 * bounded heap), and only those are made into answers (their values parsed). The result is the
 * one an exhaustive sort of every fact would give: every order used is total (ties end on
 * namespace and key), so a heap keeps exactly the first ones.
 */

export interface Ranking {
  /** The query's distinct words (keywordSearch.ts); null: no text. */
  readonly words: readonly string[] | null;
  readonly vector: Float32Array | null;
  readonly distance: Distance;
  readonly filter?: ValueFilter;
  /** Facts expiring at or before this are not results. */
  readonly now: number;
  readonly offset: number;
  readonly limit: number;
}

export function rank(columns: FactColumns, slots: Int32Array, ranking: Ranking): ScoredItem[] {
  const { words, vector, distance, offset, limit } = ranking;
  const wanted = offset + limit;
  // The facts searched: live, and passing the filter (whose parsed values are kept for answers).
  const values = new Map<number, unknown>();
  const live: number[] = [];
  for (const slot of slots) {
    if ((columns.expiresAt[slot] as number) <= ranking.now) continue;
    if (ranking.filter !== undefined) {
      const value = columns.value(slot);
      if (!matchesFilter(value, ranking.filter)) continue;
      values.set(slot, value);
    }
    live.push(slot);
  }
  const newest = (a: number, b: number) => columns.newestFirst(a, b);
  const answer = (chosen: readonly number[], score?: (slot: number) => number | undefined): ScoredItem[] =>
    chosen.slice(offset).map((slot) => {
      const item = columns.item(slot, values.has(slot) ? values.get(slot) : columns.value(slot));
      const scored = score?.(slot);
      return scored === undefined ? item : { ...item, score: scored };
    });

  if (words === null && vector === null) return answer(best(live, wanted, newest));

  const close = vector === null ? null : closeness(columns, live, vector, distance);
  const byCloseness = (a: number, b: number) =>
    (close?.value[b] as number) - (close?.value[a] as number) || newest(a, b);
  const vectorScoreOf = (slot: number) => vectorScore(close?.value[slot] as number, distance);

  if (words === null) {
    const near = live.filter((slot) => close?.has[slot] === 1);
    const first = best(near, wanted, byCloseness);
    const rest =
      first.length >= wanted
        ? []
        : best(
            live.filter((slot) => close?.has[slot] !== 1),
            wanted - first.length,
            newest,
          );
    // The facts without vectors come after, newest first and without a score.
    return answer([...first, ...rest], (slot) => (close?.has[slot] === 1 ? vectorScoreOf(slot) : undefined));
  }

  // Keyword scores: BM25 over every fact searched (each counts in the statistics).
  columns.countWords(live);
  const ids = columns.termIds(words);
  const searched = new Uint8Array(columns.size);
  let totalLength = 0;
  for (const slot of live) {
    searched[slot] = 1;
    totalLength += columns.wordCount[slot] as number;
  }
  const matched: number[] = [];
  const terms: DocumentTerms[] = [];
  for (const [slot, counts] of columns.matching(ids, searched)) {
    matched.push(slot);
    terms.push({ length: columns.wordCount[slot] as number, counts });
  }
  const scores = bm25Scores(
    terms,
    live.length,
    live.length === 0 ? 0 : totalLength / live.length,
    words.length,
  );
  const keyword = new Float64Array(columns.size);
  matched.forEach((slot, i) => (keyword[slot] = scores[i] ?? 0));
  const byKeywords = (a: number, b: number) =>
    (keyword[b] as number) - (keyword[a] as number) || newest(a, b);

  if (close === null) return answer(best(matched, wanted, byKeywords), (slot) => keyword[slot]);

  // Reciprocal rank fusion of the vector ranking and the keyword ranking. A fact outside the
  // first `wanted` by vector and matching no word scores less than each of those: the answer lies
  // among those and the facts matching a word, whose ranks in both rankings are worked out.
  const near = live.filter((slot) => close.has[slot] === 1);
  const vectorRank = new Map<number, number>();
  best(near, wanted, byCloseness).forEach((slot, i) => vectorRank.set(slot, i + 1));
  const keywordOrder = [...matched].sort(byKeywords);
  const keywordRank = new Map<number, number>();
  keywordOrder.forEach((slot, i) => keywordRank.set(slot, i + 1));
  // The vector rank of each matching fact with vectors: 1 + the facts with vectors before it.
  const matchedNear = matched.filter((slot) => close.has[slot] === 1).sort(byCloseness);
  const before = new Array<number>(matchedNear.length + 1).fill(0);
  for (const slot of near) {
    // The first matching fact `slot` comes before (binary search over their vector order).
    let low = 0;
    let high = matchedNear.length;
    while (low < high) {
      const middle = (low + high) >> 1;
      if (byCloseness(slot, matchedNear[middle] as number) < 0) high = middle;
      else low = middle + 1;
    }
    before[low] = (before[low] as number) + 1;
  }
  let ahead = 0;
  matchedNear.forEach((slot, i) => {
    ahead += before[i] as number;
    vectorRank.set(slot, ahead + 1);
  });
  const top = 2 / (RRF_K + 1);
  const fused = new Map<number, number>();
  for (const slot of new Set([...vectorRank.keys(), ...matched])) {
    let sum = 0;
    const byVector = vectorRank.get(slot);
    if (byVector !== undefined) sum += 1 / (RRF_K + byVector);
    const byWords = keywordRank.get(slot);
    if (byWords !== undefined) sum += 1 / (RRF_K + byWords);
    fused.set(slot, Math.min(1, sum / top));
  }
  const score = (slot: number) => fused.get(slot) as number;
  return answer(
    best([...fused.keys()], wanted, (a, b) => score(b) - score(a) || newest(a, b)),
    score,
  );
}

/**
 * How close the closest vector of each fact of `live` (of the query's length) is to `query`:
 * `value[slot]`, set where `has[slot]` is 1. One pass over the block of that length.
 */
function closeness(
  columns: FactColumns,
  live: readonly number[],
  query: Float32Array,
  distance: Distance,
): { value: Float64Array; has: Uint8Array } {
  const value = new Float64Array(columns.size);
  const has = new Uint8Array(columns.size);
  const block = columns.blocks.get(query.length);
  if (block === undefined) return { value, has };
  const wanted = new Uint8Array(columns.size);
  for (const slot of live) wanted[slot] = 1;
  const { norms, owner, dims } = block;
  // The query as float64 (each number exactly the float32 it was): no conversion in the loop.
  const q = Float64Array.from(query);
  let qq = 0;
  for (let i = 0; i < dims; i++) qq += (q[i] as number) * (q[i] as number);
  const rows: number[] = [];
  for (let row = 0; row < block.rows; row++) {
    const slot = owner[row] as number;
    if (slot >= 0 && wanted[slot] === 1) rows.push(row);
  }
  const sums = new Float64Array(4);
  const take = (row: number, sum: number) => {
    const slot = owner[row] as number;
    let close: number;
    if (distance === 'l2') close = -Math.sqrt(sum);
    else if (distance === 'dot') close = sum;
    else {
      const vv = norms[row] as number;
      close = qq > 0 && vv > 0 ? sum / Math.sqrt(qq * vv) : 0;
    }
    if (has[slot] === 0 || close > (value[slot] as number)) {
      value[slot] = close;
      has[slot] = 1;
    }
  };
  // Four rows at a time (each query number read once for the four), each summed in index order;
  // the four from one segment of the block (rows are in order, so a segment's rows are together).
  for (let at = 0; at < rows.length;) {
    const first = rows[at] as number;
    const segment = first >> SEGMENT_SHIFT;
    let count = 1;
    while (count < 4 && at + count < rows.length && (rows[at + count] as number) >> SEGMENT_SHIFT === segment)
      count++;
    const data = block.segmentOf(first);
    const b0 = block.offsetOf(first);
    const b1 = count > 1 ? block.offsetOf(rows[at + 1] as number) : b0;
    const b2 = count > 2 ? block.offsetOf(rows[at + 2] as number) : b0;
    const b3 = count > 3 ? block.offsetOf(rows[at + 3] as number) : b0;
    if (distance === 'l2') squaredDistances(q, data, dims, b0, b1, b2, b3, sums);
    else dotProducts(q, data, dims, b0, b1, b2, b3, sums);
    for (let k = 0; k < count; k++) take(rows[at + k] as number, sums[k] as number);
    at += count;
  }
  return { value, has };
}

/** The dot products of `q` with the four vectors at `b0`..`b3` of `data`, into `sums`. */
function dotProducts(
  q: Float64Array,
  data: Float32Array,
  dims: number,
  b0: number,
  b1: number,
  b2: number,
  b3: number,
  sums: Float64Array,
): void {
  let d0 = 0;
  let d1 = 0;
  let d2 = 0;
  let d3 = 0;
  for (let i = 0; i < dims; i++) {
    const x = q[i] as number;
    d0 += x * (data[b0 + i] as number);
    d1 += x * (data[b1 + i] as number);
    d2 += x * (data[b2 + i] as number);
    d3 += x * (data[b3 + i] as number);
  }
  sums[0] = d0;
  sums[1] = d1;
  sums[2] = d2;
  sums[3] = d3;
}

/** The squared Euclidean distances of `q` to the four vectors at `b0`..`b3` of `data`, into `sums`. */
function squaredDistances(
  q: Float64Array,
  data: Float32Array,
  dims: number,
  b0: number,
  b1: number,
  b2: number,
  b3: number,
  sums: Float64Array,
): void {
  let s0 = 0;
  let s1 = 0;
  let s2 = 0;
  let s3 = 0;
  for (let i = 0; i < dims; i++) {
    const x = q[i] as number;
    const e0 = x - (data[b0 + i] as number);
    const e1 = x - (data[b1 + i] as number);
    const e2 = x - (data[b2 + i] as number);
    const e3 = x - (data[b3 + i] as number);
    s0 += e0 * e0;
    s1 += e1 * e1;
    s2 += e2 * e2;
    s3 += e3 * e3;
  }
  sums[0] = s0;
  sums[1] = s1;
  sums[2] = s2;
  sums[3] = s3;
}

/**
 * The first `count` of `slots` in the order `compare` (a total order), in that order: a heap of
 * the best so far, whose root is the worst of them.
 */
export function best(
  slots: readonly number[],
  count: number,
  compare: (a: number, b: number) => number,
): number[] {
  if (count <= 0) return [];
  if (slots.length <= count) return [...slots].sort(compare);
  const heap: number[] = [];
  const swap = (i: number, j: number) => {
    const t = heap[i] as number;
    heap[i] = heap[j] as number;
    heap[j] = t;
  };
  for (const slot of slots) {
    if (heap.length < count) {
      heap.push(slot);
      for (let i = heap.length - 1; i > 0;) {
        const parent = (i - 1) >> 1;
        if (compare(heap[i] as number, heap[parent] as number) <= 0) break;
        swap(i, parent);
        i = parent;
      }
    } else if (compare(slot, heap[0] as number) < 0) {
      heap[0] = slot;
      for (let i = 0; ;) {
        const left = 2 * i + 1;
        const right = left + 1;
        let worst = i;
        if (left < heap.length && compare(heap[left] as number, heap[worst] as number) > 0) worst = left;
        if (right < heap.length && compare(heap[right] as number, heap[worst] as number) > 0) worst = right;
        if (worst === i) break;
        swap(i, worst);
        i = worst;
      }
    }
  }
  return heap.sort(compare);
}
