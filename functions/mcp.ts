import type { HttpRequest } from '@azure/functions';

import { handleMcpPost } from '#shared/mcp/server';
import { InvalidArgumentError } from '#shared/protocol/errors';
import { mcpRoute } from '#shared/protocol/mcp';

import { json } from './http/request';
import { registerRoute, specHandler } from './http/route';

/**
 * Cairn as an MCP server (docs/mcp.md): `POST /api/mcp`, the Streamable HTTP transport in its
 * stateless, JSON-answering form, served by its spec (shared/protocol/mcp.ts). The pipeline
 * authenticates as for every route (401 before the MCP layer sees anything); the body is read
 * within its limit (413, from CAIRN_MAX_VALUE_BYTES) and must be JSON (400), and
 * its messages are answered by the SDK's server (shared/mcp/). Every answer is JSON (no event
 * streams), so `Accept` is not held against the caller. GET (an event stream) and DELETE (ending
 * a session) have nothing to do without sessions: 405 with `Allow: POST`, which the transport's
 * clients take as "no stream".
 */

/** The body as JSON: `content-type` must say so, and the bytes must be JSON (400 otherwise). */
function jsonBody(request: HttpRequest, bytes: Buffer): unknown {
  const contentType = request.headers.get('content-type') ?? '';
  if (!/^application\/json\s*(;|$)/i.test(contentType)) {
    throw new InvalidArgumentError('content-type', 'must be application/json (a JSON-RPC message of MCP)');
  }
  try {
    return JSON.parse(bytes.toString('utf8')) as unknown;
  } catch {
    throw new InvalidArgumentError('body', 'is not JSON (a JSON-RPC message of MCP, or a batch)');
  }
}

export const mcp = specHandler(mcpRoute, {
  POST: async ({ body: bytes }, request, call) => {
    const body = jsonBody(request, bytes);
    const answer = await handleMcpPost(
      {
        principal: call.principal,
        services: call.services,
        requestId: call.requestId,
        get log() {
          return call.log;
        },
      },
      body,
      request.headers.get('mcp-protocol-version'),
    );
    return answer.status === 202 ? { status: 202 } : json(200, answer.json);
  },
});

registerRoute(mcp);
