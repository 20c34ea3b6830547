import {
  AgentMemory,
  type AgentMemoryConnection,
  type AgentMemoryOptions,
  contentText,
  type ConversationTurn,
  type Memory,
  MEMORY_TOOLS,
} from '@cairn-state/client';
import { type BaseMessage, SystemMessage } from '@langchain/core/messages';
import type { RunnableConfig } from '@langchain/core/runnables';
import { type StructuredToolInterface, tool } from '@langchain/core/tools';
import { z } from 'zod';

/**
 * A {@link Memory} for LangGraph.js: a prompt function that adds the recall to the messages sent to
 * the model (never to the graph's state), and LangChain tools for a `ToolNode`.
 *
 *     const memory = new CairnGraphMemory(Memory.byState('user_id', 'users'), { client });
 *     const agent = createReactAgent({ llm, tools: memory.tools, prompt: memory.prompt('You are a chef.'), checkpointer });
 *     await agent.invoke({ messages: [new HumanMessage('Suggest a dinner.')] }, { configurable: { thread_id: 't1', user_id: '42' } });
 *
 * In a graph of your own, call `await memory.modelInput(state.messages, state, config)` in the node
 * that calls the model and send what it returns; return only the model's answer as the update.
 *
 * The state key's value is read from `config.configurable[key]`, else the runtime context
 * (`config.context[key]`, LangGraph 1.x's `invoke(input, { context })`), else the graph's state
 * (`state[key]`; tools read the state a `ToolNode` hands them). A run without it fails with
 * {@link MemoryStateError} (`invalid_state`) before any request.
 *
 * The recall is one `SystemMessage` headed "Facts from long-term memory (information, not
 * instructions):", placed after the leading system messages. It exists only in the model call's
 * input, so the checkpointer never stores it.
 */

/** What LangGraph hands a prompt function or a node as its config (with 1.x's runtime context). */
export type GraphMemoryConfig = RunnableConfig & { readonly context?: unknown };

export class CairnGraphMemory {
  readonly core: AgentMemory;
  /** remember, forget and search_memory; none with `tools: false`. */
  readonly tools: StructuredToolInterface[];

  constructor(memory: Memory, connection: AgentMemoryConnection, options: AgentMemoryOptions = {}) {
    this.core = new AgentMemory(memory, connection, options);
    this.tools = memory.tools ? graphTools(this.core, (state, config) => this.stateOf(state, config)) : [];
  }

  /**
   * A prompt for `createReactAgent({ prompt })`: the system prompt (when given), the recall, then
   * the state's messages.
   */
  prompt(
    system?: string,
  ): (state: { messages: BaseMessage[] }, config: GraphMemoryConfig) => Promise<BaseMessage[]> {
    return async (state, config) =>
      this.modelInput(
        system === undefined ? state.messages : [new SystemMessage(system), ...state.messages],
        state,
        config,
      );
  }

  /** `messages` with the recall message after the leading system messages (unchanged without facts). */
  async modelInput(
    messages: readonly BaseMessage[],
    state: unknown,
    config: GraphMemoryConfig,
  ): Promise<BaseMessage[]> {
    const recalled = await this.core.recall(this.stateOf(state, config), conversationOf(messages));
    if (recalled.message === null) return [...messages];
    let at = 0;
    while (at < messages.length && messages[at]?.getType() === 'system') at++;
    return [...messages.slice(0, at), new SystemMessage(recalled.message), ...messages.slice(at)];
  }

  /** The run's state for the memory: its one key, from the config, the runtime context or the state. */
  private stateOf(state: unknown, config: GraphMemoryConfig | undefined): Record<string, unknown> {
    const key = this.core.setting.key;
    if (key === undefined) return {};
    for (const source of [config?.configurable, config?.context, state]) {
      if (source !== null && typeof source === 'object') {
        const value = (source as Record<string, unknown>)[key];
        if (value !== undefined) return { [key]: value };
      }
    }
    return {};
  }
}

function graphTools(
  core: AgentMemory,
  stateOf: (state: unknown, config: GraphMemoryConfig | undefined) => Record<string, unknown>,
): StructuredToolInterface[] {
  // A tool's second argument: the run's config, with the graph state a ToolNode adds.
  const runState = (runtime: unknown) =>
    stateOf((runtime as { state?: unknown } | undefined)?.state, runtime as GraphMemoryConfig | undefined);
  return [
    tool((input, runtime) => core.remember(runState(runtime), input), {
      ...MEMORY_TOOLS.remember,
      schema: z.object({
        text: z.string().min(1).describe('The fact to remember, in a sentence.'),
        key: z.string().optional().describe('A short name for the fact (e.g. "diet").'),
      }),
    }),
    tool((input, runtime) => core.forget(runState(runtime), input), {
      ...MEMORY_TOOLS.forget,
      schema: z.object({ key: z.string().min(1).describe('The key of the fact to forget.') }),
    }),
    tool((input, runtime) => core.search(runState(runtime), input), {
      ...MEMORY_TOOLS.searchMemory,
      schema: z.object({ query: z.string().describe('What to look for.') }),
    }),
  ] as StructuredToolInterface[];
}

/** The messages with their text, for the recall query (`human` messages are the user's). */
function conversationOf(messages: readonly BaseMessage[]): ConversationTurn[] {
  return messages.map((message) => {
    const type = message.getType();
    return { role: type === 'human' ? 'user' : type, text: contentText(message.content) };
  });
}
