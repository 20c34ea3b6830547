import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  type JSONRPCMessage,
  JSONRPCMessageSchema,
  type JSONRPCRequest,
  type JSONRPCResponse,
  type RequestId,
  SUPPORTED_PROTOCOL_VERSIONS,
} from '@modelcontextprotocol/sdk/types.js';

import { InvalidArgumentError } from '../protocol/errors';

/**
 * One POST of the Streamable HTTP transport in its stateless, JSON-answering form, as an SDK
 * `Transport` of its own: the SDK's server (its `Protocol`) still does the protocol work, from
 * JSON-RPC dispatch and the initialize handshake to `ping`, request and result validation and
 * error answers; this only hands it the messages of one body and collects its answers. The one
 * exception is the hot path, a plain `tools/call`, which the endpoint may answer directly with
 * the same JSON (./server.ts says when, and why). The SDK's
 * web-standard transport does the same through a fetch `Request`, a `Response` and a web stream
 * per POST, an abort signal each, which cost the MCP route several times what the protocol does
 * (docs/mcp.md, "Cost").
 *
 * The rules are the SDK transport's, answered as this API's 400s naming what is wrong:
 *
 * - the body is one JSON-RPC message, or a batch of 1 to {@link MAX_BATCH} (`body`, or `body.3`
 *   for a batch's fourth message, when one is not JSON-RPC);
 * - an `initialize` request comes alone;
 * - after initialization, an `MCP-Protocol-Version` header must name a supported version;
 * - a body of notifications and responses only is answered 202 without a body.
 *
 * Decisions of its own, where the SDK transport's behaviour is no rule:
 *
 * - a batch is answered with an array (JSON-RPC 2.0), even of one answer, in the order of the
 *   requests; a single message with an object;
 * - two requests of one batch with the same id are refused (their answers could not be told
 *   apart);
 * - `notifications/cancelled` is accepted and ignored: without sessions a cancellation can only
 *   name a request of its own body, which the client can as well leave out.
 */

/** The most messages a batch may hold (as the SDK's transport). */
export const MAX_BATCH = 100;

export type McpAnswer = { readonly status: 200; readonly json: unknown } | { readonly status: 202 };

/** What `exchange` connects: the SDK's `Server` (any `Protocol`). */
export interface McpProtocol {
  connect(transport: Transport): Promise<void>;
}

/**
 * Who answers a POST's messages: `direct` answers the requests it knows how to answer alone (a
 * plain `tools/call`, the hot path, ./server.ts) and returns undefined for any other; `server()`
 * makes the SDK server for the rest, only when the body has such a message.
 */
export interface McpEndpoint {
  direct?(request: JSONRPCRequest): Promise<JSONRPCResponse> | undefined;
  server(): McpProtocol;
}

const isRequest = (message: JSONRPCMessage): message is JSONRPCRequest =>
  'method' in message && 'id' in message;

class PostTransport implements Transport {
  onmessage?: Transport['onmessage'];
  onclose?: () => void;
  onerror?: (error: Error) => void;
  private readonly waiting = new Map<RequestId, (answer: JSONRPCResponse) => void>();

  start(): Promise<void> {
    return Promise.resolve();
  }

  close(): Promise<void> {
    this.onclose?.();
    return Promise.resolve();
  }

  /** The server's answers go to the request they answer; Cairn sends nothing else (no stream). */
  send(message: JSONRPCMessage): Promise<void> {
    if ('id' in message && message.id !== undefined && ('result' in message || 'error' in message)) {
      const answered = this.waiting.get(message.id);
      this.waiting.delete(message.id);
      answered?.(message);
    }
    return Promise.resolve();
  }

  deliver(message: JSONRPCMessage): void {
    this.onmessage?.(message);
  }

  /** Delivers `request`; resolves with the server's answer to it. */
  ask(request: JSONRPCRequest): Promise<JSONRPCResponse> {
    return new Promise((resolve) => {
      this.waiting.set(request.id, resolve);
      this.onmessage?.(request);
    });
  }
}

/** The messages of `body`, validated as the SDK's transport validates them. */
function messagesOf(body: unknown, protocolVersion: string | null): JSONRPCMessage[] {
  const batch = Array.isArray(body);
  const raw: unknown[] = batch ? body : [body];
  if (batch && raw.length === 0) throw new InvalidArgumentError('body', 'is an empty batch');
  if (raw.length > MAX_BATCH) {
    throw new InvalidArgumentError('body', `is a batch of ${raw.length} messages; at most ${MAX_BATCH}`);
  }
  const ids = new Set<RequestId>();
  const messages = raw.map((entry, index) => {
    const field = batch ? `body.${index}` : 'body';
    const parsed = JSONRPCMessageSchema.safeParse(entry);
    if (!parsed.success) {
      throw new InvalidArgumentError(
        field,
        'is not a JSON-RPC message of MCP (a request, notification or response)',
      );
    }
    const message = parsed.data;
    if (isRequest(message)) {
      if (ids.has(message.id))
        throw new InvalidArgumentError(field, 'has the id of an earlier request of the batch');
      ids.add(message.id);
    }
    return message;
  });
  const initializing = messages.some((message) => 'method' in message && message.method === 'initialize');
  if (initializing && messages.length > 1) {
    throw new InvalidArgumentError('body', 'an initialize request must be sent alone, not in a batch');
  }
  if (!initializing && protocolVersion !== null && !SUPPORTED_PROTOCOL_VERSIONS.includes(protocolVersion)) {
    throw new InvalidArgumentError(
      'mcp-protocol-version',
      `${protocolVersion} is not a supported protocol version (supported: ${SUPPORTED_PROTOCOL_VERSIONS.join(', ')})`,
    );
  }
  return messages;
}

/**
 * Answers one POST's `body` (parsed JSON): each request `endpoint.direct` takes is answered by
 * it, every other message goes to a fresh SDK server, connected here to a transport of this POST
 * alone. Nothing is shared between requests, so any instance answers any request and no caller's
 * request can reach another's. `protocolVersion` is the `MCP-Protocol-Version` header.
 */
export async function exchange(
  endpoint: McpEndpoint,
  body: unknown,
  protocolVersion: string | null,
): Promise<McpAnswer> {
  const messages = messagesOf(body, protocolVersion);
  let transport: PostTransport | undefined;
  const connected = async (): Promise<PostTransport> => {
    if (transport === undefined) {
      transport = new PostTransport();
      await endpoint.server().connect(transport);
    }
    return transport;
  };
  const answers: Promise<JSONRPCResponse>[] = [];
  for (const message of messages) {
    if (isRequest(message)) {
      const direct = endpoint.direct?.(message);
      answers.push(direct ?? (await connected()).ask(message));
    } else if (!('method' in message && message.method === 'notifications/cancelled')) {
      (await connected()).deliver(message);
    }
  }
  if (answers.length === 0) return { status: 202 };
  const answered = await Promise.all(answers);
  return { status: 200, json: Array.isArray(body) ? answered : answered[0] };
}
