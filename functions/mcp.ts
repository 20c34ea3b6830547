import type { HttpRequest, HttpResponseInit } from '@azure/functions';

import { mcpBodyLimit } from '#shared/mcp/limits';
import { handleMcpPost } from '#shared/mcp/server';

import { httpHandler, registerHttp } from './http/pipeline';
import { readBody } from './http/request';

/**
 * Cairn as an MCP server (docs/mcp.md): `POST /api/mcp`, the Streamable HTTP transport in its
 * stateless, JSON-answering form. The pipeline authenticates as for every route (401 before the
 * MCP layer sees anything); the body is read within its limit (413), handed to the SDK's
 * web-standard transport as a `Request`, and its `Response` handed back. GET (an event stream)
 * and DELETE (ending a session) have nothing to do without sessions: 405 with `Allow: POST`, which
 * the transport's clients take as "no stream".
 */

/**
 * The request as the transport takes it, and its body parsed: a `Request` without a body when the
 * body is JSON (building one with its body costs more than the rest of the adaptation), with it
 * otherwise, so that the transport answers its own parse error.
 */
async function webRequest(request: HttpRequest, limit: number): Promise<{ web: Request; body: unknown }> {
  const bytes = await readBody(request, limit);
  try {
    const body = JSON.parse(bytes.toString('utf8')) as unknown;
    return { web: new Request(request.url, { method: 'POST', headers: request.headers }), body };
  } catch {
    return {
      web: new Request(request.url, { method: 'POST', headers: request.headers, body: bytes }),
      body: undefined,
    };
  }
}

async function functionsResponse(response: Response): Promise<HttpResponseInit> {
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
