import { app } from '@azure/functions';

import { emailPollScheduleFrom } from '#shared/config';
import { isPollFailure, pollEmailWindows } from '#shared/coordination/emailWindowPoll';
import { ConfigurationError } from '#shared/protocol/errors';
import { getServices } from '#shared/services';

import { timerHandler } from './timer';

/**
 * The `emailWindowPoll` timer (docs/coordination.md): for every tenant that initialised its email cursor,
 * claims the window from the cursor to now and enqueues it on CAIRN_EMAIL_WINDOW_QUEUE. Safe to run
 * twice or on two instances at once (see shared/coordination/emailWindowPoll.ts). Each tenant's
 * outcome is logged with the tenant; the invocation fails (throws) when any tenant needs attention,
 * after every tenant was polled.
 */
export const emailWindowPoll = timerHandler(
  'emailWindowPoll',
  async (_timer, _context, log): Promise<void> => {
    const services = getServices();
    const queue = services.emailWindowQueue;
    if (queue === undefined) {
      // Nobody to poll: nothing is lost, and an app without a queue (tests, a kv-only setup) stays quiet.
      const first = await services.emailPollRegistry.tenants(1).next();
      if (first.done === true) return;
      // Claiming a window that cannot be enqueued would only park it: claim nothing and say why.
      throw new ConfigurationError(
        'CAIRN_QUEUE_ENDPOINT',
        'is not set: the emailWindowPoll timer cannot enqueue email windows, so it claimed nothing',
      );
    }
    const reports = await pollEmailWindows({
      kvStores: services.kvStores,
      registry: services.emailPollRegistry,
      queue,
      log,
    });
    const failed = reports.filter((report) => isPollFailure(report.outcome));
    log.info(
      { tenants: reports.length, failed: failed.length, enqueued: reports.flatMap((r) => r.enqueued).length },
      'email window poll finished',
    );
    if (failed.length > 0) {
      throw new Error(
        `email window poll: ${failed.length} of ${reports.length} tenants need attention: ` +
          failed.map((report) => `${report.tenant} (${report.outcome})`).join(', '),
      );
    }
  },
);

// The schedule is passed as a value (default every minute), not as %CAIRN_EMAIL_POLL_SCHEDULE%:
// the host has no default for a %SETTING% reference, and an invalid setting stops the app here.
app.timer('emailWindowPoll', { schedule: emailPollScheduleFrom(), handler: emailWindowPoll });
