import { jsonStrings } from '../json';

/**
 * Keyword relevance of facts: BM25 over the words of a fact's key and of every string in its value,
 * computed in-process over the facts a search reads (so nothing derived from values is stored next
 * to them, which would defeat encrypting the values).
 *
 * Words are maximal runs of letters, combining marks and digits after Unicode NFKC normalisation
 * and lower-casing; `French`, `french,` and `FRENCH` are one word. Marks belong to the word they
 * are in (as in Unicode's word boundaries): without them, a word of a script that writes its vowels
 * as marks (Devanagari, Thai, Arabic with its vowel signs) would fall apart into its letters, and
 * `हिन्दी` would match `दिन`, which shares only two letters with it. A query word matches whole words only (no stems,
 * no prefixes). Scores are BM25 (k1 = 1.2, b = 0.75, idf = ln(1 + (N - df + 0.5) / (df + 0.5)))
 * divided by the largest sum the query's words could reach, so they lie in [0, 1): 0 means no
 * query word occurs (such facts are not results), and a fact matching more, and rarer, query words
 * more often scores higher.
 */

const K1 = 1.2;
const B = 0.75;
const WORD_SEPARATOR = /[^\p{L}\p{M}\p{N}]+/u;

export function words(text: string): string[] {
  return text
    .normalize('NFKC')
    .toLowerCase()
    .split(WORD_SEPARATOR)
    .filter((word) => word !== '');
}

/** The query's distinct words, in order of first appearance. */
export function queryWords(text: string): string[] {
  return [...new Set(words(text))];
}

/** What BM25 needs of one document: its length in words and the counts of the query's words. */
export interface DocumentTerms {
  readonly length: number;
  /** Count of each query word, in the order of the query's words. */
  readonly counts: readonly number[];
}

/** The words of a fact (its key and its value's strings), counted: what a search keeps per fact. */
export interface WordBag {
  readonly counts: ReadonlyMap<string, number>;
  /** The number of words, repeats included. */
  readonly length: number;
}

export function wordBag(key: string, value: unknown): WordBag {
  const counts = new Map<string, number>();
  let length = 0;
  const add = (text: string) => {
    for (const word of words(text)) {
      length++;
      counts.set(word, (counts.get(word) ?? 0) + 1);
    }
  };
  add(key);
  // Without recursion: a stored value may be nested deeper than any body may be.
  for (const text of jsonStrings(value)) add(text);
  return { counts, length };
}

/** The terms of a fact's words for `query` (from {@link queryWords}). */
export function termsIn(bag: WordBag, query: readonly string[]): DocumentTerms {
  return { length: bag.length, counts: query.map((word) => bag.counts.get(word) ?? 0) };
}

/** The terms of a fact (its key and its value's strings) for `query` (from {@link queryWords}). */
export function documentTerms(key: string, value: unknown, query: readonly string[]): DocumentTerms {
  return termsIn(wordBag(key, value), query);
}

export function matchesAny(terms: DocumentTerms): boolean {
  return terms.counts.some((count) => count > 0);
}

/**
 * The normalised BM25 score of each document among `documents` (the collection the statistics
 * come from: every fact the search considered, matching or not, is counted in `total`).
 */
export function bm25Scores(
  documents: readonly DocumentTerms[],
  total: number,
  averageLength: number,
  queryLength: number,
): number[] {
  const documentFrequency = new Array<number>(queryLength).fill(0);
  for (const document of documents) {
    document.counts.forEach((count, i) => {
      if (count > 0) documentFrequency[i] = (documentFrequency[i] ?? 0) + 1;
    });
  }
  const idf = documentFrequency.map((df) => Math.log(1 + (total - df + 0.5) / (df + 0.5)));
  const ceiling = idf.reduce((sum, weight) => sum + weight * (K1 + 1), 0);
  const average = averageLength > 0 ? averageLength : 1;
  return documents.map((document) => {
    const norm = 1 - B + (B * document.length) / average;
    let score = 0;
    document.counts.forEach((count, i) => {
      if (count > 0) score += ((idf[i] ?? 0) * count * (K1 + 1)) / (count + K1 * norm);
    });
    return ceiling > 0 ? Math.min(1, score / ceiling) : 0;
  });
}
