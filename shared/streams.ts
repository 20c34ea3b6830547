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
