import { z } from 'zod';

import { DEFAULT_MAX_VALUE_BYTES } from './fields.js';
import { route } from './spec.js';
import { TAGS } from './tags.js';

/** Cairn as an MCP server (docs/mcp.md): one route, the Streamable HTTP transport, stateless. */

/**
 * The largest MCP request body: a key/value value of CAIRN_MAX_VALUE_BYTES as base64 (4/3 of it),
 * plus room for the JSON-RPC envelope. Larger bodies are 413 before anything is parsed.
 */
export function mcpBodyLimit(maxValueBytes: number): number {
  return Math.ceil(maxValueBytes / 3) * 4 + 64 * 1024;
}

/** A JSON-RPC message or a batch of them, as the document shows it (the MCP SDK checks the rest). */
const messages = z.union([z.looseObject({}), z.array(z.unknown())]);

export const mcpRoute = route({
  name: 'mcp',
  route: 'mcp',
  operations: {
    POST: {
      operationId: 'mcp',
      summary: 'Model Context Protocol (Streamable HTTP)',
      description:
        "Cairn as an MCP server: memory, key/value, delivery claims, promises and read-only threads as tools, facts and keys as resources, for the caller's tenant (docs/mcp.md). Stateless: every request stands alone and is answered with JSON; GET and DELETE answer 405. Every answer is JSON, whatever `Accept` says. A tool that fails answers 200 with an MCP tool error whose text is the error JSON of this API; a body that is not JSON, not a JSON-RPC message of MCP or a batch of 1 to 100 of them, or of an unsupported `MCP-Protocol-Version` is 400 with the error JSON. A batch is answered with an array of the answers to its requests, in their order.",
      tag: TAGS.mcp,
      auth: 'tenant',
      headers: {
        'MCP-Protocol-Version': {
          description: 'The MCP protocol version the client speaks; an unsupported one is 400.',
          schema: z.string(),
        },
      },
      // Read as bytes and parsed by the handler: its messages say "a JSON-RPC message of MCP", and
      // the MCP SDK, not the JSON nesting rule of the other routes, decides what a message holds.
      body: {
        kind: 'bytes',
        description: 'A JSON-RPC message of MCP, or a batch, with `Content-Type: application/json`.',
        limit: mcpBodyLimit(DEFAULT_MAX_VALUE_BYTES),
        limitSetting: 'maxValueBytes',
        limitFromSetting: mcpBodyLimit,
        documentedAs: { mediaType: 'application/json', schema: messages },
      },
      answers: {
        200: {
          description: 'The JSON-RPC answer (an array for a batch, even of one request).',
          body: messages,
        },
        202: { description: 'The body held only notifications or responses: nothing to answer.' },
      },
    },
  },
});
