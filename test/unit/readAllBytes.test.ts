import { PassThrough } from 'node:stream';

import { describe, expect, it } from 'vitest';

import { ownsItsMemory, readAllBytes } from '../../shared/protocol/streams';

/**
 * With a declared length, a body is copied into one buffer as its chunks arrive: no chunk is held
 * until the end (a request body of 1 MB would otherwise weigh its chunks and their concatenation
 * at once). Shown by reusing each chunk's memory once it was handed on, as a socket may.
 */

function send(chunks: readonly Buffer[]): PassThrough {
  const stream = new PassThrough();
  const scratch = Buffer.alloc(Math.max(...chunks.map((chunk) => chunk.length)));
  setImmediate(() => {
    for (const chunk of chunks) {
      const view = scratch.subarray(0, chunk.length);
      chunk.copy(view);
      stream.write(view);
    }
    stream.end();
  });
  return stream;
}

describe('readAllBytes', () => {
  const parts = [Buffer.from('first part;'), Buffer.from('second part;'), Buffer.from('third')];
  const whole = Buffer.concat(parts);

  it('with the declared length, copies each chunk as it arrives into a buffer of its own', async () => {
    const bytes = await readAllBytes(send(parts), whole.length);
    expect(bytes.toString()).toBe(whole.toString());
    expect(ownsItsMemory(bytes)).toBe(true);
  });

  it('keeps every byte when more arrive than declared, and the part that came when fewer do', async () => {
    expect((await readAllBytes(send(parts), 15)).toString()).toBe(whole.toString());
    expect((await readAllBytes(send(parts), whole.length + 10)).toString()).toBe(whole.toString());
  });

  it('answers a body that came whole in one chunk as that chunk (no copy)', async () => {
    const stream = new PassThrough();
    const only = Buffer.from('all of it');
    setImmediate(() => stream.end(only));
    expect(await readAllBytes(stream, only.length)).toBe(only);
  });

  it('without a length, collects the chunks as they are', async () => {
    const stream = new PassThrough();
    setImmediate(() => {
      for (const part of parts) stream.write(part);
      stream.end();
    });
    expect((await readAllBytes(stream)).toString()).toBe(whole.toString());
  });
});
