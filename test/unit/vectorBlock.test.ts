import { describe, expect, it } from 'vitest';

import { VectorBlock } from '../../shared/memory/factColumns';

/**
 * A block filled from a snapshot uses the snapshot's aligned floats where they lie; rows added
 * after it must land in memory of the block's own, never in the bytes that follow the block in
 * the snapshot's buffer.
 */

function floats(values: readonly number[]): Buffer {
  const bytes = Buffer.alloc(values.length * 4);
  values.forEach((v, i) => bytes.writeFloatLE(v, i * 4));
  return bytes;
}

describe('VectorBlock.filled', () => {
  for (const rows of [2, 16, 20]) {
    it(`a row added to a block of ${rows} rows filled in place leaves the buffer after it alone`, () => {
      const dims = 3;
      const blockFloats = Array.from({ length: rows * dims }, (_, i) => i + 1);
      const after = [101, 102, 103, 104, 105, 106];
      const buffer = floats([...blockFloats, ...after]);
      const block = VectorBlock.filled(dims, buffer, rows);
      for (let slot = 0; slot < rows; slot++) block.claim(slot);

      const row = block.add(rows, floats([7, 8, 9]), 0);

      expect(row).toBe(rows);
      expect(Array.from(block.data.subarray(row * dims, (row + 1) * dims))).toEqual([7, 8, 9]);
      expect(block.norms[row]).toBe(49 + 64 + 81);
      expect(Array.from(block.data.subarray(0, dims))).toEqual([1, 2, 3]);
      const tail = buffer.subarray(rows * dims * 4);
      expect([0, 1, 2, 3, 4, 5].map((i) => tail.readFloatLE(i * 4))).toEqual(after);
    });
  }

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
