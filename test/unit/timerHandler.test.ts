import { randomUUID } from 'node:crypto';

import { InvocationContext, type Timer } from '@azure/functions';
import { afterEach, describe, expect, it, vi } from 'vitest';

import { tempDir } from '../support/cleanup';

/**
 * The timer wrapper: each run gets a child logger bound to its invocation and function, whose lines
 * reach the host's logger of that invocation, and a late run (`isPastDue`) is logged as a warning.
 */

const SETTINGS = ['CAIRN_API_KEYS', 'CAIRN_DATA_DIR', 'CAIRN_LOG_LEVEL'];
const saved = Object.fromEntries(SETTINGS.map((name) => [name, process.env[name]]));

async function wrapperWithServices() {
  vi.resetModules();
  for (const name of SETTINGS) delete process.env[name];
  Object.assign(process.env, {
    CAIRN_API_KEYS: `t:${'b'.repeat(64)}`,
    CAIRN_DATA_DIR: tempDir('timer-wrapper'),
  });
  return (await import('../../functions/timer')).timerHandler;
}

function hostContext(functionName: string) {
  const lines: { level: string; entry: Record<string, unknown> }[] = [];
  const context = new InvocationContext({
    invocationId: randomUUID(),
    functionName,
    logHandler: (level, ...args) =>
      lines.push({ level, entry: JSON.parse(String(args[0])) as Record<string, unknown> }),
  });
  return { context, lines };
}

describe('timerHandler', () => {
  afterEach(() => {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  });

  it("gives the run a child logger bound to the invocation, logged to the host's invocation logger", async () => {
    const timerHandler = await wrapperWithServices();
    const { context, lines } = hostContext('wrappedOnTime');
    const handler = timerHandler('wrappedOnTime', async (_timer, _context, log) => {
      log.info({ done: 3 }, 'ran');
      return 'result';
    });
    expect(await handler({ isPastDue: false } as unknown as Timer, context)).toBe('result');
    expect(lines).toHaveLength(1);
    expect(lines[0]?.level).toBe('information');
    expect(lines[0]?.entry).toMatchObject({
      invocationId: context.invocationId,
      function: 'wrappedOnTime',
      done: 3,
      msg: 'ran',
    });
  });

  it('logs a warning with isPastDue before a late run', async () => {
    const timerHandler = await wrapperWithServices();
    const { context, lines } = hostContext('wrappedLate');
    const handler = timerHandler('wrappedLate', async (_timer, _context, log) => {
      log.info('ran');
    });
    await handler({ isPastDue: true } as unknown as Timer, context);
    expect(lines.map((line) => line.level)).toEqual(['warning', 'information']);
    expect(lines[0]?.entry).toMatchObject({
      invocationId: context.invocationId,
      function: 'wrappedLate',
      isPastDue: true,
    });
  });
});
