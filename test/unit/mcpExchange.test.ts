import { describe, expect, it } from 'vitest';

import { loadConfig } from '../../shared/config';
import { processLogger } from '../../shared/logging';
import { exchange, type McpEndpoint } from '../../shared/mcp/exchange';
import { type McpCall, mcpEndpoint } from '../../shared/mcp/server';
import { createServices } from '../../shared/services';
import { tempDir } from '../support/cleanup';

/**
 * The MCP hot path (shared/mcp/server.ts): a plain `tools/call` is answered without building the
 * SDK server, with the very JSON the SDK server answers; every other message still reaches a
 * server. Against real services on the local backend, in a folder of this test.
 */

function callOf(tenant: string, admin = false): McpCall {
  const services = createServices(
    loadConfig({ CAIRN_DATA_DIR: tempDir('mcp-exchange'), CAIRN_API_KEYS: `${tenant}:${'0'.repeat(64)}` }),
  );
  return { principal: { tenant, admin }, services, requestId: 'test-request', log: processLogger('silent') };
}

/** The endpoint of `call`, counting the SDK servers it builds. */
function counted(call: McpCall): { endpoint: McpEndpoint; servers: () => number } {
  const endpoint = mcpEndpoint(call);
  let servers = 0;
  return {
    endpoint: {
      direct: (request) => endpoint.direct?.(request),
      server: () => {
        servers++;
        return endpoint.server();
      },
    },
    servers: () => servers,
  };
}

/** The same endpoint with every request left to the SDK server: the answers to compare with. */
const sdkOnly = (call: McpCall): McpEndpoint => ({ server: () => mcpEndpoint(call).server() });

const toolCall = (id: number | string, name: string, args?: unknown) => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: { name, ...(args === undefined ? {} : { arguments: args }) },
});

const VERSION = '2025-11-25';

describe('MCP exchange', () => {
  it('answers plain tool calls without an SDK server, as the SDK server answers them', async () => {
    const call = callOf('mcp-direct-a');
    const { endpoint, servers } = counted(call);
    const remembered = await exchange(
      endpoint,
      toolCall(1, 'remember', { namespace: 'users/1', key: 'lang', value: { lang: 'br' } }),
      VERSION,
    );
    expect(remembered.status).toBe(200);
    const bodies = [
      toolCall(2, 'recall', { namespace: 'users/1', key: 'lang' }),
      toolCall('three', 'recall', { namespace: 'users/1', key: 'absent' }),
      toolCall(4, 'recall', { namespace: 'users/1' }),
      toolCall(5, 'recall', { namespace: 'users/1', key: 'lang', extra: 1 }),
      toolCall(6, 'no_such_tool', {}),
      toolCall(7, 'list_tenants', {}),
      toolCall(8, 'kv_list'),
      {
        ...toolCall(11, 'kv_list'),
        params: { name: 'kv_list', arguments: {}, _meta: { progressToken: 11 } },
      },
      [toolCall(9, 'recall', { namespace: 'users/1', key: 'lang' }), toolCall(10, 'kv_list', {})],
    ];
    for (const body of bodies) {
      const direct = await exchange(endpoint, body, VERSION);
      const viaSdk = await exchange(sdkOnly(call), body, VERSION);
      expect(JSON.stringify(direct)).toBe(JSON.stringify(viaSdk));
    }
    expect(servers()).toBe(0);
    const recalled = (await exchange(endpoint, bodies[0], VERSION)) as {
      json: { result: { structuredContent: { value: unknown } } };
    };
    expect(recalled.json.result.structuredContent.value).toEqual({ lang: 'br' });
  });

  it('leaves every other message to a fresh SDK server, with its answers and errors', async () => {
    const call = callOf('mcp-direct-b');
    const { endpoint, servers } = counted(call);
    const bodies: unknown[] = [
      { jsonrpc: '2.0', id: 1, method: 'ping' },
      { jsonrpc: '2.0', id: 2, method: 'tools/list' },
      { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { arguments: {} } },
      {
        ...toolCall(4, 'kv_list', {}),
        params: { name: 'kv_list', arguments: {}, task: { ttl: 1000 } },
      },
      { jsonrpc: '2.0', id: 5, method: 'no/such/method' },
      [toolCall(6, 'kv_list', {}), { jsonrpc: '2.0', id: 7, method: 'ping' }],
    ];
    for (const [index, body] of bodies.entries()) {
      const answer = await exchange(endpoint, body, VERSION);
      expect(servers()).toBe(index + 1);
      expect(JSON.stringify(answer)).toBe(JSON.stringify(await exchange(sdkOnly(call), body, VERSION)));
    }
    const mixed = (await exchange(endpoint, bodies[5], VERSION)) as { json: { id: number }[] };
    expect(mixed.json.map((answer) => answer.id)).toEqual([6, 7]);
    // A body of notifications only still reaches a server, and is answered 202.
    const notified = await exchange(
      endpoint,
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      VERSION,
    );
    expect(notified).toEqual({ status: 202 });
    expect(servers()).toBe(bodies.length + 2);
  });
});
