import type { InvocationContext, Timer } from '@azure/functions';

import { type Logger, processLogger, withLogSink } from '#shared/logging';
import { getServices } from '#shared/services';

import { logSinkOf } from './http/pipeline';

/**
 * A timer's handler, as {@link httpHandler} is a route's: `run` gets a child logger bound to the
 * invocation and the function's name (its lines go to the host's logger of that invocation), and a
 * run the host starts late (`isPastDue`: the app was down or busy at the scheduled time) is logged
 * as a warning before `run` starts, so that a missed schedule shows in the logs.
 */
export function timerHandler<R>(
  name: string,
  run: (timer: Timer, context: InvocationContext, log: Logger) => Promise<R>,
): (timer: Timer, context: InvocationContext) => Promise<R> {
  return (timer, context) =>
    withLogSink(context.invocationId, logSinkOf(context), () => {
      const log = processLogger(getServices().config.logLevel).child({
        invocationId: context.invocationId,
        function: name,
      });
      if (timer.isPastDue) log.warn({ isPastDue: true }, `timer ${name} is past due: it runs late`);
      return run(timer, context, log);
    });
}
