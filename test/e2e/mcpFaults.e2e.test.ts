import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { describe, expect, it } from 'vitest';

import { backendSettings } from '../support/app';
import { onCleanUp } from '../support/cleanup';
import { appOnOwnStorage } from '../support/faults';
import { memoryTableSettings } from '../support/tables';

/**
 * Storage faults through MCP: with the app's own Azurite stopped, tools answer tool errors with
 * `storage_unavailable` (never `not_found`, never a hang), and serve again once it is back.
 */
describe('MCP tools while the storage is down', () => {
  const suite = appOnOwnStorage((storage) => ({
    ...backendSettings('blob', storage.blobEndpoint),
    ...memoryTableSettings(storage.tableEndpoint),
  }));

  it('answers storage_unavailable tool errors and recovers', async () => {
    const mcp = new Client({ name: 'cairn-faults', version: '1.0.0' });
    await mcp.connect(
      new StreamableHTTPClientTransport(new URL(`${suite.app.url}/api/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${suite.tenant.key}` } },
      }),
    );
    onCleanUp(() => mcp.close());
    const error = async (name: string, args: Record<string, unknown>) => {
      const answer = (await mcp.callTool({ name, arguments: args })) as {
        isError?: boolean;
        content: { text: string }[];
      };
      expect(answer.isError, name).toBe(true);
      return (JSON.parse(answer.content[0]?.text ?? '{}') as { error: { code: string } }).error.code;
    };
    expect(
      (await mcp.callTool({ name: 'kv_put', arguments: { key: 'a', value: 'before' } })).isError,
    ).not.toBe(true);
    await suite.stopStorage();
    expect(await error('kv_get', { key: 'a' })).toBe('storage_unavailable');
    expect(await error('kv_get', { key: 'missing' })).toBe('storage_unavailable');
    expect(await error('kv_put', { key: 'a', value: 'during' })).toBe('storage_unavailable');
    expect(await error('recall', { namespace: 'n', key: 'k' })).toBe('storage_unavailable');
    expect(await error('remember', { namespace: 'n', key: 'k', value: 1 })).toBe('storage_unavailable');
    await expect(mcp.readResource({ uri: 'cairn://kv/a' })).rejects.toThrow(/unavailable/);

    await suite.restartStorage();
    const again = await mcp.callTool({ name: 'kv_put', arguments: { key: 'a', value: 'after' } });
    expect(again.isError).not.toBe(true);
  });
});
