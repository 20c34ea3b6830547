import type http from 'node:http';

/**
 * Request bodies the local runtime does not read to the end: a function (or the runtime itself)
 * may answer before the body has arrived, as a 413 by `Content-Length` does. Closing the
 * connection then would reset it while the client is still sending, and a client that is still
 * writing its body never reads the answer. So the answer says `Connection: close` and the rest of
 * the body is read and dropped, up to {@link DRAIN_LIMIT}; the connection closes once the body has
 * arrived (past the bound it is cut, as a client sending that much after its answer is no client
 * waiting for an answer).
 */
export const DRAIN_LIMIT = 64 * 1024 * 1024;

/** A request body as a web stream that a reader may cancel without cutting the connection. */
export class StreamedBody {
  readonly stream: ReadableStream<Uint8Array>;
  private abandoned = false;

  constructor(private readonly req: http.IncomingMessage) {
    const stop = (): boolean => this.abandoned;
    this.stream = new ReadableStream<Uint8Array>(
      {
        start(controller) {
          req.on('data', (chunk: Buffer) => {
            if (stop()) return;
            controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.length));
            if ((controller.desiredSize ?? 0) <= 0) req.pause();
          });
          req.once('end', () => {
            if (!stop()) controller.close();
          });
          req.once('close', () => {
            if (!req.complete && !stop()) controller.error(new Error('the client went away'));
          });
          req.pause();
        },
        pull() {
          req.resume();
        },
        cancel: () => {
          // A reader that stops early (a body over its limit): the rest is drained once answered.
          this.abandoned = true;
        },
      },
      { highWaterMark: 64 * 1024, size: (chunk) => chunk.byteLength },
    );
  }

  /** Stops handing the body on (what still arrives is drained, never queued). */
  abandon(): void {
    this.abandoned = true;
  }
}

/**
 * The body, up to `limit` bytes; undefined when it is larger (by `Content-Length`, else as soon as
 * more has arrived), the rest left unread for {@link drainAfterAnswer}.
 */
export function readBodyUpTo(req: http.IncomingMessage, limit: number): Promise<Buffer | undefined> {
  const declared = Number(req.headers['content-length'] ?? NaN);
  if (declared > limit) return Promise.resolve(undefined);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        done();
        req.pause();
        resolve(undefined);
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      done();
      resolve(Buffer.concat(chunks));
    };
    const onError = (error: Error) => {
      done();
      reject(error);
    };
    const onClose = () => {
      if (req.complete) return;
      done();
      reject(new Error('the client went away'));
    };
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('error', onError);
    req.once('close', onClose);
  });
}

interface ClosingSocket {
  destroySoon(): void;
}

/**
 * Call before writing an answer to a request whose body may not have arrived whole: when it has
 * not, the answer says `Connection: close`, the rest of the body is read and dropped (up to
 * {@link DRAIN_LIMIT}, past it the connection is cut), and the connection closes once the body has
 * arrived and the answer is out, not while the client is still sending.
 */
export function drainAfterAnswer(req: http.IncomingMessage, res: http.ServerResponse): void {
  if (req.complete || req.destroyed) return;
  res.setHeader('connection', 'close');
  const socket = req.socket as typeof req.socket & ClosingSocket;
  const closeSoon = socket.destroySoon.bind(socket);
  let arrived = false;
  let answered = false;
  // The server closes a `Connection: close` connection as soon as the answer is out; it waits here
  // until the body has arrived too.
  socket.destroySoon = () => {
    answered = true;
    if (arrived) closeSoon();
  };
  let size = 0;
  req.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size > DRAIN_LIMIT) socket.destroy();
  });
  req.once('end', () => {
    arrived = true;
    if (answered) closeSoon();
  });
  req.resume();
}
