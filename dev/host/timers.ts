import { Cron } from 'croner';

import { errorSummary, type Logger } from '../../shared/logging';
import type { InvocationContexts } from './invocations';
import type { Registration } from './registrations';

type TimerFunction = (timer: unknown, context: unknown) => Promise<unknown>;

/**
 * The app's timer triggers on their NCRONTAB schedules (a `%SETTING%` schedule is read from the
 * app settings, as on the host), also run on demand (`POST /admin/functions/<name>`). Like the
 * host, one process never runs a timer twice at once: a run asked for while one is running joins it.
 */
export class TimerScheduler {
  private readonly timers: Map<string, Registration>;
  private readonly running = new Map<string, Promise<void>>();
  private readonly crons: Cron[];

  constructor(
    registrations: readonly Registration[],
    private readonly contexts: InvocationContexts,
    private readonly log: Logger,
  ) {
    this.timers = new Map(
      registrations
        .filter((registration) => registration.trigger.type === 'timerTrigger')
        .map((registration) => [registration.name, registration]),
    );
    this.crons = [...this.timers.values()].map((registration) => {
      const schedule = resolveSetting(String(registration.trigger.schedule ?? ''));
      const cron: Cron = new Cron(schedule, { catch: true }, () => void this.run(registration.name, cron));
      if (registration.trigger.runOnStartup === true) void this.run(registration.name, cron);
      return cron;
    });
  }

  has(name: string): boolean {
    return this.timers.has(name);
  }

  /** Runs the timer now; resolves when it has finished (a failure is logged, not thrown). */
  run(name: string, scheduled?: Cron): Promise<void> {
    const registration = this.timers.get(name);
    if (registration === undefined) return Promise.reject(new Error(`no timer function ${name}`));
    const previous = this.running.get(name);
    if (previous !== undefined) return previous;
    const timer = {
      isPastDue: false,
      schedule: { adjustForDST: true },
      scheduleStatus: {
        last: new Date().toISOString(),
        next: scheduled?.nextRun()?.toISOString(),
        lastUpdated: new Date().toISOString(),
      },
    };
    const run = (async () => {
      try {
        await (registration.handler as TimerFunction)(timer, this.contexts.contextFor(registration));
      } catch (error) {
        this.log.error({ function: name, err: errorSummary(error) }, 'timer function failed');
      } finally {
        this.running.delete(name);
      }
    })();
    this.running.set(name, run);
    return run;
  }

  /** Stops the schedules and waits for the runs in progress. */
  async stop(): Promise<void> {
    for (const cron of this.crons) cron.stop();
    await Promise.allSettled(this.running.values());
  }
}

/** `%NAME%` in a binding is an app setting, as on the host. */
function resolveSetting(value: string): string {
  return value.replace(/%([^%]+)%/g, (_match, name: string) => {
    const setting = process.env[name];
    if (setting === undefined || setting === '') throw new Error(`app setting ${name} is not set`);
    return setting;
  });
}
