import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  type CallToolResult,
  ErrorCode,
  type JSONRPCRequest,
  type JSONRPCResponse,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  type Tool as ListedTool,
} from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv-provider.js';
import { z } from 'zod';

import { stringifyJson } from '../json';
import type { Logger } from '../logging';
import { CairnError, type ErrorCode as CairnCode } from '../protocol/errors';
import { exchange, type McpAnswer, type McpEndpoint } from './exchange';
import { listResources, readResource, RESOURCE_TEMPLATES } from './resources';
import { callTool, type ToolCall, TOOLS } from './tools';

/**
 * Cairn as an MCP server (docs/mcp.md) on the Streamable HTTP transport, stateless: every POST
 * gets a fresh server and transport (./exchange.ts; a plain tool call is answered without one), answers JSON (no event stream is held open)
 * and keeps nothing, so any instance answers any request. The caller is already authenticated: tools and
 * resources see its tenant only, admin tools are listed for admins only.
 *
 * A tool that fails answers an MCP tool error (`isError`) whose text is the API's error JSON,
 * `{"error": {"code", "message", ...}}`, so a model reads the same code and message an HTTP client
 * would. A resource read that fails is a JSON-RPC error carrying that JSON as its `data`.
 */

export interface McpCall extends ToolCall {
  readonly requestId: string;
  readonly log: Logger;
}

const INSTRUCTIONS =
  'Cairn keeps durable state for agents. Use remember/recall/search_memory for facts worth keeping across conversations (namespaces like "users/42"), kv_* for documents and state you read and write by key (with ETags for safe updates), claim_deliveries so that each message is handled by exactly one agent, add_promise/list_promises for commitments made in chats, and the thread tools to read stored conversation checkpoints. A failed call answers {"error": {"code", "message"}}; the message names the argument at fault.';

/** A tool as listed: its JSON Schema comes from the zod schema it validates with. */
function listed(tool: (typeof TOOLS)[number]): ListedTool {
  const inputSchema = z.toJSONSchema(tool.schema, { io: 'input' }) as Record<string, unknown>;
  delete inputSchema['$schema'];
  return {
    name: tool.name,
    title: tool.title,
    description: tool.description,
    inputSchema: inputSchema as ListedTool['inputSchema'],
    annotations: {
      title: tool.title,
      readOnlyHint: tool.readOnly,
      destructiveHint: !tool.readOnly && /forget|put/.test(tool.name),
      openWorldHint: false,
    },
  };
}

/** Built once per process (a JSON Schema takes a moment to generate). */
const TENANT_TOOLS = TOOLS.filter((tool) => tool.access === 'tenant').map(listed);
const ADMIN_TOOLS = TOOLS.map(listed);

interface ErrorJson {
  error: { code: CairnCode; message: string; [detail: string]: unknown };
}

/** The API's error JSON for any thrown value; unknown ones (bugs) are logged and answer `internal`. */
function errorJson(error: unknown, call: McpCall): ErrorJson {
  const known = error instanceof CairnError ? error : undefined;
  if (known === undefined || known.fault === 'system') call.log.error({ err: error }, 'mcp call failed');
  if (known === undefined) {
    return {
      error: {
        code: 'internal',
        message: `internal error; the request id ${call.requestId} identifies it in the logs`,
      },
    };
  }
  return { error: { code: known.code, message: known.message, ...known.details } };
}

function jsonText(value: unknown): CallToolResult {
  const text = stringifyJson(value ?? null);
  const structured = typeof value === 'object' && value !== null && !Array.isArray(value);
  return {
    content: [{ type: 'text', text }],
    ...(structured ? { structuredContent: value as Record<string, unknown> } : {}),
  };
}

async function runTool(name: string, args: unknown, call: McpCall): Promise<CallToolResult> {
  try {
    return jsonText(await callTool(name, args, call));
  } catch (error) {
    return { ...jsonText(errorJson(error, call)), isError: true };
  }
}

/** A resource failure as a JSON-RPC error: bad URI invalid params, absent "resource not found". */
function resourceError(error: unknown, call: McpCall): McpError {
  const data = errorJson(error, call);
  const code =
    data.error.code === 'not_found'
      ? -32002
      : data.error.code === 'invalid_argument'
        ? ErrorCode.InvalidParams
        : ErrorCode.InternalError;
  return new McpError(code, data.error.message, data);
}

/**
 * One validator per process: a server makes its own by default, an Ajv instance per request. (It
 * only checks what clients answer to elicitations, which Cairn never asks for.)
 */
const jsonSchemaValidator = new AjvJsonSchemaValidator();

function serverFor(call: McpCall): Server {
  const server = new Server(
    { name: 'cairn', title: 'Cairn', version: call.services.version },
    {
      capabilities: { tools: { listChanged: false }, resources: {} },
      instructions: INSTRUCTIONS,
      jsonSchemaValidator,
    },
  );
  server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: call.principal.admin ? ADMIN_TOOLS : TENANT_TOOLS,
  }));
  server.setRequestHandler(CallToolRequestSchema, (request) =>
    runTool(request.params.name, request.params.arguments, call),
  );
  server.setRequestHandler(ListResourceTemplatesRequestSchema, () => ({
    resourceTemplates: [...RESOURCE_TEMPLATES],
  }));
  server.setRequestHandler(ListResourcesRequestSchema, async (request) => {
    try {
      return await listResources(call, request.params?.cursor);
    } catch (error) {
      throw resourceError(error, call);
    }
  });
  server.setRequestHandler(ReadResourceRequestSchema, async (request) => {
    try {
      return { contents: [await readResource(call, request.params.uri)] };
    } catch (error) {
      throw resourceError(error, call);
    }
  });
  return server;
}

/**
 * A plain `tools/call` (valid params, no task augmentation) answered without the SDK server: the
 * same tool run and the same JSON-RPC answer, key for key, that the SDK's `Server` gives (its
 * tools/call handler validates the request and Cairn's result, which `runTool` always makes
 * valid, and answers `{result, jsonrpc, id}`), without what the SDK does per request around it: a
 * `Server` with its handlers, an abort controller, the request's closures, and the zod parses of
 * each message against every message type (two of which fail, the costly way). `_meta` (a
 * progress token, as agent hosts send) changes nothing there: Cairn sends no progress and has no
 * task store. A task-augmented call (which the server refuses: no task capability), any other
 * request, or a `tools/call` whose params do not parse goes to the SDK server, which answers it
 * or its error as before.
 */
function directToolCall(request: JSONRPCRequest, call: McpCall): Promise<JSONRPCResponse> | undefined {
  if (request.method !== 'tools/call') return undefined;
  const parsed = CallToolRequestSchema.safeParse(request);
  if (!parsed.success) return undefined;
  const { params } = parsed.data;
  if (params.task !== undefined) return undefined;
  return runTool(params.name, params.arguments, call).then((result) => ({
    result,
    jsonrpc: '2.0' as const,
    id: request.id,
  }));
}

/** Who answers the caller's POST: plain tool calls directly, the rest a fresh SDK server. */
export function mcpEndpoint(call: McpCall): McpEndpoint {
  return {
    direct: (request) => directToolCall(request, call),
    server: () => serverFor(call),
  };
}

/**
 * Answers one MCP POST for the authenticated caller: `body` is the JSON already read within the
 * route's limit and parsed, `protocolVersion` the `MCP-Protocol-Version` header. The answer is the
 * JSON-RPC answer (200), or 202 for a body without requests; a body the transport refuses throws
 * InvalidArgumentError (./exchange.ts).
 *
 * The server, when one is made, is not closed afterwards: with JSON answers nothing of it outlives
 * the request (no stream, no timer). It is garbage once the answer is returned.
 */
export function handleMcpPost(
  call: McpCall,
  body: unknown,
  protocolVersion: string | null,
): Promise<McpAnswer> {
  return exchange(mcpEndpoint(call), body, protocolVersion);
}
