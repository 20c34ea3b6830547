import { readdir, readFile, rm } from 'node:fs/promises';
import path from 'node:path';

import type { TableClient } from '@azure/data-tables';
import { describe, expect, it } from 'vitest';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import { MemoryFacts } from '../../shared/memory/memory';
import { StorageUnavailableError } from '../../shared/protocol/errors';
import { createTableClient, tableWithoutRetries } from '../../shared/storage/azure/clients';
import { TableMemoryStore } from '../../shared/storage/azure/tableMemoryStore';
import { LocalMemoryStore } from '../../shared/storage/local/localMemoryStore';
import { azurite } from '../support/azurite';
import { tempDir } from '../support/cleanup';
import { recordingAudit } from '../support/recordingAudit';
import { azuriteTable } from '../support/tables';
import { STORAGE_TIMEOUT_MS } from '../support/timeouts';
import { describeMemorySearchCacheContract } from './memorySearchCache.contract';
import {
  describeMemoryRewrap,
  describeMemoryStoreContract,
  type MemoryStoreFixture,
} from './memoryStore.contract';
import { describeMemoryVectorContract } from './memoryVectors.contract';

/** Every file under `folder`, its bytes. */
async function filesUnder(folder: string): Promise<Buffer[]> {
  const found: Buffer[] = [];
  const walk = async (current: string): Promise<void> => {
    for (const entry of await readdir(current, { withFileTypes: true }).catch(() => [])) {
      const full = path.join(current, entry.name);
      if (entry.isDirectory()) await walk(full);
      else found.push(await readFile(full));
    }
  };
  await walk(folder);
  return found;
}

/** A table property's bytes: binary as it is, anything else as text. */
function propertyBytes(property: unknown): Buffer {
  if (property instanceof Uint8Array) return Buffer.from(property);
  if (typeof property !== 'object' || property === null) return Buffer.from(String(property));
  return Buffer.from(
    JSON.stringify(property, (_key, value: unknown) => (typeof value === 'bigint' ? String(value) : value)),
  );
}

function local(sealed: boolean): MemoryStoreFixture {
  return {
    name: sealed ? 'local filesystem, values sealed, changes audited' : 'local filesystem',
    sealed,
    async create() {
      const dir = tempDir('memory');
      return {
        store: new LocalMemoryStore(dir),
        another: () => new LocalMemoryStore(dir),
        destroy: () => rm(dir, { recursive: true, force: true }),
        raw: () => filesUnder(path.join(dir, 'memory')),
      };
    },
  };
}

function table(sealed: boolean): MemoryStoreFixture {
  return {
    name: sealed
      ? 'Azure Table Storage (Azurite), values sealed, changes audited'
      : 'Azure Table Storage (Azurite)',
    sealed,
    async create() {
      const client = azuriteTable(azurite().tableEndpoint);
      return {
        store: new TableMemoryStore(client, STORAGE_TIMEOUT_MS),
        another: () =>
          new TableMemoryStore(azuriteTable(azurite().tableEndpoint, client.tableName), STORAGE_TIMEOUT_MS),
        async destroy() {
          await client.deleteTable();
        },
        // Each entity as Azurite answers it: every property, the binary value as its bytes.
        async raw() {
          const rows: Buffer[] = [];
          for await (const entity of client.listEntities<Record<string, unknown>>()) {
            // The change feed's rows (`~head-…`, `~ring-…`) hold ids of rows, no value.
            if (String(entity.rowKey).startsWith('~')) continue;
            const parts = Object.values(entity).map(propertyBytes);
            rows.push(Buffer.concat(parts));
          }
          return rows;
        },
      };
    },
  };
}

describeMemoryStoreContract(local(false));
describeMemoryStoreContract(table(false));
describeMemoryStoreContract(local(true));
describeMemoryStoreContract(table(true));
describeMemoryRewrap(local(false));
describeMemoryRewrap(table(false));

describe('TableMemoryStore faults', () => {
  it('reports an unreachable table service as unavailable on every call, never as absent', async () => {
    // A port nothing listens on (the discard port), so every request is refused at once.
    const table = createTableClient(
      {
        endpoint: 'http://127.0.0.1:9/devstoreaccount1',
        accountName: AZURITE_ACCOUNT,
        accountKey: AZURITE_ACCOUNT_KEY,
      },
      'unreachable',
    );
    const memory = new MemoryFacts({ store: new TableMemoryStore(table, 3_000) });
    const caller = { tenant: 'tenant-a' };
    const calls = [
      () => memory.recall(caller, 'a', 'k'),
      () => memory.remember(caller, 'a', 'k', 1),
      () => memory.forget(caller, 'a', 'k'),
      () => memory.search(caller, { namespace: 'a', text: 'x' }),
      () => memory.listNamespaces(caller),
      () => memory.forgetAll(caller, 'a'),
      () => memory.pruneExpired('tenant-a', 10),
    ];
    for (const call of calls) await expect(call()).rejects.toBeInstanceOf(StorageUnavailableError);
  });
});

/**
 * The table client with one fault: the first transaction after an armed `deleteEntity` (the feed
 * entry of a forget's conditional delete, TableMemoryStore.deleteRow) throws `fault`, the row
 * being gone already.
 */
function failingListingAfterDelete(
  client: TableClient,
  fault: () => unknown,
): { client: TableClient; arm: () => void } {
  let armed = false;
  let deleted = false;
  const proxy = new Proxy(client, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown;
      if (typeof value !== 'function') return value;
      const call = (args: unknown[]) => (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
      if (property === 'deleteEntity') {
        return async (...args: unknown[]) => {
          const result = await call(args);
          deleted = armed;
          return result;
        };
      }
      if (property === 'submitTransaction') {
        return async (...args: unknown[]) => {
          if (!deleted) return call(args);
          deleted = armed = false;
          throw fault();
        };
      }
      return (value as (...a: unknown[]) => unknown).bind(target);
    },
  });
  return { client: proxy, arm: () => (armed = true) };
}

describe('TableMemoryStore: a forget whose listing in the feed fails', () => {
  const faults: [string, () => unknown][] = [
    ['the deadline passes', () => new DOMException('the storage did not answer in time', 'TimeoutError')],
    // What the feed's transaction throws once every compare-and-swap on its shard head has lost.
    [
      'the shard head stays too busy',
      () =>
        Object.assign(new Error('precondition failed'), {
          statusCode: 412,
          code: 'UpdateConditionNotSatisfied',
        }),
    ],
  ];
  for (const [name, fault] of faults) {
    it(`answers 503, not success, when ${name}; its retry lists the deletion, so no instance's search keeps the fact`, async () => {
      const table = azuriteTable(azurite().tableEndpoint);
      // The faults are those of the client the store writes with (its twin without retries).
      const { client, arm } = failingListingAfterDelete(tableWithoutRetries(table), fault);
      const writer = new MemoryFacts({ store: new TableMemoryStore(table, STORAGE_TIMEOUT_MS, client) });
      const reader = new MemoryFacts({
        store: new TableMemoryStore(
          azuriteTable(azurite().tableEndpoint, table.tableName),
          STORAGE_TIMEOUT_MS,
        ),
      });
      const caller = { tenant: 'forget-listing' };
      const keys = async () =>
        (await reader.search(caller, { namespace: 'notes', limit: 10 })).items.map((item) => item.key).sort();
      try {
        await writer.remember(caller, 'notes', 'secret', { text: 'forget me' });
        await writer.remember(caller, 'notes', 'kept', { text: 'keep me' });
        expect(await keys()).toEqual(['kept', 'secret']); // the reader's cache holds both

        arm();
        await expect(writer.forget(caller, 'notes', 'secret')).rejects.toBeInstanceOf(
          StorageUnavailableError,
        );
        expect(await reader.recall(caller, 'notes', 'secret')).toBeNull(); // the row went all the same
        // The client retries a 503: the row is gone, the forget answers success, and lists it first.
        expect(await writer.forget(caller, 'notes', 'secret')).toBe(false);
        expect(await keys()).toEqual(['kept']);
      } finally {
        await table.deleteTable();
      }
    });
  }

  it('a forget of a namespace with the audit trail on lists the rows it was deleting when it fails', async () => {
    const table = azuriteTable(azurite().tableEndpoint);
    const [, deadline] = faults[0] as [string, () => unknown];
    const { client, arm } = failingListingAfterDelete(tableWithoutRetries(table), deadline);
    const writer = new MemoryFacts({
      store: new TableMemoryStore(table, STORAGE_TIMEOUT_MS, client),
      audit: recordingAudit().log,
    });
    const reader = new MemoryFacts({
      store: new TableMemoryStore(azuriteTable(azurite().tableEndpoint, table.tableName), STORAGE_TIMEOUT_MS),
    });
    const caller = { tenant: 'forget-all-listing' };
    const keys = async () =>
      (await reader.search(caller, { namespace: 'notes', limit: 10 })).items.map((item) => item.key).sort();
    try {
      for (const key of ['a', 'b', 'c']) await writer.remember(caller, 'notes', key, { text: key });
      expect(await keys()).toEqual(['a', 'b', 'c']);

      arm();
      // Its rows go one by one at the version listed; a retry would not find the one deleted.
      await expect(writer.forgetAll(caller, 'notes')).rejects.toBeInstanceOf(StorageUnavailableError);
      const left: string[] = [];
      for (const key of ['a', 'b', 'c'])
        if ((await reader.recall(caller, 'notes', key)) !== null) left.push(key);
      expect(left.length).toBeLessThan(3);
      expect(await keys()).toEqual(left);
    } finally {
      await table.deleteTable();
    }
  });
});

describeMemoryVectorContract(local(false));
describeMemoryVectorContract(table(false));
describeMemoryVectorContract(local(true));
describeMemoryVectorContract(table(true));
describeMemorySearchCacheContract(local(false));
describeMemorySearchCacheContract(table(false));
