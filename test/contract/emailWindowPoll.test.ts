import { randomUUID } from 'node:crypto';

import type { QueueClient } from '@azure/storage-queue';
import { describe, expect, it } from 'vitest';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import { EMAIL_CURSOR_KEY, readEmailCursor } from '../../shared/coordination/emailCursor';
import { EmailPollTenantRegistry } from '../../shared/coordination/emailPollTenants';
import {
  initializeEmailPolling,
  pollEmailWindows,
  type TenantPollReport,
  WINDOW_LEASE_MS,
} from '../../shared/coordination/emailWindowPoll';
import type { EmailWindowQueue } from '../../shared/coordination/emailWindowQueue';
import { createLogger } from '../../shared/logging';
import { StorageUnavailableError } from '../../shared/protocol/errors';
import { AzureEmailWindowQueue } from '../../shared/storage/azure/azureEmailWindowQueue';
import { createQueueServiceClient } from '../../shared/storage/azure/clients';
import type { KeyValueStore, KeyValueStoreFactory } from '../../shared/storage/keyValueStore';
import { azurite } from '../support/azurite';
import {
  BACKENDS,
  drainQueue,
  type Faults,
  FaultyStore,
  faultyStores,
  freshQueue,
  realStores,
} from '../support/coordinationSupport';
import { STORAGE_TIMEOUT_MS } from '../support/timeouts';

/**
 * The emailWindowPoll timer's work over real stores and the run's Azurite queue: each window is
 * enqueued exactly once however runs overlap, fail, die or time out; doubtful state claims nothing.
 */

const T0 = new Date('2026-11-29T21:00:00.000Z');
const at = (ms: number) => new Date(T0.getTime() + ms);
const MINUTE = 60_000;

interface Setup {
  stores: KeyValueStoreFactory;
  registry: EmailPollTenantRegistry;
  queue: EmailWindowQueue;
  inspect: QueueClient;
  logLines: string[];
  tenants: string[];
}

async function setup(backend: (typeof BACKENDS)[number], tenantCount: number, startAt = T0): Promise<Setup> {
  const stores = realStores(backend);
  const registry = new EmailPollTenantRegistry(stores);
  const inspect = await freshQueue();
  const client = createQueueServiceClient(
    { endpoint: azurite().queueEndpoint, accountName: AZURITE_ACCOUNT, accountKey: AZURITE_ACCOUNT_KEY },
    STORAGE_TIMEOUT_MS,
  );
  const queue = new AzureEmailWindowQueue(client.getQueueClient(inspect.name), STORAGE_TIMEOUT_MS);
  const tenants = Array.from({ length: tenantCount }, (_, i) => `tenant${i}-${randomUUID().slice(0, 6)}`);
  for (const tenant of tenants) {
    const init = await initializeEmailPolling(
      registry,
      stores.forTenant(tenant),
      tenant,
      startAt.toISOString(),
    );
    expect(init.outcome).toBe('created');
  }
  return { stores, registry, queue, inspect, logLines: [], tenants };
}

function run(
  s: Setup,
  options: { now?: () => Date; stores?: KeyValueStoreFactory; queue?: EmailWindowQueue } = {},
) {
  return pollEmailWindows({
    kvStores: options.stores ?? s.stores,
    registry: s.registry,
    queue: options.queue ?? s.queue,
    log: createLogger('info', (line) => s.logLines.push(line)),
    ...(options.now === undefined ? {} : { now: options.now }),
  });
}

const outcomesOf = (reports: TenantPollReport[][], tenant: string) =>
  reports.map((runReports) => runReports.find((report) => report.tenant === tenant)?.outcome);

/** A queue whose sends fail (without sending) while `failing()` says so. */
function failingQueue(inner: EmailWindowQueue, failing: () => boolean): EmailWindowQueue {
  return {
    send: (message) =>
      failing() ? Promise.reject(new StorageUnavailableError('injected send failure')) : inner.send(message),
  };
}

function withFaults(s: Setup, tenant: string, faults: Faults): KeyValueStoreFactory {
  return faultyStores(s.stores, (t, store) => (t === tenant ? new FaultyStore(store, faults) : store));
}

const cursorKey = (key: string) => key === EMAIL_CURSOR_KEY;

describe.each(BACKENDS)('emailWindowPoll on the %s backend', (backend) => {
  it("enqueues each tenant's window exactly once when 8 runs overlap at the same instant", async () => {
    const s = await setup(backend, 5);
    const now = at(MINUTE);
    const reports = await Promise.all(Array.from({ length: 8 }, () => run(s, { now: () => now })));
    const messages = await drainQueue(s.inspect);
    // On failure, say what each run reported for each tenant (a timeout shows as claim_unknown).
    const outcomes = JSON.stringify(s.tenants.map((tenant) => [tenant, outcomesOf(reports, tenant)]));
    expect(messages.map((m) => m.tenant).sort(), outcomes).toEqual([...s.tenants].sort());
    for (const tenant of s.tenants) {
      const message = messages.find((m) => m.tenant === tenant);
      expect(message).toEqual({
        tenant,
        from: T0.toISOString(),
        to: now.toISOString(),
        claimId: expect.any(String) as string,
      });
      expect(outcomesOf(reports, tenant).filter((o) => o === 'enqueued')).toHaveLength(1);
      expect(
        outcomesOf(reports, tenant).every((o) => ['enqueued', 'lost', 'nothing_to_claim'].includes(o ?? '')),
      ).toBe(true);
      expect(await readEmailCursor(s.stores.forTenant(tenant))).toMatchObject({
        outcome: 'present',
        cursor: now.toISOString(),
        pendingWindows: [],
        recentClaims: [message?.claimId],
      });
    }
    // Each outcome is logged with its tenant.
    for (const tenant of s.tenants) {
      expect(
        s.logLines.some(
          (line) => line.includes(`"tenant":"${tenant}"`) && line.includes('"outcome":"enqueued"'),
        ),
      ).toBe(true);
    }
  });

  it('enqueues contiguous windows, each once, when 8 runs overlap on a moving clock', async () => {
    const start = new Date(Date.now() - 60 * MINUTE);
    const s = await setup(backend, 5, start);
    const reports = await Promise.all(Array.from({ length: 8 }, () => run(s)));
    const messages = await drainQueue(s.inspect);
    expect(messages).toHaveLength(reports.flat().flatMap((report) => report.enqueued).length);
    expect(new Set(messages.map((m) => m.claimId)).size).toBe(messages.length);
    for (const tenant of s.tenants) {
      const windows = messages.filter((m) => m.tenant === tenant).sort((a, b) => (a.from < b.from ? -1 : 1));
      expect(windows.length).toBeGreaterThanOrEqual(1);
      expect(windows[0]?.from).toBe(start.toISOString());
      for (let i = 1; i < windows.length; i++) expect(windows[i]?.from).toBe(windows[i - 1]?.to);
      const cursor = await readEmailCursor(s.stores.forTenant(tenant));
      expect(cursor).toMatchObject({ cursor: windows.at(-1)?.to, pendingWindows: [] });
    }
  });

  it('keeps a window whose enqueue failed after a won claim, and the next run sends it, once', async () => {
    const s = await setup(backend, 1);
    const [tenant] = s.tenants as [string];
    let failing = true;
    const first = await run(s, { now: () => at(MINUTE), queue: failingQueue(s.queue, () => failing) });
    expect(first[0]?.outcome).toBe('enqueue_failed');
    expect(await drainQueue(s.inspect)).toEqual([]);
    const parked = await readEmailCursor(s.stores.forTenant(tenant));
    expect(parked).toMatchObject({ cursor: at(MINUTE).toISOString() });
    // The lease was released at once: the next run need not wait for it.
    expect(parked.pendingWindows).toEqual([
      {
        from: T0.toISOString(),
        to: at(MINUTE).toISOString(),
        claimId: first[0]?.claimId,
        leaseExpires: at(MINUTE).toISOString(),
      },
    ]);

    failing = false;
    const second = await Promise.all(Array.from({ length: 4 }, () => run(s, { now: () => at(MINUTE) })));
    expect(second.flat().filter((r) => r.outcome === 'enqueued')).toHaveLength(1);
    expect(await drainQueue(s.inspect)).toEqual([
      { tenant, from: T0.toISOString(), to: at(MINUTE).toISOString(), claimId: first[0]?.claimId },
    ]);
    expect((await readEmailCursor(s.stores.forTenant(tenant))).pendingWindows).toEqual([]);
    expect((await run(s, { now: () => at(MINUTE) }))[0]?.outcome).toBe('nothing_to_claim');
    expect(await drainQueue(s.inspect)).toEqual([]);
  });

  it('leaves the window of a run that died after its claim leased until the lease ends; then one run sends it', async () => {
    const s = await setup(backend, 1);
    const [tenant] = s.tenants as [string];
    // The run "dies" after its claim: its send fails and so does every later write of the cursor.
    const dying = withFaults(s, tenant, { failWrites: (key, n) => cursorKey(key) && n > 1 });
    const died = await run(s, {
      now: () => at(MINUTE),
      stores: dying,
      queue: failingQueue(s.queue, () => true),
    });
    expect(died[0]?.outcome).toBe('enqueue_failed');
    const deadWindow = {
      tenant,
      from: T0.toISOString(),
      to: at(MINUTE).toISOString(),
      claimId: died[0]?.claimId,
    };

    // Within the lease, later runs claim new windows but leave the dead run's window alone.
    const within = at(2 * MINUTE);
    await Promise.all(Array.from({ length: 4 }, () => run(s, { now: () => within })));
    expect(await drainQueue(s.inspect)).toEqual([
      {
        tenant,
        from: at(MINUTE).toISOString(),
        to: within.toISOString(),
        claimId: expect.any(String) as string,
      },
    ]);
    expect((await readEmailCursor(s.stores.forTenant(tenant))).pendingWindows).toHaveLength(1);

    // After the lease, exactly one of 8 overlapping runs takes it over and sends it.
    const after = at(MINUTE + WINDOW_LEASE_MS + 1);
    await Promise.all(Array.from({ length: 8 }, () => run(s, { now: () => after })));
    const messages = await drainQueue(s.inspect);
    expect(messages.filter((m) => m.claimId === deadWindow.claimId)).toEqual([deadWindow]);
    expect(messages.filter((m) => m.claimId !== deadWindow.claimId)).toEqual([
      { tenant, from: within.toISOString(), to: after.toISOString(), claimId: expect.any(String) as string },
    ]);
    expect((await readEmailCursor(s.stores.forTenant(tenant))).pendingWindows).toEqual([]);
  });

  it('settles a timed-out claim whose write landed as ours and enqueues its window once', async () => {
    const s = await setup(backend, 1);
    const [tenant] = s.tenants as [string];
    const timingOut = withFaults(s, tenant, { landThenTimeout: (key, n) => cursorKey(key) && n === 1 });
    const reports = await run(s, { now: () => at(MINUTE), stores: timingOut });
    expect(reports[0]?.outcome).toBe('enqueued');
    expect(await drainQueue(s.inspect)).toEqual([
      { tenant, from: T0.toISOString(), to: at(MINUTE).toISOString(), claimId: reports[0]?.claimId },
    ]);
    expect(await readEmailCursor(s.stores.forTenant(tenant))).toMatchObject({
      cursor: at(MINUTE).toISOString(),
      pendingWindows: [],
    });
  });

  it('enqueues nothing for a claim it cannot settle; the window, if it landed, is sent after the lease', async () => {
    const s = await setup(backend, 1);
    const [tenant] = s.tenants as [string];
    let reads = 0;
    const blind = withFaults(s, tenant, {
      landThenTimeout: (key) => cursorKey(key),
      // The first read (before the claim) works; the read-back of settle fails.
      failReads: (key) => cursorKey(key) && ++reads > 1,
    });
    const unknown = await run(s, { now: () => at(MINUTE), stores: blind });
    expect(unknown[0]?.outcome).toBe('claim_unknown');
    expect(await drainQueue(s.inspect)).toEqual([]);
    const after = at(MINUTE + WINDOW_LEASE_MS + 1);
    await Promise.all(Array.from({ length: 4 }, () => run(s, { now: () => after })));
    const messages = await drainQueue(s.inspect);
    expect(messages.filter((m) => m.claimId === unknown[0]?.claimId)).toEqual([
      { tenant, from: T0.toISOString(), to: at(MINUTE).toISOString(), claimId: unknown[0]?.claimId },
    ]);
    expect(messages).toHaveLength(2);
  });

  it('fails closed: a corrupt or unreadable cursor claims nothing, enqueues nothing, overwrites nothing', async () => {
    const s = await setup(backend, 3);
    const [corrupt, unreadable, healthy] = s.tenants as [string, string, string];
    await s.stores.forTenant(corrupt).write(EMAIL_CURSOR_KEY, Buffer.from('{"cursor":"not a time"}'));
    const corruptBefore = await s.stores.forTenant(corrupt).read(EMAIL_CURSOR_KEY);
    const unreadableBefore = await s.stores.forTenant(unreadable).read(EMAIL_CURSOR_KEY);
    // One wrapper per tenant, shared by the runs, so that it counts every write any run tried.
    const watched = new Map(
      s.tenants.map((tenant) => [
        tenant,
        new FaultyStore(s.stores.forTenant(tenant), {
          failReads: (key) => tenant === unreadable && cursorKey(key),
        }),
      ]),
    );
    const stores = faultyStores(s.stores, (tenant, store) => watched.get(tenant) ?? store);
    const reports = await Promise.all(
      Array.from({ length: 3 }, () => run(s, { stores, now: () => at(MINUTE) })),
    );
    for (const tenant of [corrupt, unreadable]) {
      expect(outcomesOf(reports, tenant)).toEqual([
        'cursor_unresolved',
        'cursor_unresolved',
        'cursor_unresolved',
      ]);
      expect(watched.get(tenant)?.writesTo(EMAIL_CURSOR_KEY)).toBe(0);
    }
    expect((await drainQueue(s.inspect)).map((m) => m.tenant)).toEqual([healthy]);
    expect(await s.stores.forTenant(corrupt).read(EMAIL_CURSOR_KEY)).toEqual(corruptBefore);
    expect(await s.stores.forTenant(unreadable).read(EMAIL_CURSOR_KEY)).toEqual(unreadableBefore);
    expect(
      s.logLines.some((line) => line.includes(`"tenant":"${corrupt}"`) && line.includes('cursor_unresolved')),
    ).toBe(true);
  });

  it('skips a registered tenant whose cursor is absent, without re-creating it', async () => {
    const s = await setup(backend, 1);
    const [tenant] = s.tenants as [string];
    const store: KeyValueStore = s.stores.forTenant(tenant);
    await store.delete(EMAIL_CURSOR_KEY);
    expect((await run(s, { now: () => at(MINUTE) }))[0]?.outcome).toBe('cursor_absent');
    expect(await store.read(EMAIL_CURSOR_KEY)).toBeNull();
    expect(await drainQueue(s.inspect)).toEqual([]);
  });
});

describe.each(BACKENDS)('the tenant registry on the %s backend', (backend) => {
  it('lists every registered tenant once across pages, and registering twice changes nothing', async () => {
    const stores = realStores(backend);
    const registry = new EmailPollTenantRegistry(stores);
    const tenants = Array.from({ length: 7 }, (_, i) => `r${i}.${randomUUID().slice(0, 4)}`).sort();
    await Promise.all(tenants.map((tenant) => registry.register(tenant)));
    await registry.register(tenants[0] ?? '');
    const listed: string[] = [];
    for await (const tenant of registry.tenants(3)) listed.push(tenant);
    expect(listed).toEqual(tenants);
    // No tenant can reach the registry: it is not a tenant's key space.
    expect((await stores.forTenant(tenants[0] ?? '').list({ limit: 100 })).keys).toEqual([]);
  });

  it('registers a tenant before creating its cursor, and init repairs a failed registration', async () => {
    const stores = realStores(backend);
    const registry = new EmailPollTenantRegistry(stores);
    // A registry whose writes fail (its namespace is the only one wrapped here).
    const failingRegistry = new EmailPollTenantRegistry({
      kind: stores.kind,
      maxValueBytes: stores.maxValueBytes,
      forTenant: (tenant) => new FaultyStore(stores.forTenant(tenant), { failWrites: () => true }),
      forSpace: (space, tenant) => stores.forSpace(space, tenant),
    });
    const store = stores.forTenant('t1');
    expect((await initializeEmailPolling(failingRegistry, store, 't1', T0.toISOString())).outcome).toBe(
      'registration_failed',
    );
    expect(await store.read(EMAIL_CURSOR_KEY)).toBeNull();
    expect((await initializeEmailPolling(registry, store, 't1', T0.toISOString())).outcome).toBe('created');
    expect((await initializeEmailPolling(registry, store, 't1', T0.toISOString())).outcome).toBe('exists');
    const listed: string[] = [];
    for await (const tenant of registry.tenants()) listed.push(tenant);
    expect(listed).toEqual(['t1']);
  });
});
