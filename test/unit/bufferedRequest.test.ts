import { HttpRequest, type HttpRequestInit } from '@azure/functions';
import { describe, expect, it } from 'vitest';

import { BufferedRequest } from '../../dev/host/bufferedRequest';

const URL_ = 'http://127.0.0.1:7071/api/kv/a?x=1';

function buffered(text: string) {
  const headers = new Headers({ 'content-type': 'application/json', 'content-length': String(text.length) });
  return new BufferedRequest(URL_, 'PUT', headers, Buffer.from(text));
}

function asHttpRequest(nativeRequest: BufferedRequest): HttpRequest {
  return new HttpRequest({ nativeRequest, params: { key: 'a' } } as unknown as HttpRequestInit);
}

describe('BufferedRequest (the local runtime nativeRequest for bodies read up front)', () => {
  it('serves the Functions HttpRequest: url, method, headers, query, params and the body readers', async () => {
    const request = asHttpRequest(buffered('{"n":1}'));
    expect([request.url, request.method, request.headers.get('content-type')]).toEqual([
      URL_,
      'PUT',
      'application/json',
    ]);
    expect(request.query.get('x')).toBe('1');
    expect(request.params['key']).toBe('a');
    expect(request.bodyUsed).toBe(false);
    expect(await request.json()).toEqual({ n: 1 });
    expect(request.bodyUsed).toBe(true);
  });

  it('hands out the body once, like fetch', async () => {
    const request = buffered('hello');
    expect(Buffer.from(await request.arrayBuffer()).toString()).toBe('hello');
    await expect(request.text()).rejects.toBeInstanceOf(TypeError);
  });

  it('gives exactly the bytes even when they are a view into a larger buffer', async () => {
    const backing = Buffer.from('xxhelloyy');
    const request = new BufferedRequest(URL_, 'PUT', new Headers(), backing.subarray(2, 7));
    expect(Buffer.from(await request.arrayBuffer()).toString()).toBe('hello');
  });

  it('hands over a buffer the body fills alone, without copying it', async () => {
    const body = Buffer.allocUnsafeSlow(65_536).fill(7);
    const request = new BufferedRequest(URL_, 'PUT', new Headers(), body);
    expect(await request.arrayBuffer()).toBe(body.buffer);
  });

  it('streams the body as a web stream when asked for it, and is then used', async () => {
    const request = buffered('streamed bytes');
    const chunks: Uint8Array[] = [];
    for await (const chunk of request.body as unknown as AsyncIterable<Uint8Array>) chunks.push(chunk);
    expect(Buffer.concat(chunks).toString()).toBe('streamed bytes');
    expect(request.bodyUsed).toBe(true);
    await expect(request.text()).rejects.toBeInstanceOf(TypeError);
  });

  it('clones into a real Request with the same body', async () => {
    const clone = buffered('copy me').clone();
    expect(clone).toBeInstanceOf(Request);
    expect(await clone.text()).toBe('copy me');
  });
});
