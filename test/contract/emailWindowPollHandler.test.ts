import { randomUUID } from 'node:crypto';

import { InvocationContext, type Timer } from '@azure/functions';
import { afterEach, describe, expect, it, vi } from 'vitest';

import { AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import { EMAIL_CURSOR_KEY } from '../../shared/coordination/emailCursor';
import type { ConfigurationError } from '../../shared/protocol/errors';
import { azurite } from '../support/azurite';
import { tempDir } from '../support/cleanup';
import { drainQueue, freshQueue } from '../support/coordinationSupport';

/**
 * The exported `emailWindowPoll` timer handler, called directly as the host would call it, with the
 * app's own services built from settings (local backend, the run's Azurite queue).
 */

const SETTINGS = ['CAIRN_API_KEYS', 'CAIRN_DATA_DIR', 'CAIRN_QUEUE_ENDPOINT', 'CAIRN_STORAGE_ACCOUNT_KEY'];
const TIMER = { isPastDue: false } as unknown as Timer;
const saved = Object.fromEntries(SETTINGS.map((name) => [name, process.env[name]]));

/** Fresh modules (so getServices reads these settings), a fresh data folder, and the handler. */
async function appWith(settings: Record<string, string | undefined>) {
  vi.resetModules();
  for (const name of [...SETTINGS, 'CAIRN_EMAIL_WINDOW_QUEUE']) delete process.env[name];
  Object.assign(process.env, {
    CAIRN_API_KEYS: `t:${'a'.repeat(64)}`,
    CAIRN_DATA_DIR: tempDir('timer'),
  });
  for (const [name, value] of Object.entries(settings)) if (value !== undefined) process.env[name] = value;
  const { emailWindowPoll } = await import('../../functions/emailWindowPoll');
  const { getServices } = await import('../../shared/services');
  const { initializeEmailPolling } = await import('../../shared/coordination/emailWindowPoll');
  const services = getServices();
  const initialise = async (tenant: string, cursor: string) =>
    (
      await initializeEmailPolling(
        services.emailPollRegistry,
        services.kvStores.forTenant(tenant),
        tenant,
        cursor,
      )
    ).outcome;
  return { emailWindowPoll, services, initialise };
}

const context = () => new InvocationContext({ invocationId: randomUUID(), functionName: 'emailWindowPoll' });

describe('the emailWindowPoll timer handler', () => {
  afterEach(() => {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  });

  it("claims each registered tenant's window and puts it on CAIRN_EMAIL_WINDOW_QUEUE", async () => {
    const queue = await freshQueue();
    const { emailWindowPoll, initialise } = await appWith({
      CAIRN_QUEUE_ENDPOINT: azurite().queueEndpoint,
      CAIRN_STORAGE_ACCOUNT_KEY: AZURITE_ACCOUNT_KEY,
      CAIRN_EMAIL_WINDOW_QUEUE: queue.name,
    });
    const from = new Date(Date.now() - 3_600_000).toISOString();
    expect(await initialise('alpha', from)).toBe('created');
    expect(await initialise('beta', from)).toBe('created');
    await emailWindowPoll(TIMER, context());
    const messages = await drainQueue(queue);
    expect(messages.map((m) => m.tenant).sort()).toEqual(['alpha', 'beta']);
    for (const message of messages) {
      expect(message.from).toBe(from);
      expect(Date.parse(message.to)).toBeGreaterThan(Date.parse(from));
      expect(Object.keys(message).sort()).toEqual(['claimId', 'from', 'tenant', 'to']);
    }
  });

  it('without CAIRN_QUEUE_ENDPOINT claims nothing and fails naming the setting', async () => {
    const { emailWindowPoll, initialise, services } = await appWith({});
    // No tenant registered: nothing to do, nothing to complain about.
    await expect(emailWindowPoll(TIMER, context())).resolves.toBeUndefined();
    const from = new Date(Date.now() - 3_600_000).toISOString();
    expect(await initialise('alpha', from)).toBe('created');
    const before = await services.kvStores.forTenant('alpha').read(EMAIL_CURSOR_KEY);
    const failure = await emailWindowPoll(TIMER, context()).then(
      () => undefined,
      (error: unknown) => error,
    );
    // Modules were reset, so the class is compared by name: the fresh module graph has its own.
    expect((failure as ConfigurationError).name).toBe('ConfigurationError');
    expect((failure as ConfigurationError).setting).toBe('CAIRN_QUEUE_ENDPOINT');
    expect(await services.kvStores.forTenant('alpha').read(EMAIL_CURSOR_KEY)).toEqual(before);
  });
});
