import { IntegrityError } from '../protocol/errors';
import { compareNamespaces, type MemoryItem } from './facts';
import { wordBag } from './keywordSearch';
import type { StoredFact } from './memoryStore';
import { copyFloats, LITTLE_ENDIAN, packedLayout } from './vectors';

/**
 * The facts of one tenant as a search reads them, in columns rather than one object per fact
 * (docs/memory.md, "Search cache"): each fact has a slot, and each column an entry per slot.
 *
 * - Names, times and the ETag as they are; the value's JSON text (parsed only for the facts a
 *   search answers with, and for filters), not the parsed value.
 * - Vectors in blocks, one per dimension count: Float32Array segments of rows (a row per vector,
 *   its owner's slot beside it) and each row's squared norm, so that a search scores every vector
 *   in one tight loop per segment. Rows and slots freed by a removal are reused.
 * - Words: counted only when a search with text first needs them (the value parsed then), as
 *   sorted term ids (one dictionary per tenant) with their counts, and the number of words; and
 *   per term the slots holding it (inverted lists), so that a search visits only the facts that
 *   match a word of its text.
 *
 * Not safe to share across awaits: the search index changes a tenant's columns only within that
 * tenant's turn, and a search ranks within its turn too, with no await in between.
 */

/** A fact as a snapshot holds it (searchSnapshot.ts): its JSON text and its vectors' floats in `source`. */
export interface DecodedFact {
  readonly id: string;
  readonly namespace: string;
  readonly key: string;
  readonly etag: string;
  readonly createdAt: number;
  readonly updatedAt: number;
  readonly expiresAt: number | null;
  /** Bytes of the stored value (what a search's read bound counts). */
  readonly bytes: number;
  readonly json: string;
  /** Each vector's path and dimension count (its floats are the next row of its block). */
  readonly vectors: readonly { path: string; dims: number }[];
}

/** Rows of a full segment of a {@link VectorBlock} (a power of two: a row's segment is a shift away). */
export const SEGMENT_ROWS = 1024;
/** log2 of {@link SEGMENT_ROWS}: row `r` is in segment `r >> SEGMENT_SHIFT`. */
export const SEGMENT_SHIFT = Math.log2(SEGMENT_ROWS);

/**
 * The squared-norm-and-rows store of the vectors of one dimension count. The floats lie in
 * segments of {@link SEGMENT_ROWS} rows: row `r` is at `((r % SEGMENT_ROWS) * dims)` of segment
 * `r / SEGMENT_ROWS`. A block grows by a segment, never copying the rows it holds (one growing
 * array copied itself whole at each growth: garbage of twice the block's size while a large
 * tenant loads); only the first segment grows (by half) up to its full size, so that a small
 * tenant holds little. Capacity unused is under one segment.
 */
export class VectorBlock {
  /** The floats, {@link SEGMENT_ROWS} rows a segment (the first may be smaller while it is the only one). */
  segments: Float32Array[];
  /** Squared norm of each row (summed as {@link closeness} sums it), for cosine. */
  norms: Float64Array;
  /** The slot owning each row; -1 for a free row. */
  owner: Int32Array;
  /** Rows in use or freed (the high-water mark): scoring walks `0..rows`. */
  rows = 0;
  private readonly free: number[] = [];

  constructor(readonly dims: number) {
    this.segments = [new Float32Array(dims * 16)];
    this.norms = new Float64Array(16);
    this.owner = new Int32Array(16).fill(-1);
  }

  add(slot: number, plain: Buffer, at: number): number {
    let row = this.free.pop();
    if (row === undefined) {
      row = this.rows++;
      if (row >= this.owner.length) this.grow(row + 1);
    }
    copyFloats(plain, at, this.dims, this.segmentOf(row), this.offsetOf(row));
    return this.own(row, slot);
  }

  /**
   * A block holding `rows` rows copied from the float32s (little-endian) at `bytes`, none owned
   * yet: each {@link claim} takes the next one. Copied, not viewed: the block keeps none of the
   * buffer `bytes` lies in (a snapshot's, otherwise held whole as long as the block).
   */
  static filled(dims: number, bytes: Buffer, rows: number): VectorBlock {
    const block = new VectorBlock(dims);
    if (rows > 0) block.grow(rows);
    const rowBytes = dims * 4;
    for (let first = 0; first < rows; first += SEGMENT_ROWS) {
      const count = Math.min(SEGMENT_ROWS, rows - first);
      const segment = block.segmentOf(first);
      const from = bytes.subarray(first * rowBytes, (first + count) * rowBytes);
      if (LITTLE_ENDIAN) new Uint8Array(segment.buffer, segment.byteOffset, count * rowBytes).set(from);
      else for (let i = 0; i < count * dims; i++) segment[i] = from.readFloatLE(i * 4);
    }
    return block;
  }

  /** The segment holding `row`. */
  segmentOf(row: number): Float32Array {
    return this.segments[row >> SEGMENT_SHIFT] as Float32Array;
  }

  /** Where `row` starts in its segment. */
  offsetOf(row: number): number {
    return (row & (SEGMENT_ROWS - 1)) * this.dims;
  }

  /** The floats of `row` (a view of its segment, not a copy). */
  row(row: number): Float32Array {
    const at = this.offsetOf(row);
    return this.segmentOf(row).subarray(at, at + this.dims);
  }

  /** The next row of a {@link filled} block, owned by `slot`. */
  claim(slot: number): number {
    return this.own(this.rows++, slot);
  }

  /** Gives `row` (its floats in place) to `slot`, with the squared norm of its floats. */
  private own(row: number, slot: number): number {
    const data = this.segmentOf(row);
    const base = this.offsetOf(row);
    let norm = 0;
    for (let i = 0; i < this.dims; i++) {
      const v = data[base + i] as number;
      norm += v * v;
    }
    this.norms[row] = norm;
    this.owner[row] = slot;
    return row;
  }

  remove(row: number): void {
    this.owner[row] = -1;
    this.free.push(row);
  }

  /** Rows in use. */
  get used(): number {
    return this.rows - this.free.length;
  }

  /** Bytes of the block's arrays as allocated (their capacity, not only the rows in use). */
  get byteLength(): number {
    let bytes = this.norms.byteLength + this.owner.byteLength;
    for (const segment of this.segments) bytes += segment.byteLength;
    return bytes;
  }

  /**
   * A block of the rows in use only, in order, each owned by `slotOf(owner)`; `moved(old, new)` is
   * told each row's new place.
   */
  compacted(slotOf: (owner: number) => number, moved: (row: number, to: number) => void): VectorBlock {
    const block = new VectorBlock(this.dims);
    block.grow(this.used);
    for (let row = 0; row < this.rows; row++) {
      const owner = this.owner[row] as number;
      if (owner < 0) continue;
      const to = block.rows++;
      block.segmentOf(to).set(this.row(row), block.offsetOf(to));
      block.norms[to] = this.norms[row] as number;
      block.owner[to] = slotOf(owner);
      moved(row, to);
    }
    return block;
  }

  /** Room for at least `needed` rows: the first segment grown by half up to its full size, then whole segments. */
  private grow(needed: number): void {
    let capacity = this.owner.length;
    if (needed <= capacity) return;
    const first = this.segments[0] as Float32Array;
    if (this.segments.length === 1 && first.length < SEGMENT_ROWS * this.dims) {
      let rows = first.length / this.dims;
      while (rows < needed && rows < SEGMENT_ROWS)
        rows = Math.min(SEGMENT_ROWS, Math.max(rows + 1, Math.ceil(rows * 1.5)));
      const grown = new Float32Array(rows * this.dims);
      grown.set(first);
      this.segments[0] = grown;
      capacity = rows;
    }
    while (capacity < needed) {
      this.segments.push(new Float32Array(SEGMENT_ROWS * this.dims));
      capacity += SEGMENT_ROWS;
    }
    const norms = new Float64Array(capacity);
    norms.set(this.norms);
    this.norms = norms;
    const owner = new Int32Array(capacity).fill(-1);
    owner.set(this.owner);
    this.owner = owner;
  }
}

/** Estimated bytes of a fact beyond its strings and vectors (map entry, objects of its own). */
const SLOT_BYTES = 200;
/** Bytes per slot of capacity of the columns (6 float64 columns, 9 arrays of references). */
const CAPACITY_BYTES = 6 * 8 + 9 * 8;
/** Compacted when at least this many slots, and at most a quarter of them in use. */
const COMPACT_FROM = 64;

export class FactColumns {
  /** Fact id → slot. */
  readonly slotOf = new Map<string, number>();
  /** Slots in use or freed (the high-water mark). */
  size = 0;
  /** Estimated bytes of the facts held (their strings, words and entries), vector blocks aside. */
  private factWeight = 1024;
  /** Moves on every put and removal. */
  version = 0;
  /** Vector blocks by dimension count. */
  readonly blocks = new Map<number, VectorBlock>();

  ids: (string | undefined)[] = [];
  namespaces: string[] = [];
  keys: string[] = [];
  etags: string[] = [];
  json: string[] = [];
  fields: (readonly string[] | undefined)[] = [];
  private vectorRows: (readonly { dims: number; row: number }[] | undefined)[] = [];
  /** Sorted term ids and counts, interleaved; undefined until a search with text needs them. */
  private terms: (Uint32Array | undefined)[] = [];
  createdAt = new Float64Array(16);
  updatedAt = new Float64Array(16);
  /** Infinity: never expires. */
  expiresAt = new Float64Array(16);
  /** Bytes of the stored value (what a search's read bound counts). */
  bytes = new Float64Array(16);
  /** Words of key and value, repeats included (valid once the slot's terms are counted). */
  wordCount = new Float64Array(16);
  private weights = new Float64Array(16);
  private free: number[] = [];
  private readonly dictionary = new Map<string, number>();
  /** Per term id, the slots whose words are counted and hold it, and how often (inverted lists). */
  private readonly postings: number[][] = [];
  private readonly postingCounts: number[][] = [];
  /** Interned field-path lists, so facts with the same fields share one array. */
  private readonly fieldLists = new Map<string, readonly string[]>();

  /**
   * Estimated bytes held: the facts' strings, words and entries, and the columns and vector blocks
   * as allocated (a high-water mark left by removals weighs until compacted).
   */
  get weight(): number {
    let weight = this.factWeight + this.createdAt.length * CAPACITY_BYTES;
    for (const block of this.blocks.values()) weight += block.byteLength;
    return weight;
  }

  /**
   * Puts the stored fact (replacing the one of the same id), from its plaintext. Throws
   * IntegrityError when the plaintext is damaged.
   */
  put(id: string, fact: StoredFact, plain: Buffer): void {
    const layout = packedLayout(plain);
    if (layout === null) throw new IntegrityError('a stored fact is not JSON; it was damaged');
    this.place(id, fact, fact.value.length, layout.json.toString('utf8'), layout.vectors, (block, slot, at) =>
      block.add(slot, plain, at),
    );
  }

  /**
   * Fills empty columns with the facts of a snapshot (searchSnapshot.ts): `blocks` holds, per
   * dimension count, the float32s of every vector of that count in the facts' order (one copy per
   * block, not one per vector), and the columns are allocated at their size at once.
   */
  restore(facts: readonly DecodedFact[], blocks: ReadonlyMap<number, { bytes: Buffer; rows: number }>): void {
    if (this.size !== 0 || this.blocks.size !== 0) throw new Error('restore fills empty columns only');
    let capacity = 16;
    while (capacity < facts.length) capacity *= 2;
    this.grow(capacity);
    for (const [dims, { bytes, rows }] of blocks)
      this.blocks.set(dims, VectorBlock.filled(dims, bytes, rows));
    for (const fact of facts) {
      this.place(fact.id, fact, fact.bytes, fact.json, fact.vectors, (block, slot) => block.claim(slot));
    }
  }

  /**
   * The vectors of a slot in the order they were put, each with its path (views of the block, not
   * copies); null when two of its vectors share a path (a snapshot could not tell them apart).
   */
  vectorsOf(slot: number): { path: string; floats: Float32Array }[] | null {
    const rows = this.vectorRows[slot] ?? [];
    const fields = this.fields[slot] ?? [];
    if (rows.length !== fields.length) return null;
    return rows.map(({ dims, row }, i) => {
      const block = this.blocks.get(dims) as VectorBlock;
      return { path: fields[i] as string, floats: block.row(row) };
    });
  }

  private place<V extends { readonly path: string; readonly dims: number; readonly at?: number }>(
    id: string,
    fact: Pick<StoredFact, 'namespace' | 'key' | 'etag' | 'createdAt' | 'updatedAt' | 'expiresAt'>,
    bytes: number,
    json: string,
    vectors: readonly V[],
    add: (block: VectorBlock, slot: number, at: number) => number,
  ): void {
    this.remove(id);
    this.version++;
    let slot = this.free.pop();
    if (slot === undefined) {
      slot = this.size++;
      if (slot >= this.createdAt.length) this.grow(Math.ceil(this.createdAt.length * 1.5));
    }
    this.slotOf.set(id, slot);
    this.ids[slot] = id;
    this.namespaces[slot] = fact.namespace;
    this.keys[slot] = fact.key;
    this.etags[slot] = fact.etag;
    this.json[slot] = json;
    this.createdAt[slot] = fact.createdAt;
    this.updatedAt[slot] = fact.updatedAt;
    this.expiresAt[slot] = fact.expiresAt ?? Infinity;
    this.bytes[slot] = bytes;
    this.terms[slot] = undefined;
    let weight =
      SLOT_BYTES + json.length * 2 + (fact.namespace.length + fact.key.length + fact.etag.length) * 2;
    if (vectors.length === 0) {
      this.fields[slot] = undefined;
      this.vectorRows[slot] = undefined;
    } else {
      const paths = vectors.map((vector) => vector.path);
      const name = JSON.stringify(paths);
      let fields = this.fieldLists.get(name);
      if (fields === undefined) {
        fields = [...new Set(paths)];
        this.fieldLists.set(name, fields);
        weight += name.length * 4;
      }
      this.fields[slot] = fields;
      const rows: { dims: number; row: number }[] = [];
      for (const { at, dims } of vectors) {
        let block = this.blocks.get(dims);
        if (block === undefined) {
          block = new VectorBlock(dims);
          this.blocks.set(dims, block);
        }
        // The floats and the norm weigh with the block, as allocated.
        rows.push({ dims, row: add(block, slot, at ?? 0) });
      }
      this.vectorRows[slot] = rows;
    }
    this.weights[slot] = weight;
    this.factWeight += weight;
  }

  remove(id: string): void {
    if (this.slotOf.has(id)) this.removeAll([id]);
  }

  /**
   * Removes the facts of `ids` (those not held are skipped). Each inverted list they are in is
   * filtered once, whatever the number removed from it: removing n facts that share a word costs
   * the list's length once, not n times.
   */
  removeAll(ids: Iterable<string>): void {
    const removed = new Set<number>();
    const touched = new Set<number>();
    for (const id of ids) {
      const slot = this.slotOf.get(id);
      if (slot === undefined) continue;
      this.version++;
      this.slotOf.delete(id);
      removed.add(slot);
      for (const { dims, row } of this.vectorRows[slot] ?? []) this.blocks.get(dims)?.remove(row);
      const terms = this.terms[slot];
      for (let i = 0; terms !== undefined && i < terms.length; i += 2) touched.add(terms[i] as number);
      this.ids[slot] = undefined;
      this.namespaces[slot] = '';
      this.keys[slot] = '';
      this.etags[slot] = '';
      this.json[slot] = '';
      this.fields[slot] = undefined;
      this.vectorRows[slot] = undefined;
      this.terms[slot] = undefined;
      this.factWeight -= this.weights[slot] as number;
      this.weights[slot] = 0;
    }
    for (const term of touched) {
      const slots = this.postings[term] as number[];
      const counts = this.postingCounts[term] as number[];
      let kept = 0;
      for (let i = 0; i < slots.length; i++) {
        const slot = slots[i] as number;
        if (removed.has(slot)) continue;
        slots[kept] = slot;
        counts[kept] = counts[i] as number;
        kept++;
      }
      slots.length = kept;
      counts.length = kept;
    }
    // Freed only now, so that no slot is reused while its entries are still listed.
    for (const slot of removed) this.free.push(slot);
    if (this.size >= COMPACT_FROM && this.slotOf.size * 4 <= this.size) this.compact();
  }

  /**
   * Moves the facts held to the first slots (and their vectors to the first rows of smaller
   * blocks), so that the memory a large removal freed is released rather than kept as free slots.
   */
  compact(): void {
    this.version++;
    const slotOf = new Int32Array(this.size).fill(-1);
    let next = 0;
    for (let slot = 0; slot < this.size; slot++) if (this.ids[slot] !== undefined) slotOf[slot] = next++;
    const count = next;
    const to = (slot: number) => slotOf[slot] as number;
    const keep = <T>(column: T[], empty: T): T[] => {
      const kept = new Array<T>(count).fill(empty);
      for (let slot = 0; slot < this.size; slot++) if (to(slot) >= 0) kept[to(slot)] = column[slot] as T;
      return kept;
    };
    let capacity = 16;
    while (capacity < count) capacity *= 2;
    const keepFloats = (column: Float64Array): Float64Array<ArrayBuffer> => {
      const kept = new Float64Array(capacity);
      for (let slot = 0; slot < this.size; slot++) if (to(slot) >= 0) kept[to(slot)] = column[slot] as number;
      return kept;
    };
    // Vector rows first (they are found through the old slots' rows).
    for (const [dims, block] of [...this.blocks]) {
      if (block.used === 0) {
        this.blocks.delete(dims);
        continue;
      }
      const rowTo = new Map<number, number>();
      this.blocks.set(
        dims,
        block.compacted(to, (row, moved) => rowTo.set(row, moved)),
      );
      for (let slot = 0; slot < this.size; slot++) {
        const rows = this.vectorRows[slot];
        if (rows === undefined || to(slot) < 0) continue;
        this.vectorRows[slot] = rows.map((entry) =>
          entry.dims === dims ? { dims, row: rowTo.get(entry.row) as number } : entry,
        );
      }
    }
    this.ids = keep(this.ids, undefined);
    this.namespaces = keep(this.namespaces, '');
    this.keys = keep(this.keys, '');
    this.etags = keep(this.etags, '');
    this.json = keep(this.json, '');
    this.fields = keep(this.fields, undefined);
    this.vectorRows = keep(this.vectorRows, undefined);
    this.terms = keep(this.terms, undefined);
    this.createdAt = keepFloats(this.createdAt);
    this.updatedAt = keepFloats(this.updatedAt);
    this.expiresAt = keepFloats(this.expiresAt);
    this.bytes = keepFloats(this.bytes);
    this.wordCount = keepFloats(this.wordCount);
    this.weights = keepFloats(this.weights);
    for (const [id, slot] of this.slotOf) this.slotOf.set(id, to(slot));
    for (const slots of this.postings)
      for (let i = 0; i < slots.length; i++) slots[i] = to(slots[i] as number);
    this.free = [];
    this.size = count;
  }

  /** The value of a slot, parsed (IntegrityError when its JSON is damaged). */
  value(slot: number): unknown {
    try {
      return JSON.parse(this.json[slot] as string) as unknown;
    } catch {
      throw new IntegrityError('a stored fact is not JSON; it was damaged');
    }
  }

  /** The slot's fact as the API answers it. */
  item(slot: number, value: unknown = this.value(slot)): MemoryItem {
    const fields = this.fields[slot];
    const expiresAt = this.expiresAt[slot] as number;
    return {
      namespace: (this.namespaces[slot] as string).split('/'),
      key: this.keys[slot] as string,
      value,
      ...(fields === undefined ? {} : { vectorFields: [...fields] }),
      createdAt: this.createdAt[slot] as number,
      updatedAt: this.updatedAt[slot] as number,
      ...(expiresAt === Infinity ? {} : { expiresAt }),
      etag: this.etags[slot] as string,
    };
  }

  /** The term ids of `words` (those no fact has get -1: they match nothing). */
  termIds(words: readonly string[]): number[] {
    return words.map((word) => this.dictionary.get(word) ?? -1);
  }

  /**
   * The slots marked in `wanted` holding a term of `ids` (from {@link termIds}, after
   * {@link countWords} of those slots), each with its count of every term of `ids`.
   */
  matching(ids: readonly number[], wanted: Uint8Array): Map<number, number[]> {
    const found = new Map<number, number[]>();
    ids.forEach((id, j) => {
      if (id < 0) return;
      const slots = this.postings[id] ?? [];
      const counts = this.postingCounts[id] ?? [];
      for (let i = 0; i < slots.length; i++) {
        const slot = slots[i] as number;
        if (wanted[slot] !== 1) continue;
        let row = found.get(slot);
        if (row === undefined) {
          row = new Array<number>(ids.length).fill(0);
          found.set(slot, row);
        }
        row[j] = counts[i] as number;
      }
    });
    return found;
  }

  /** Counts the words of every slot of `slots` not counted yet (before {@link termIds}). */
  countWords(slots: Iterable<number>): void {
    for (const slot of slots) this.termsOf(slot);
  }

  private termsOf(slot: number): Uint32Array {
    const known = this.terms[slot];
    if (known !== undefined) return known;
    const bag = wordBag(this.keys[slot] as string, this.value(slot));
    const pairs: [number, number][] = [];
    for (const [word, count] of bag.counts) {
      let id = this.dictionary.get(word);
      if (id === undefined) {
        id = this.dictionary.size;
        this.dictionary.set(word, id);
        this.postings.push([]);
        this.postingCounts.push([]);
        this.factWeight += 64 + word.length * 2;
      }
      pairs.push([id, count]);
      (this.postings[id] as number[]).push(slot);
      (this.postingCounts[id] as number[]).push(count);
    }
    pairs.sort((a, b) => a[0] - b[0]);
    const terms = new Uint32Array(pairs.length * 2);
    pairs.forEach(([id, count], i) => {
      terms[i * 2] = id;
      terms[i * 2 + 1] = count;
    });
    this.terms[slot] = terms;
    this.wordCount[slot] = bag.length;
    // The terms, and their entries in the inverted lists.
    const weight = 96 + terms.byteLength * 3;
    this.weights[slot] = (this.weights[slot] as number) + weight;
    this.factWeight += weight;
    return terms;
  }

  /** Newer `updatedAt` first, then namespace (segment by segment), then key: the ties' order. */
  newestFirst(a: number, b: number): number {
    const byTime = (this.updatedAt[b] as number) - (this.updatedAt[a] as number);
    if (byTime !== 0) return byTime;
    const x = this.namespaces[a] as string;
    const y = this.namespaces[b] as string;
    if (x !== y) {
      const byNamespace = compareNamespaces(x.split('/'), y.split('/'));
      if (byNamespace !== 0) return byNamespace;
    }
    const k = this.keys[a] as string;
    const l = this.keys[b] as string;
    return k < l ? -1 : k > l ? 1 : 0;
  }

  private grow(capacity: number): void {
    const more = (array: Float64Array) => {
      const grown = new Float64Array(capacity);
      grown.set(array);
      return grown;
    };
    this.createdAt = more(this.createdAt);
    this.updatedAt = more(this.updatedAt);
    this.expiresAt = more(this.expiresAt);
    this.bytes = more(this.bytes);
    this.wordCount = more(this.wordCount);
    this.weights = more(this.weights);
  }
}
