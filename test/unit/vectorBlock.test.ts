import { describe, expect, it } from 'vitest';

import { SEGMENT_ROWS, VectorBlock } from '../../shared/memory/factColumns';

/**
 * A block filled from a snapshot copies the snapshot's floats into segments of its own: rows added
 * after it never land in the bytes that follow the block in the snapshot's buffer, and the block
 * keeps none of that buffer. A block grows by whole segments, never copying the rows it holds.
 */

function floats(values: readonly number[]): Buffer {
  const bytes = Buffer.alloc(values.length * 4);
  values.forEach((v, i) => bytes.writeFloatLE(v, i * 4));
  return bytes;
}

describe('VectorBlock.filled', () => {
  for (const rows of [2, 16, 20, SEGMENT_ROWS, SEGMENT_ROWS + 3]) {
    it(`a row added to a block of ${rows} rows filled from a buffer leaves the buffer after it alone`, () => {
      const dims = 3;
      const blockFloats = Array.from({ length: rows * dims }, (_, i) => i + 1);
      const after = [101, 102, 103, 104, 105, 106];
      const buffer = floats([...blockFloats, ...after]);
      const block = VectorBlock.filled(dims, buffer, rows);
      for (let slot = 0; slot < rows; slot++) block.claim(slot);

      const row = block.add(rows, floats([7, 8, 9]), 0);

      expect(row).toBe(rows);
      expect(Array.from(block.row(row))).toEqual([7, 8, 9]);
      expect(block.norms[row]).toBe(49 + 64 + 81);
      expect(Array.from(block.row(0))).toEqual([1, 2, 3]);
      expect(Array.from(block.row(rows - 1))).toEqual(blockFloats.slice((rows - 1) * dims));
      const tail = buffer.subarray(rows * dims * 4);
      expect([0, 1, 2, 3, 4, 5].map((i) => tail.readFloatLE(i * 4))).toEqual(after);
    });
  }

  it('keeps none of the buffer it was filled from (a snapshot is not held by the block)', () => {
    const buffer = floats([1, 2, 3, 4, 5, 6]);
    const block = VectorBlock.filled(3, buffer, 2);
    block.claim(0);
    block.claim(1);
    for (const segment of block.segments) expect(segment.buffer).not.toBe(buffer.buffer);
    buffer.fill(0);
    expect(Array.from(block.row(1))).toEqual([4, 5, 6]);
  });

  it('a freed row of a filled block is used again with its new floats and norm', () => {
    const block = VectorBlock.filled(2, floats([1, 0, 0, 1]), 2);
    block.claim(0);
    block.claim(1);
    block.remove(0);
    const row = block.add(5, floats([3, 4]), 0);
    expect(row).toBe(0);
    expect(block.norms[0]).toBe(25);
    expect(block.owner[0]).toBe(5);
    expect(block.used).toBe(2);
  });
});

describe('VectorBlock growth', () => {
  it('grows by segments: rows once in a full segment stay in that same array as the block grows', () => {
    const dims = 2;
    const block = new VectorBlock(dims);
    const rows = SEGMENT_ROWS * 3 + 5;
    let firstFull: Float32Array | undefined;
    for (let slot = 0; slot < rows; slot++) {
      block.add(slot, floats([slot, -slot]), 0);
      if (slot === SEGMENT_ROWS - 1) firstFull = block.segments[0];
    }
    expect(block.segments[0]).toBe(firstFull);
    expect(block.segments).toHaveLength(4);
    for (const segment of block.segments) expect(segment.length).toBe(SEGMENT_ROWS * dims);
    for (const row of [0, SEGMENT_ROWS - 1, SEGMENT_ROWS, 2 * SEGMENT_ROWS + 7, rows - 1]) {
      expect(Array.from(block.row(row))).toEqual([row, -row]);
      expect(block.owner[row]).toBe(row);
      expect(block.norms[row]).toBe(2 * row * row);
    }
    expect(block.byteLength).toBe(4 * SEGMENT_ROWS * dims * 4 + 4 * SEGMENT_ROWS * (8 + 4));
  });

  it('a small block holds a small first segment only', () => {
    const block = new VectorBlock(1536);
    block.add(0, Buffer.alloc(1536 * 4), 0);
    expect(block.segments).toHaveLength(1);
    expect(block.byteLength).toBeLessThan(1536 * 4 * 32);
  });

  it('compacted keeps the rows in use, in order, across segments', () => {
    const block = new VectorBlock(1);
    const rows = SEGMENT_ROWS + 10;
    for (let slot = 0; slot < rows; slot++) block.add(slot, floats([slot]), 0);
    for (let row = 0; row < rows; row += 2) block.remove(row);
    const moves: [number, number][] = [];
    const compacted = block.compacted(
      (owner) => owner * 10,
      (row, to) => moves.push([row, to]),
    );
    expect(compacted.used).toBe(rows / 2);
    expect(compacted.segments).toHaveLength(1);
    for (const [row, to] of moves) {
      expect(Array.from(compacted.row(to))).toEqual([row]);
      expect(compacted.owner[to]).toBe(row * 10);
    }
  });
});
