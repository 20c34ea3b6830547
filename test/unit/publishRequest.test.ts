import { createHash } from 'node:crypto';

import { describe, expect, it } from 'vitest';

import { publishRequestSchema } from '../../shared/protocol/archive/manifest';

const file = (size: number, sha256: string) => ({ path: 'empty.txt', generation: 'g1', size, sha256 });

describe('a checkpoint publish request', () => {
  it('takes a file of size 0 only with the SHA-256 of no bytes (no object holds it, so nothing else checks it)', () => {
    const empty = createHash('sha256').digest('hex');
    expect(publishRequestSchema.safeParse({ checkpointId: 'c1', files: [file(0, empty)] }).success).toBe(
      true,
    );
    expect(
      publishRequestSchema.safeParse({ checkpointId: 'c1', files: [file(0, empty.toUpperCase())] }).success,
    ).toBe(true);
    const wrong = publishRequestSchema.safeParse({ checkpointId: 'c1', files: [file(0, 'a'.repeat(64))] });
    expect(wrong.success).toBe(false);
    expect(wrong.error?.issues[0]?.path).toEqual(['files', 0, 'sha256']);
    expect(
      publishRequestSchema.safeParse({ checkpointId: 'c1', files: [file(1, 'a'.repeat(64))] }).success,
    ).toBe(true);
  });
});
