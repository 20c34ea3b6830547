import type { HttpRequest, HttpResponseInit } from '@azure/functions';

import { InvalidArgumentError } from '#shared/errors';
import { mcpBodyLimit } from '#shared/mcp/limits';
import { handleMcpPost } from '#shared/mcp/server';

import { httpHandler, registerHttp } from './http/pipeline';
import { readBody } from './http/request';

/**
 * Cairn as an MCP server (docs/mcp.md): `POST /api/mcp`, the Streamable HTTP transport in its
 * stateless, JSON-answering form. The pipeline authenticates as for every route (401 before the
 * MCP layer sees anything); the body is read within its limit (413) and must be JSON (400), and
 * is handed to the SDK's web-standard transport with a `Request`, whose `Response` is handed back. GET (an event stream)
 * and DELETE (ending a session) have nothing to do without sessions: 405 with `Allow: POST`, which
 * the transport's clients take as "no stream".
 */

/**
 * The request as the transport takes it, and its body parsed. The body must be JSON (400 naming
 * `body` otherwise, as on every route); the transport gets a `Request` without it (building one
 * with its body costs more than the rest of the adaptation). Every answer is JSON (no event
 * streams), so `Accept` is not held against the caller: the transport is told the client takes both.
 */
async function webRequest(request: HttpRequest, limit: number): Promise<{ web: Request; body: unknown }> {
  const bytes = await readBody(request, limit);
  const contentType = request.headers.get('content-type') ?? '';
  if (!/^application\/json\s*(;|$)/i.test(contentType)) {
    throw new InvalidArgumentError('content-type', 'must be application/json (a JSON-RPC message of MCP)');
  }
  let body: unknown;
  try {
    body = JSON.parse(bytes.toString('utf8')) as unknown;
  } catch {
    throw new InvalidArgumentError('body', 'is not JSON (a JSON-RPC message of MCP, or a batch)');
  }
  const headers = new Headers(request.headers);
  headers.set('accept', 'application/json, text/event-stream');
  return { web: new Request(request.url, { method: 'POST', headers }), body };
}

/**
 * The transport's answer as the Functions runtime takes it. A refusal of the transport itself (a
 * message that is not JSON-RPC, an unsupported `MCP-Protocol-Version`) becomes this API's error
 * JSON, as every route's 4xx is; MCP clients take any HTTP error as a failed request either way.
 */
async function functionsResponse(response: Response): Promise<HttpResponseInit> {
  if (response.status >= 400) {
    const text = await response.text();
    let message = text;
    try {
      message = (JSON.parse(text) as { error?: { message?: string } }).error?.message ?? text;
    } catch {
      // not JSON: the text itself
    }
    const field = /protocol version/i.test(message) ? 'mcp-protocol-version' : 'body';
    throw new InvalidArgumentError(field, message);
  }
  const headers: Record<string, string> = {};
  response.headers.forEach((value, name) => (headers[name] = value));
  const body = response.body === null ? undefined : Buffer.from(await response.arrayBuffer());
  return { status: response.status, headers, ...(body === undefined ? {} : { body }) };
}

export const mcp = httpHandler('mcp', {
  POST: async (request, call) => {
    const limit = mcpBodyLimit(call.services.config.maxValueBytes);
    const { web, body } = await webRequest(request, limit);
    const answer = await handleMcpPost(
      web,
      {
        principal: call.principal,
        services: call.services,
        requestId: call.requestId,
        get log() {
          return call.log;
        },
      },
      body,
    );
    return functionsResponse(answer);
  },
});

registerHttp('mcp', 'mcp', mcp);
