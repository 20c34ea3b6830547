import { finished } from 'node:stream';

/**
 * Every byte of a node stream, in one Buffer (the chunk itself when there is only one). Listens for
 * `data` rather than iterating asynchronously (a promise per chunk); `finished` turns a stream cut
 * short into an error instead of a wait that never ends.
 *
 * With `length` (a declared Content-Length), the bytes are copied as they arrive into one buffer
 * of that size, so that no chunk is held until the end: a body of 1 MB otherwise weighs twice
 * (its chunks, then their concatenation) while it is read. More bytes than declared are kept all
 * the same (collected as without a length), fewer give the part that came.
 */
export function readAllBytes(stream: NodeJS.ReadableStream | undefined, length?: number): Promise<Buffer> {
  if (stream === undefined) return Promise.resolve(Buffer.alloc(0));
  const sized = length !== undefined && Number.isSafeInteger(length) && length > 0;
  return new Promise((resolve, reject) => {
    let chunks: Buffer[] = [];
    let filled: Buffer | undefined;
    let at = 0;
    stream.on('data', (data: Buffer | string) => {
      const chunk = typeof data === 'string' ? Buffer.from(data) : data;
      // A body that comes whole in its first chunk is that chunk, as without a length.
      if (sized && filled === undefined && chunks.length === 0 && chunk.length < length) {
        filled = Buffer.allocUnsafeSlow(length);
      }
      if (filled !== undefined) {
        if (at + chunk.length <= filled.length) {
          at += chunk.copy(filled, at);
          return;
        }
        // Longer than declared: collected from here on, copied as the declared part was.
        chunks = [filled.subarray(0, at)];
        filled = undefined;
      }
      chunks.push(sized && chunks.length > 0 ? Buffer.from(chunk) : chunk);
    });
    finished(stream, (error) => {
      if (error) reject(error);
      else if (filled !== undefined) resolve(at === filled.length ? filled : filled.subarray(0, at));
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
