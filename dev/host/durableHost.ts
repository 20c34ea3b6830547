import { randomUUID } from 'node:crypto';

import { InvocationContext } from '@azure/functions';

import type { Logger } from '../../shared/logging';
import type { Registration } from './registrations';

/**
 * A development stand-in for the Durable Functions extension, used by the local runtime only: it
 * runs the app's registered orchestrations by replaying their history through the real
 * `durable-functions` library (the orchestrator handler is called with the host's payload shape and
 * returns the actions it wants), runs the activities those actions ask for, and appends their
 * results as history events, with retries as the orchestrator asks (CallActivityWithRetry: the
 * failed attempt, a timer, the next attempt, as the extension records them). It also answers the
 * durable client's HTTP calls (start, status), so `df.app.client.http` starters work unchanged.
 *
 * Instances live in memory: they end with the process. Under `func start` and in Azure the
 * Durable Functions extension runs the same registrations with its own task hub in storage.
 * Supported: activities with and without retry, fan-out/fan-in (Task.all/any), custom status.
 * Not supported (an orchestration that waits for one fails, naming it): sub-orchestrations,
 * timers, external events, entities, HTTP calls, continue-as-new.
 */

/** History event types of the Durable Task framework (the numbers the library reads). */
const EventType = {
  ExecutionStarted: 0,
  TaskScheduled: 4,
  TaskCompleted: 5,
  TaskFailed: 6,
  TimerCreated: 10,
  TimerFired: 11,
  OrchestratorStarted: 12,
} as const;

/** Action types the library emits. */
const ActionType = { CallActivity: 0, CallActivityWithRetry: 1, WhenAny: 11, WhenAll: 12 } as const;

interface HistoryEvent {
  EventType: number;
  EventId: number;
  Timestamp: string;
  IsPlayed: boolean;
  [field: string]: unknown;
}

interface Action {
  actionType: number;
  functionName?: string;
  input?: unknown;
  retryOptions?: {
    firstRetryIntervalInMilliseconds: number;
    maxNumberOfAttempts: number;
    backoffCoefficient?: number;
    maxRetryIntervalInMilliseconds?: number;
  };
  compoundActions?: Action[];
}

interface OrchestratorState {
  isDone: boolean;
  actions: Action[][];
  output?: unknown;
  error?: string;
  customStatus?: unknown;
}

export type RuntimeStatus = 'Pending' | 'Running' | 'Completed' | 'Failed';

export interface InstanceStatus {
  readonly name: string;
  readonly instanceId: string;
  readonly createdTime: string;
  readonly lastUpdatedTime: string;
  readonly input: unknown;
  readonly output: unknown;
  readonly runtimeStatus: RuntimeStatus;
  readonly customStatus: unknown;
}

interface Instance {
  name: string;
  instanceId: string;
  input: unknown;
  createdTime: string;
  lastUpdatedTime: string;
  runtimeStatus: RuntimeStatus;
  output: unknown;
  customStatus: unknown;
}

/** A finished attempt of an activity, or a fired retry timer, waiting to be written to the history. */
type Outcome =
  | {
      readonly kind: 'activity';
      readonly id: number;
      readonly action: Action;
      readonly attempt: number;
      readonly result?: unknown;
      readonly error?: Error;
    }
  | {
      readonly kind: 'timer';
      readonly id: number;
      readonly action: Action;
      readonly attempt: number;
      readonly fireAt: string;
    };

type Handler = (input: unknown, context: InvocationContext) => unknown;

const OUT_OF_PROC_DATA = '\n\n$OutOfProcData$:';

export class LocalDurableHost {
  private readonly orchestrators = new Map<string, Registration>();
  private readonly activities = new Map<string, Registration>();
  private readonly instances = new Map<string, Instance>();

  constructor(
    registrations: readonly Registration[],
    private readonly log: Logger,
    private readonly write: (line: string) => void,
  ) {
    for (const registration of registrations) {
      if (registration.trigger.type === 'orchestrationTrigger')
        this.orchestrators.set(registration.name, registration);
      if (registration.trigger.type === 'activityTrigger')
        this.activities.set(registration.name, registration);
    }
  }

  /**
   * The durable client binding's data, pointing the client at this host's webhooks with the host
   * key in their query (`code`), as the host's extension hands over its own URLs.
   */
  clientData(baseUrl: string, hostKey: string): Record<string, unknown> {
    const webhooks = `${baseUrl}/runtime/webhooks/durabletask/`;
    const query = `taskHub=local&connection=Storage&code=${encodeURIComponent(hostKey)}`;
    const instance = `${webhooks}instances/INSTANCEID`;
    return {
      taskHubName: 'local',
      creationUrls: {
        createNewInstancePostUri: `${webhooks}orchestrators/{functionName}[/{instanceId}]?${query}`,
        createAndWaitOnNewInstancePostUri: `${webhooks}orchestrators/{functionName}[/{instanceId}]?timeout={timeoutInSeconds}&pollingInterval={intervalInSeconds}&${query}`,
      },
      managementUrls: {
        id: 'INSTANCEID',
        statusQueryGetUri: `${instance}?${query}`,
        sendEventPostUri: `${instance}/raiseEvent/{eventName}?${query}`,
        terminatePostUri: `${instance}/terminate?reason={text}&${query}`,
        rewindPostUri: `${instance}/rewind?reason={text}&${query}`,
        purgeHistoryDeleteUri: `${instance}?${query}`,
        restartPostUri: `${instance}/restart?${query}`,
        suspendPostUri: `${instance}/suspend?reason={text}&${query}`,
        resumePostUri: `${instance}/resume?reason={text}&${query}`,
      },
      baseUrl: webhooks,
      requiredQueryStringParameters: query,
    };
  }

  hasOrchestration(name: string): boolean {
    return this.orchestrators.has(name);
  }

  /** Starts an orchestration; resolves with its instance id once it is scheduled. */
  start(name: string, input: unknown, instanceId: string = randomUUID().replaceAll('-', '')): string {
    const registration = this.orchestrators.get(name);
    if (registration === undefined) throw new Error(`no orchestration named ${name}`);
    if (this.instances.has(instanceId)) throw new Error(`instance ${instanceId} exists`);
    const now = new Date().toISOString();
    const instance: Instance = {
      name,
      instanceId,
      input,
      createdTime: now,
      lastUpdatedTime: now,
      runtimeStatus: 'Pending',
      output: null,
      customStatus: null,
    };
    this.instances.set(instanceId, instance);
    void this.run(instance, registration).catch((error: unknown) => {
      this.finish(instance, 'Failed', error instanceof Error ? error.message : String(error));
    });
    return instanceId;
  }

  status(instanceId: string): InstanceStatus | undefined {
    const instance = this.instances.get(instanceId);
    return instance && { ...instance };
  }

  private finish(instance: Instance, status: RuntimeStatus, output: unknown): void {
    instance.runtimeStatus = status;
    instance.output = output;
    instance.lastUpdatedTime = new Date().toISOString();
    this.log.info(
      { orchestration: instance.name, instanceId: instance.instanceId, status },
      'orchestration finished',
    );
  }

  /**
   * The episode loop: replay, schedule the new actions, wait for results, append them, replay.
   * Event ids must be the ones the library allocates: it numbers tasks in the order it creates
   * them while replaying, including the hidden timer and retry tasks of CallActivityWithRetry. So an
   * episode ends right after an event that makes the library create such a task (a retryable
   * failure, a retry timer firing), and the id is allocated here at that point, in the same order.
   */
  private async run(instance: Instance, registration: Registration): Promise<void> {
    const history: HistoryEvent[] = [];
    const event = (type: number, fields: Record<string, unknown> = {}): HistoryEvent => ({
      EventType: type,
      EventId: -1,
      Timestamp: new Date().toISOString(),
      IsPlayed: false,
      ...fields,
    });
    history.push(
      event(EventType.OrchestratorStarted),
      event(EventType.ExecutionStarted, { Name: instance.name }),
    );
    instance.runtimeStatus = 'Running';

    let nextId = 0;
    let actionsSeen = 0;
    let pending = 0;
    const finished: Outcome[] = [];
    let wake: (() => void) | undefined;
    const track = (outcome: Promise<Outcome>) => {
      pending++;
      void outcome.then((result) => {
        pending--;
        finished.push(result);
        wake?.();
      });
    };
    const schedule = (action: Action, attempt: number) => {
      const id = nextId++;
      history.push(event(EventType.TaskScheduled, { EventId: id, Name: action.functionName }));
      track(this.callActivity(id, action, attempt));
    };

    for (;;) {
      const state = await this.replay(registration, instance, history);
      instance.customStatus = state.customStatus ?? null;
      instance.lastUpdatedTime = new Date().toISOString();
      if (state.isDone) return this.finish(instance, 'Completed', state.output ?? null);
      if (state.error !== undefined) return this.finish(instance, 'Failed', state.error);

      const actions = flatten(state.actions.flat());
      for (const action of actions.slice(actionsSeen)) {
        if (
          action.actionType !== ActionType.CallActivity &&
          action.actionType !== ActionType.CallActivityWithRetry
        ) {
          throw new Error(`the local runtime does not run durable action type ${action.actionType}`);
        }
        schedule(action, 1);
      }
      actionsSeen = actions.length;

      if (finished.length === 0) {
        if (pending === 0)
          throw new Error('the orchestration waits for something the local runtime does not run');
        await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
      }
      // One episode takes every result that is in, so a fan-out of n activities needs far fewer
      // than n replays.
      history.push(event(EventType.OrchestratorStarted));
      while (finished.length > 0) {
        const outcome = finished.shift() as Outcome;
        const retry = outcome.action.retryOptions;
        if (outcome.kind === 'timer') {
          history.push(event(EventType.TimerFired, { TimerId: outcome.id, FireAt: outcome.fireAt }));
          // Attempts left: the library now creates the next attempt's task (the next id).
          if (retry !== undefined && outcome.attempt < retry.maxNumberOfAttempts)
            schedule(outcome.action, outcome.attempt + 1);
          break;
        }
        if (outcome.error === undefined) {
          history.push(
            event(EventType.TaskCompleted, {
              TaskScheduledId: outcome.id,
              Result: outcome.result === undefined ? undefined : JSON.stringify(outcome.result),
            }),
          );
          continue;
        }
        history.push(
          event(EventType.TaskFailed, {
            TaskScheduledId: outcome.id,
            Reason: outcome.error.message,
            Details: outcome.error.stack,
          }),
        );
        if (outcome.action.actionType !== ActionType.CallActivityWithRetry || retry === undefined) continue;
        // A retryable failure: the library waits on a timer (also after the last attempt, then
        // fails the task). The timer is the next id.
        const timerId = nextId++;
        const delay = outcome.attempt >= retry.maxNumberOfAttempts ? 0 : retryDelay(retry, outcome.attempt);
        const fireAt = new Date(Date.now() + delay).toISOString();
        history.push(event(EventType.TimerCreated, { EventId: timerId, FireAt: fireAt }));
        track(
          new Promise<Outcome>((resolve) =>
            setTimeout(
              () =>
                resolve({
                  kind: 'timer',
                  id: timerId,
                  action: outcome.action,
                  attempt: outcome.attempt,
                  fireAt,
                }),
              delay,
            ),
          ),
        );
        break;
      }
    }
  }

  /** Calls the orchestrator with the whole history, as the extension does on every episode. */
  private async replay(
    registration: Registration,
    instance: Instance,
    history: HistoryEvent[],
  ): Promise<OrchestratorState> {
    const context = new InvocationContext({
      invocationId: randomUUID(),
      functionName: registration.name,
      logHandler: (_level, ...args) => this.write(args.map(String).join(' ')),
    });
    (context as unknown as { df: undefined }).df = undefined;
    const payload = {
      history,
      input: instance.input,
      instanceId: instance.instanceId,
      isReplaying: history.length > 2,
      parentInstanceId: undefined,
      upperSchemaVersion: 3,
      upperSchemaVersionNew: 3,
    };
    try {
      return (await (registration.handler as Handler)(payload, context)) as OrchestratorState;
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      const marker = message.indexOf(OUT_OF_PROC_DATA);
      if (marker < 0) throw error;
      const state = JSON.parse(message.slice(marker + OUT_OF_PROC_DATA.length)) as OrchestratorState;
      return { ...state, isDone: false, error: state.error ?? message.slice(0, marker) };
    }
  }

  /** Runs one attempt of an activity; never rejects (a failure is an outcome with an error). */
  private async callActivity(id: number, action: Action, attempt: number): Promise<Outcome> {
    const name = action.functionName ?? '';
    const registration = this.activities.get(name);
    try {
      if (registration === undefined) throw new Error(`no activity named ${name}`);
      const context = new InvocationContext({
        invocationId: randomUUID(),
        functionName: name,
        logHandler: (_level, ...args) => this.write(args.map(String).join(' ')),
      });
      // String inputs arrive JSON-encoded in actions (the library's processInput); objects as they are.
      const input = typeof action.input === 'string' ? (JSON.parse(action.input) as unknown) : action.input;
      const result = await (registration.handler as Handler)(input, context);
      return { kind: 'activity', id, action, attempt, result };
    } catch (error) {
      return {
        kind: 'activity',
        id,
        action,
        attempt,
        error: error instanceof Error ? error : new Error(String(error)),
      };
    }
  }
}

function flatten(actions: readonly Action[]): Action[] {
  return actions.flatMap((action) =>
    action.actionType === ActionType.WhenAll || action.actionType === ActionType.WhenAny
      ? flatten(action.compoundActions ?? [])
      : [action],
  );
}

function retryDelay(retry: NonNullable<Action['retryOptions']>, attempt: number): number {
  const delay = retry.firstRetryIntervalInMilliseconds * (retry.backoffCoefficient ?? 1) ** (attempt - 1);
  return Math.min(delay, retry.maxRetryIntervalInMilliseconds ?? Number.MAX_SAFE_INTEGER);
}
