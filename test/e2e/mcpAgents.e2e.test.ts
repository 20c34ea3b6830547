import { Agent, MCPServerStreamableHttp, Runner, setTracingDisabled } from '@openai/agents';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import {
  apiKeysSetting,
  type Backend,
  backendSettings,
  client,
  newTenant,
  type RunningApp,
  startApp,
} from '../support/app';
import { azurite } from '../support/azurite';
import { say, ScriptedModel, toolCall, toolOutput } from '../support/scriptedModel';
import { memoryTableSettings } from '../support/tables';

/**
 * An OpenAI Agents SDK agent whose only access to Cairn is MCP (`MCPServerStreamableHttp` at
 * `/api/mcp`): with a stub model, one run remembers a fact and a later run, with a fresh agent, a
 * fresh MCP connection and no shared conversation, recalls it.
 */

describe.each<Backend>(['local', 'blob'])(
  'an Agents SDK agent using Cairn over MCP on the %s backend',
  (backend) => {
    const tenant = newTenant('mcp-agent');
    let app: RunningApp;

    beforeAll(async () => {
      setTracingDisabled(true);
      const { blobEndpoint, tableEndpoint } = azurite();
      app = await startApp({
        CAIRN_API_KEYS: apiKeysSetting([tenant]),
        ...backendSettings(backend, blobEndpoint),
        ...(backend === 'blob' ? memoryTableSettings(tableEndpoint) : {}),
      });
    });
    afterAll(async () => {
      await app?.stop();
    });

    /** One run of a fresh agent with a fresh MCP connection to Cairn. */
    async function run(model: ScriptedModel, input: string): Promise<unknown> {
      const cairn = new MCPServerStreamableHttp({
        name: 'cairn',
        url: `${app.url}/api/mcp`,
        requestInit: { headers: { authorization: `Bearer ${tenant.key}` } },
      });
      await cairn.connect();
      try {
        const agent = new Agent({
          name: 'assistant',
          instructions: 'Keep what the user tells you in Cairn.',
          mcpServers: [cairn],
        });
        const result = await new Runner({ modelProvider: { getModel: () => model } }).run(agent, input);
        return result.finalOutput;
      } finally {
        await cairn.close();
      }
    }

    it('remembers a fact in one run and recalls it in a later one', async () => {
      const fact = { namespace: 'users/ada', key: 'favourite-colour' };
      const first = new ScriptedModel([
        toolCall('remember', { ...fact, value: 'teal' }),
        (request) => {
          const stored = JSON.parse(toolOutput(request, 'call_remember')) as { created: boolean };
          return say(stored.created ? 'Noted: teal.' : 'Already known.');
        },
      ]);
      expect(await run(first, 'My favourite colour is teal.')).toBe('Noted: teal.');
      expect(first.offeredTools[0]).toEqual(expect.arrayContaining(['remember', 'recall', 'search_memory']));

      const later = new ScriptedModel([
        toolCall('recall', fact),
        (request) => {
          const recalled = JSON.parse(toolOutput(request, 'call_recall')) as { value: string };
          return say(`Your favourite colour is ${recalled.value}.`);
        },
      ]);
      expect(await run(later, 'What is my favourite colour?')).toBe('Your favourite colour is teal.');

      // The fact is the one the HTTP API serves.
      const http = await client(
        app.url,
        tenant.key,
      )(`/api/memory/facts?${new URLSearchParams(fact).toString()}`);
      expect(((await http.json()) as { value: unknown }).value).toBe('teal');
    });
  },
);
