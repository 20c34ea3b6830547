import { finished } from 'node:stream';

/**
 * Every byte of a node stream, in one Buffer (the chunk itself when there is only one). Listens for
 * `data` rather than iterating asynchronously (a promise per chunk); `finished` turns a stream cut
 * short into an error instead of a wait that never ends.
 */
export function readAllBytes(stream: NodeJS.ReadableStream | undefined): Promise<Buffer> {
  if (stream === undefined) return Promise.resolve(Buffer.alloc(0));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on('data', (chunk: Buffer | string) =>
      chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk),
    );
    finished(stream, (error) => {
      if (error) reject(error);
      else resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks));
    });
  });
}

/**
 * True when `bytes` fills its memory alone: keeping it keeps nothing else alive, and handing its
 * memory over hands over nothing else.
 */
export function ownsItsMemory(bytes: Buffer): bytes is Buffer<ArrayBuffer> {
  return (
    bytes.byteOffset === 0 &&
    bytes.byteLength === bytes.buffer.byteLength &&
    bytes.buffer instanceof ArrayBuffer
  );
}

/** `bytes` in memory of its own: `bytes` itself when it already is, else a copy. */
export function ownedBytes(bytes: Buffer): Buffer {
  return ownsItsMemory(bytes) ? bytes : copyOf(bytes);
}

/** A copy of `bytes` in memory of its own (not a slice of the shared pool of small buffers). */
export function copyOf(bytes: Buffer): Buffer {
  const copy = Buffer.allocUnsafeSlow(bytes.length);
  bytes.copy(copy);
  return copy;
}
