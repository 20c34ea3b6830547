import { readdir, readFile, rm } from 'node:fs/promises';
import path from 'node:path';

import { describe, expect, it } from 'vitest';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import { MemoryFacts } from '../../shared/memory/memory';
import { StorageUnavailableError } from '../../shared/protocol/errors';
import { createTableClient } from '../../shared/storage/azure/clients';
import { TableMemoryStore } from '../../shared/storage/azure/tableMemoryStore';
import { LocalMemoryStore } from '../../shared/storage/local/localMemoryStore';
import { azurite } from '../support/azurite';
import { tempDir } from '../support/cleanup';
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

describeMemoryVectorContract(local(false));
describeMemoryVectorContract(table(false));
describeMemoryVectorContract(local(true));
describeMemoryVectorContract(table(true));
describeMemorySearchCacheContract(local(false));
describeMemorySearchCacheContract(table(false));
