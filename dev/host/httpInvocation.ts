import type http from 'node:http';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';

import {
  HttpRequest,
  type HttpRequestInit,
  HttpResponse,
  type HttpResponseInit,
  type InvocationContext,
} from '@azure/functions';

import { readAllBytes } from '../../shared/protocol/streams';
import { BufferedRequest } from './bufferedRequest';
import { drainAfterAnswer, StreamedBody } from './requestBody';

type HttpFunction = (request: HttpRequest, context: InvocationContext) => Promise<unknown>;

/** Bodies with a declared length up to this are read before the function runs. */
const BUFFERED_BODY_LIMIT = 4 * 1024 * 1024;

/**
 * Calls one HTTP function with the request and writes its answer, as the host does with HTTP
 * streams enabled. Small bodies with a declared length are read up front (node streams are much
 * cheaper than web streams) and handed over as they are; anything else streams through the
 * library's own `nativeRequest` path, which keeps large bodies out of memory.
 */
export async function invokeHttpFunction(
  handler: HttpFunction,
  context: InvocationContext,
  params: Record<string, string>,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  method: string,
): Promise<void> {
  const hasBody = method !== 'GET' && method !== 'HEAD';
  const headers = new Headers();
  for (let index = 0; index + 1 < req.rawHeaders.length; index += 2) {
    headers.append(req.rawHeaders[index] ?? '', req.rawHeaders[index + 1] ?? '');
  }
  const url = `http://${req.headers.host ?? '127.0.0.1'}${req.url ?? '/'}`;
  const declared = Number(req.headers['content-length'] ?? NaN);
  let nativeRequest: Request | BufferedRequest;
  let streamedBody: StreamedBody | undefined;
  if (hasBody && declared <= BUFFERED_BODY_LIMIT) {
    nativeRequest = new BufferedRequest(url, method, headers, await readAllBytes(req, declared));
  } else {
    streamedBody = hasBody ? new StreamedBody(req) : undefined;
    nativeRequest = new Request(url, {
      method,
      headers,
      ...(streamedBody === undefined ? {} : { body: streamedBody.stream, duplex: 'half' }),
    });
  }
  const request = new HttpRequest({ nativeRequest, params } as HttpRequestInit);
  const result = await handler(request, context);
  if (!hasBody) req.resume();
  // A function may answer before reading a streamed body (413 by Content-Length, 401): the rest
  // is drained, so that the client can finish sending and read the answer.
  if (streamedBody !== undefined && !req.complete) {
    streamedBody.abandon();
    drainAfterAnswer(req, res);
  }
  if (writeSimpleResponse(result, res, method)) return;
  const response = result instanceof HttpResponse ? result : new HttpResponse(result ?? {});
  res.writeHead(response.status ?? 200, Object.fromEntries(response.headers.entries()));
  if (method === 'HEAD' || response.body === null) {
    res.end();
    return;
  }
  await pipeline(Readable.fromWeb(response.body), res);
}

/**
 * Writes a plain response (no body, a string, bytes or `jsonBody`) directly, as the host would;
 * anything else (streams, cookies, HttpResponse objects) goes through the library's HttpResponse.
 * Returns false when it did not write.
 */
function writeSimpleResponse(result: unknown, res: http.ServerResponse, method: string): boolean {
  if (
    result instanceof HttpResponse ||
    (result !== undefined && typeof result !== 'object') ||
    result === null
  ) {
    return false;
  }
  const init = (result ?? {}) as HttpResponseInit;
  if (init.cookies !== undefined) return false;
  let body: string | Uint8Array | undefined;
  const headers = headerRecord(init.headers);
  if (init.jsonBody !== undefined) {
    body = JSON.stringify(init.jsonBody);
    headers['content-type'] ??= 'application/json';
  } else if (init.body === undefined || init.body === null) {
    body = undefined;
  } else if (typeof init.body === 'string' || init.body instanceof Uint8Array) {
    body = init.body;
  } else {
    return false;
  }
  if (body !== undefined && method !== 'HEAD') {
    headers['content-length'] ??= String(typeof body === 'string' ? Buffer.byteLength(body) : body.length);
  }
  res.writeHead(init.status ?? 200, headers);
  res.end(method === 'HEAD' ? undefined : body);
  return true;
}

/** Response headers as one record with lower-case names (a plain object is read directly). */
function headerRecord(init: HttpResponseInit['headers']): Record<string, string> {
  const headers: Record<string, string> = {};
  if (init === undefined) return headers;
  const entries =
    init instanceof Headers || Array.isArray(init) ? new Headers(init).entries() : Object.entries(init);
  for (const [name, value] of entries) headers[name.toLowerCase()] = String(value);
  return headers;
}

export function sendJson(res: http.ServerResponse, status: number, code: string, message: string): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ error: { code, message } }));
}
