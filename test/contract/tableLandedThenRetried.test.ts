import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import { factId } from '../../shared/memory/layout';
import { MemoryFacts } from '../../shared/memory/memory';
import { StorageUnavailableError } from '../../shared/protocol/errors';
import { createTableClient } from '../../shared/storage/azure/clients';
import { TableMemoryStore } from '../../shared/storage/azure/tableMemoryStore';
import { azurite } from '../support/azurite';
import { type FaultyProxy, startFaultyProxy } from '../support/faultyProxy';
import { azuriteTable, freshTableName } from '../support/tables';
import { STORAGE_TIMEOUT_MS } from '../support/timeouts';

/**
 * The Table twin of landedThenRetried.test.ts: a proxy in front of Azurite's Table endpoint that
 * forwards a request, lets Azurite commit it, and then drops the connection instead of returning
 * the answer. The Table client is the production one (createTableClient), so the SDK would send the
 * identical transaction again, which meets 409/412 because the first one landed.
 */
let proxy: FaultyProxy;

beforeAll(async () => {
  proxy = await startFaultyProxy(azurite().tableEndpoint);
});
afterEach(() => proxy.reset());
afterAll(() => proxy.close());

const T = { tenant: 't1' };

/** The production Table client through the proxy, and a direct one to look at what is stored. */
async function world() {
  const name = freshTableName();
  const truthClient = azuriteTable(azurite().tableEndpoint, name);
  await truthClient.createTable();
  const viaProxy = createTableClient(
    { endpoint: proxy.endpoint, accountName: AZURITE_ACCOUNT, accountKey: AZURITE_ACCOUNT_KEY },
    name,
  );
  const truth = new TableMemoryStore(truthClient, STORAGE_TIMEOUT_MS);
  return {
    memory: new MemoryFacts({ store: new TableMemoryStore(viaProxy, STORAGE_TIMEOUT_MS) }),
    truth,
    cleanup: () => truthClient.deleteTable(),
  };
}

/** A transaction (`$batch`) that Azurite committed: 202, and no operation in it failed. */
const landedBatch = (method: string, path: string, status: number, body: string) =>
  method === 'POST' && path.includes('$batch') && status === 202 && !/HTTP\/1\.1 [45]\d\d/.test(body);

/** How many changes the tenant's feed has listed (its shards' `seq`, summed). */
async function feedLength(truth: TableMemoryStore): Promise<number> {
  const { position } = await truth.changes(T.tenant, null);
  return position.split(',').reduce((sum, shard) => sum + Number(shard.slice(shard.lastIndexOf(':') + 1)), 0);
}

describe('a conditional Table write whose first try landed and whose answer was lost', () => {
  it('(control) through the proxy without a fault, a create-only remember lands', async () => {
    const { memory, truth, cleanup } = await world();
    try {
      const { created } = await memory.remember(T, 'notes', 'a', 1, { conditions: { ifAbsent: true } });
      expect(created).toBe(true);
      expect((await truth.get(T.tenant, 'notes', 'a'))?.etag).toBeDefined();
    } finally {
      await cleanup();
    }
  });

  it('a create-only remember whose write landed is not answered "the fact exists"', async () => {
    const { memory, truth, cleanup } = await world();
    try {
      await memory.remember(T, 'notes', 'warm', 0);
      proxy.dropNext = landedBatch;
      const answer = await memory
        .remember(T, 'notes', 'a', 1, { conditions: { ifAbsent: true } })
        .catch((error: unknown) => error);
      expect(proxy.dropped).toHaveLength(1);
      const stored = await truth.get(T.tenant, 'notes', 'a');
      expect(stored).not.toBeNull();
      // It landed: success (its own version), or 503 when that could not be told; never 412.
      if (answer instanceof Error) expect(answer).toBeInstanceOf(StorageUnavailableError);
      else expect(answer).toMatchObject({ created: true, item: { etag: stored?.etag } });
    } finally {
      await cleanup();
    }
  });

  it('a remember on a version (If-Match) whose write landed is not answered "the fact has changed"', async () => {
    const { memory, truth, cleanup } = await world();
    try {
      const { item } = await memory.remember(T, 'notes', 'a', 1);
      proxy.dropNext = landedBatch;
      const answer = await memory
        .remember(T, 'notes', 'a', 2, { conditions: { ifMatch: item.etag } })
        .catch((error: unknown) => error);
      expect(proxy.dropped).toHaveLength(1);
      const stored = await truth.get(T.tenant, 'notes', 'a');
      expect(stored?.etag).not.toBe(item.etag);
      if (answer instanceof Error) expect(answer).toBeInstanceOf(StorageUnavailableError);
      else expect(answer).toMatchObject({ created: false, item: { etag: stored?.etag } });
    } finally {
      await cleanup();
    }
  });

  it('a remember whose write landed is stored once and says it created the fact', async () => {
    const { memory, truth, cleanup } = await world();
    try {
      await memory.remember(T, 'notes', 'warm', 0);
      const before = await feedLength(truth);
      proxy.dropNext = landedBatch;
      const answer = await memory.remember(T, 'notes', 'a', 1);
      expect(proxy.dropped).toHaveLength(1);
      expect(answer.created).toBe(true);
      const stored = await truth.get(T.tenant, 'notes', 'a');
      expect(answer.item.etag).toBe(stored?.etag);
      // One change listed in the feed since, not a second write of the same fact.
      expect(await feedLength(truth)).toBe(before + 1);
    } finally {
      await cleanup();
    }
  });

  it('a forget on a version whose delete landed is never "absent": true or 503, and the feed lists the fact', async () => {
    const { memory, truth, cleanup } = await world();
    try {
      const { item } = await memory.remember(T, 'notes', 'a', 1);
      const { position } = await truth.changes(T.tenant, null);
      proxy.dropNext = (method, path, status) =>
        method === 'DELETE' && path.includes("RowKey='") && status >= 200 && status < 300;
      // A delete leaves nothing to read back: it cannot be told from another writer's, so 503.
      const answer = await memory
        .forget(T, 'notes', 'a', { ifMatch: item.etag })
        .catch((error: unknown) => error);
      if (answer instanceof Error) expect(answer).toBeInstanceOf(StorageUnavailableError);
      else expect(answer).toBe(true);
      expect(proxy.dropped).toHaveLength(1);
      expect(await truth.get(T.tenant, 'notes', 'a')).toBeNull();
      expect((await truth.changes(T.tenant, position)).ids).toContain(factId('notes', 'a'));
    } finally {
      await cleanup();
    }
  });

  it('a write whose answer was lost and whose fact another writer then replaced is a 503, never a second write', async () => {
    const { memory, truth, cleanup } = await world();
    try {
      const { item } = await memory.remember(T, 'notes', 'a', 1);
      proxy.dropNext = landedBatch;
      proxy.onDrop = async () => {
        const other = await truth.get(T.tenant, 'notes', 'a');
        if (other === null) throw new Error('the write did not land');
        await truth.write(T.tenant, { ...other, updatedAt: other.updatedAt + 1 }, other.etag);
      };
      const before = await feedLength(truth);
      await expect(
        memory.remember(T, 'notes', 'a', 2, { conditions: { ifMatch: item.etag } }),
      ).rejects.toBeInstanceOf(StorageUnavailableError);
      expect(proxy.dropped).toHaveLength(1);
      // Ours and the other writer's: two changes, nothing written again.
      expect(await feedLength(truth)).toBe(before + 2);
    } finally {
      await cleanup();
    }
  });

  it('a transaction refused 503 (nothing landed) is tried again and lands once', async () => {
    const { memory, truth, cleanup } = await world();
    try {
      await memory.remember(T, 'notes', 'warm', 0);
      const before = await feedLength(truth);
      proxy.busyNext = (method, path) => method === 'POST' && path.includes('$batch');
      const { created, item } = await memory.remember(T, 'notes', 'a', 1, { conditions: { ifAbsent: true } });
      expect(proxy.refused).toHaveLength(1);
      expect(created).toBe(true);
      expect((await truth.get(T.tenant, 'notes', 'a'))?.etag).toBe(item.etag);
      expect(await feedLength(truth)).toBe(before + 1);
    } finally {
      await cleanup();
    }
  });
});
