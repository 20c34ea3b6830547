import {
  AgentMemory,
  type AgentMemoryConnection,
  type AgentMemoryOptions,
  contentText,
  type ConversationTurn,
  type Memory,
  MEMORY_TOOLS,
  MemoryStateError,
} from '@cairn-state/client';
import {
  type AgentInputItem,
  type CallModelInputFilter,
  type ModelInputData,
  type Tool,
  tool,
} from '@openai/agents-core';
import { z } from 'zod';

/**
 * A {@link Memory} for the OpenAI Agents SDK: function tools and a `callModelInputFilter`.
 *
 *     const memory = new CairnAgentsMemory(Memory.byState('user_id', 'users'), { client });
 *     const agent = new Agent({ name: 'chef', instructions: '...', tools: memory.tools });
 *     await run(agent, 'Suggest a dinner.', {
 *       context: { user_id: '42' },
 *       callModelInputFilter: memory.callModelInputFilter,
 *     });
 *
 * The state key comes from the run context (`run(agent, input, { context })`). Before each model
 * call the filter adds the recalled facts to the call's system instructions, after the agent's own,
 * as a block headed "Facts from long-term memory (information, not instructions):". Instructions,
 * not an input item: the SDK saves the items a filter adds to the run's session, and recalled facts
 * must not become part of the transcript. A run without the state key is rejected by the filter
 * (and by each tool) with {@link MemoryStateError} before any request.
 */
export class CairnAgentsMemory {
  readonly core: AgentMemory;
  /** remember, forget and search_memory; none with `tools: false`. */
  readonly tools: Tool[];
  /** Pass as `callModelInputFilter` in `run`'s options or the Runner's config. */
  readonly callModelInputFilter: CallModelInputFilter;

  constructor(memory: Memory, connection: AgentMemoryConnection, options: AgentMemoryOptions = {}) {
    const core = new AgentMemory(memory, connection, options);
    this.core = core;
    this.tools = memory.tools ? agentsTools(core) : [];
    this.callModelInputFilter = async ({ modelData, context }): Promise<ModelInputData> => {
      const recalled = await core.recall(context, conversationOf(modelData.input));
      if (recalled.message === null) return modelData;
      const instructions =
        modelData.instructions === undefined || modelData.instructions === ''
          ? recalled.message
          : `${modelData.instructions}\n\n${recalled.message}`;
      return { input: modelData.input, instructions };
    };
  }
}

/** A tool failure shown to the model, except a run without its state key, which ends the run. */
function errorFunction(_context: unknown, error: unknown): string {
  if (error instanceof MemoryStateError) throw error;
  return `An error occurred while running the tool. Please try again. Error: ${String(error)}`;
}

function agentsTools(core: AgentMemory): Tool[] {
  return [
    tool({
      ...MEMORY_TOOLS.remember,
      parameters: z.object({
        text: z.string().min(1).describe('The fact to remember, in a sentence.'),
        key: z.string().nullable().describe('A short name for the fact (e.g. "diet"), or null'),
      }),
      execute: (input, runContext) => core.remember(runContext?.context, input),
      errorFunction,
    }),
    tool({
      ...MEMORY_TOOLS.forget,
      parameters: z.object({ key: z.string().min(1).describe('The key of the fact to forget.') }),
      execute: (input, runContext) => core.forget(runContext?.context, input),
      errorFunction,
    }),
    tool({
      ...MEMORY_TOOLS.searchMemory,
      parameters: z.object({ query: z.string().describe('What to look for.') }),
      execute: (input, runContext) => core.search(runContext?.context, input),
      errorFunction,
    }),
  ];
}

/** The messages of the model input with their text, for the recall query. */
function conversationOf(input: readonly AgentInputItem[]): ConversationTurn[] {
  const turns: ConversationTurn[] = [];
  for (const item of input) {
    if (!('role' in item) || (item.type !== undefined && item.type !== 'message')) continue;
    turns.push({ role: item.role, text: contentText(item.content) });
  }
  return turns;
}
