import { randomUUID } from 'node:crypto';

import { type FunctionInput, type FunctionTrigger, InvocationContext } from '@azure/functions';

import type { LocalDurableHost } from './durableHost';
import type { Registration } from './registrations';

/**
 * Makes the InvocationContext of one invocation, as the host would: a fresh invocation id, logs to
 * the runtime's output, and for a durable client input (df.app.client.*) this runtime's durable
 * webhooks (with the host key), as the host's extension would hand over its own.
 */
export class InvocationContexts {
  /** The runtime's base URL, known once it listens (durable clients call back into it). */
  baseUrl = '';

  constructor(
    private readonly durable: LocalDurableHost,
    private readonly write: (line: string) => void,
    private readonly hostKey: string,
  ) {}

  contextFor(registration: Registration): InvocationContext {
    const clientInputs = Object.values(registration.bindings).filter(
      (binding) =>
        binding.direction === 'in' && ['durableClient', 'orchestrationClient'].includes(binding.type),
    );
    const context = new InvocationContext({
      invocationId: randomUUID(),
      functionName: registration.name,
      logHandler: (_level, ...args) => this.write(args.map(String).join(' ')),
      options: {
        trigger: registration.trigger as unknown as FunctionTrigger,
        extraInputs: clientInputs as unknown as FunctionInput[],
        extraOutputs: [],
      },
    });
    for (const input of clientInputs) {
      context.extraInputs.set(String(input['name']), this.durable.clientData(this.baseUrl, this.hostKey));
    }
    return context;
  }
}
