import {
  type AgentInputItem,
  type Model,
  type ModelRequest,
  type ModelResponse,
  type StreamEvent,
  Usage,
} from '@openai/agents';

/** One scripted answer of the model: an output item made from the request it answers. */
export type Step = (request: ModelRequest) => ModelResponse['output'][number];

/**
 * An OpenAI Agents SDK `Model` that plays scripted steps, one per request, and keeps every request
 * (its input copied as it was then: the SDK goes on changing the array it handed over).
 */
export class ScriptedModel implements Model {
  readonly requests: ModelRequest[] = [];
  private readonly steps: Step[];

  constructor(steps: Step[]) {
    this.steps = [...steps];
  }

  /** The names of the tools offered, per request. */
  get offeredTools(): string[][] {
    return this.requests.map((request) => request.tools.map((tool) => tool.name));
  }

  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    this.requests.push({
      ...request,
      input: typeof request.input === 'string' ? request.input : structuredClone(request.input),
    });
    const step = this.steps.shift();
    if (step === undefined) throw new Error('the scripted model has no step left');
    return { usage: new Usage(), output: [step(request)], responseId: `resp_${this.requests.length}` };
  }

  // eslint-disable-next-line require-yield
  async *getStreamedResponse(): AsyncIterable<StreamEvent> {
    throw new Error('the scripted model does not stream');
  }
}

/** A step that calls the tool `name` with `args` (its call id is `call_<name>`). */
export const toolCall =
  (name: string, args: Record<string, unknown>): Step =>
  () => ({
    type: 'function_call',
    id: `fc_${name}`,
    callId: `call_${name}`,
    name,
    status: 'completed',
    arguments: JSON.stringify(args),
  });

/** An assistant message saying `text`. */
export const say = (text: string): ModelResponse['output'][number] => ({
  type: 'message',
  id: 'msg',
  role: 'assistant',
  status: 'completed',
  content: [{ type: 'output_text', text }],
});

/** A step that says `text`. */
export const reply =
  (text: string): Step =>
  () =>
    say(text);

/** The text of the output of the tool call `callId` in the model's input, as the SDK handed it over. */
export function toolOutput(request: ModelRequest, callId: string): string {
  const items: AgentInputItem[] = typeof request.input === 'string' ? [] : request.input;
  const result = items.find((item) => item.type === 'function_call_result' && item.callId === callId);
  if (result === undefined || result.type !== 'function_call_result') throw new Error('no tool result');
  const output = result.output as
    string | { type: string; text?: string } | { type: string; text?: string }[];
  if (typeof output === 'string') return output;
  const parts = Array.isArray(output) ? output : [output];
  return parts.map((part) => part.text ?? '').join('');
}
