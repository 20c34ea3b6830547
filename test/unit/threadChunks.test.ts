import { createHash } from 'node:crypto';

import { describe, expect, it } from 'vitest';

import {
  assemble,
  AVERAGE_CHUNK,
  type ChunkRef,
  cut,
  FANOUT,
  MAX_CHUNK,
  MAX_SEGMENTS,
  MIN_CHUNK,
  PackBuilder,
  planValue,
  type Segment,
  TAIL_CHUNK,
} from '../../shared/threads/chunks';
import { namespaceSegment } from '../../shared/threads/identifiers';
import { keysOf, parseDataKey } from '../../shared/threads/layout';
import { kindOfThreadKey } from '../../shared/threads/sealedThreadSpace';

/** Deterministic bytes that look like text (a seeded SHA-256 stream). */
function noise(length: number, seed: string): Buffer {
  const parts: Buffer[] = [];
  for (let i = 0; parts.length * 32 < length; i++) {
    parts.push(createHash('sha256').update(`${seed}/${i}`).digest());
  }
  return Buffer.concat(parts).subarray(0, length);
}

const KEY = Buffer.alloc(32, 7);

/** A conversation stored put after put, each appending one message to a JSON list. */
class Conversation {
  readonly packs = new Map<string, Buffer>();
  parent: { segments: Segment[]; chunks: ChunkRef[] } | undefined;
  messages: string[] = [];
  put = 0;

  value(): Buffer {
    return Buffer.from(`json\n${JSON.stringify(this.messages)}`);
  }

  store(value: Buffer, maxPack?: number): { added: number; segments: Segment[] } {
    const producer = `c${String(this.put++).padStart(5, '0')}`;
    const pack = new PackBuilder();
    const planned = planValue(
      value,
      KEY,
      this.parent,
      producer,
      pack,
      maxPack === undefined ? {} : { maxPack },
    );
    if (planned === null) throw new Error(`no plan within a pack of ${maxPack} bytes`);
    this.packs.set(producer, pack.bytes());
    this.parent = planned;
    return { added: pack.size, segments: planned.segments };
  }

  read(segments: readonly Segment[]): Buffer {
    return assemble(segments, (producer) => this.packs.get(producer) as Buffer, 'test');
  }
}

describe('values stored by what they add (chunks.ts)', () => {
  it('cuts at content-defined boundaries within the limits, the same wherever the bytes start', () => {
    const bytes = noise(400_000, 'cut');
    const chunks = cut(bytes, 0);
    const lengths = chunks.map(([start, end]) => end - start);
    expect(chunks[0]?.[0]).toBe(0);
    expect(chunks.at(-1)?.[1]).toBe(bytes.length);
    chunks.slice(1).forEach(([start], index) => expect(start).toBe(chunks[index]?.[1]));
    // Every chunk but the last two (the cut's tail and its final bytes) is within 1-16 KiB.
    for (const length of lengths.slice(0, -2)) {
      expect(length).toBeGreaterThanOrEqual(MIN_CHUNK);
      expect(length).toBeLessThanOrEqual(MAX_CHUNK);
    }
    expect(lengths.at(-1)).toBe(TAIL_CHUNK);
    const mean = bytes.length / chunks.length;
    expect(mean).toBeGreaterThan(AVERAGE_CHUNK / 2);
    expect(mean).toBeLessThan(AVERAGE_CHUNK * 2);
    // Bytes put in front shift the chunks, yet the boundaries come back: content-defined.
    const shifted = cut(Buffer.concat([noise(777, 'front'), bytes]), 0).map(([, end]) => end - 777);
    const ends = new Set(chunks.map(([, end]) => end));
    expect(shifted.filter((end) => ends.has(end)).length).toBeGreaterThan(chunks.length * 0.9);
  });

  it('stores an append as about what it adds, and reads every value back byte for byte', () => {
    const conversation = new Conversation();
    const added: number[] = [];
    const values: [Buffer, Segment[]][] = [];
    for (let turn = 0; turn < 400; turn++) {
      conversation.messages.push(noise(200, `m${turn}`).toString('base64'));
      const value = conversation.value();
      const { added: bytes, segments } = conversation.store(value);
      added.push(bytes);
      values.push([value, segments]);
      expect(segments.length).toBeLessThanOrEqual(3 * (FANOUT - 1) + 1);
    }
    for (const [value, segments] of values) expect(conversation.read(segments).equals(value)).toBe(true);
    const total = added.reduce((a, b) => a + b, 0);
    const final = values.at(-1)?.[0].length ?? 0;
    // Each byte is written once, and again at each tier merge: about log_16(400) + 1 times.
    expect(total).toBeLessThan(3.5 * final);
    // Puts that merge nothing add the message and the tail of the list, not a chunk.
    expect(Math.min(...added.slice(1))).toBeLessThan(300 + 2 * TAIL_CHUNK);
  });

  it('an edit or a removal in the middle costs about the chunks it touches', () => {
    const conversation = new Conversation();
    conversation.messages = Array.from({ length: 300 }, (_, i) => noise(300, `m${i}`).toString('base64'));
    const first = conversation.value();
    expect(conversation.store(first).added).toBe(first.length);
    conversation.messages[150] = noise(300, 'edited').toString('base64');
    const edited = conversation.value();
    const { added, segments } = conversation.store(edited);
    expect(added).toBeLessThan(3 * MAX_CHUNK);
    expect(conversation.read(segments).equals(edited)).toBe(true);
    conversation.messages.splice(100, 1);
    const removed = conversation.value();
    const after = conversation.store(removed);
    expect(after.added).toBeLessThan(3 * MAX_CHUNK);
    expect(conversation.read(after.segments).equals(removed)).toBe(true);
  });

  it('never spans more than the segment bound, whatever the edits', () => {
    const conversation = new Conversation();
    conversation.messages = Array.from({ length: 200 }, (_, i) => noise(300, `m${i}`).toString('base64'));
    for (let round = 0; round < 120; round++) {
      conversation.messages[(round * 37) % 200] = noise(300, `e${round}`).toString('base64');
      const value = conversation.value();
      const { segments } = conversation.store(value);
      expect(segments.length).toBeLessThanOrEqual(MAX_SEGMENTS);
      expect(conversation.read(segments).equals(value)).toBe(true);
    }
  });

  it('with its pack bounded, makes the merges that fit and keeps within the segment bound, or has no plan', () => {
    // A large first message: a merge that writes it again passes the bound; merges of what the
    // appends add since stay within it.
    const conversation = new Conversation();
    conversation.messages = [noise(30 * 1024, 'large').toString('hex')];
    conversation.store(conversation.value());
    let most = 0;
    for (let i = 0; i < 200; i++) {
      conversation.messages.push(noise(50, `small${i}`).toString('hex'));
      const value = conversation.value();
      const { added, segments } = conversation.store(value, 8 * 1024);
      expect(added).toBeLessThanOrEqual(8 * 1024);
      expect(conversation.read(segments).equals(value)).toBe(true);
      most = Math.max(most, segments.length);
    }
    // Without the merges, one more segment a put; with them, at most FANOUT - 1 a tier past the first.
    expect(most).toBeLessThanOrEqual(1 + 3 * (FANOUT - 1));

    // No room for any merge: appends until the value would span more than the bound, then no plan.
    const tight = new Conversation();
    tight.messages = [noise(30 * 1024, 'large').toString('hex')];
    tight.store(tight.value());
    let planned = 0;
    while (planned < 100) {
      tight.messages.push(noise(50, `tight${planned}`).toString('hex'));
      const pack = new PackBuilder();
      const plan = planValue(tight.value(), KEY, tight.parent, `t${planned}`, pack, { maxPack: 512 });
      if (plan === null) break;
      expect(plan.segments.length).toBeLessThanOrEqual(MAX_SEGMENTS);
      tight.parent = plan;
      planned += 1;
    }
    expect(planned).toBeLessThan(100);
    expect(tight.parent?.segments).toHaveLength(MAX_SEGMENTS);
  });

  it('takes bytes as opaque: any byte values, a value shorter than a chunk, an empty one', () => {
    for (const value of [Buffer.alloc(0), Buffer.from([0, 10, 255]), noise(50_000, 'x')]) {
      const conversation = new Conversation();
      const { segments } = conversation.store(value);
      expect(conversation.read(segments).equals(value)).toBe(true);
    }
  });

  it('keeps a pack apart under a key of its own kind, which sealing and rewrap know', () => {
    const key = keysOf({ threadId: 't', incarnation: 'i' }).pack('ns', 'c1');
    expect(parseDataKey(key)?.item).toEqual({
      kind: 'pack',
      nsSegment: namespaceSegment('ns'),
      checkpointId: 'c1',
    });
    expect(kindOfThreadKey(key)).toBe('thread.pack');
  });
});
