import { rm } from 'node:fs/promises';

import { describe, expect, it } from 'vitest';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import { StorageUnavailableError } from '../../shared/errors';
import { MemoryFacts } from '../../shared/memory/memory';
import { createTableClient } from '../../shared/storage/azure/clients';
import { TableMemoryStore } from '../../shared/storage/azure/tableMemoryStore';
import { LocalMemoryStore } from '../../shared/storage/local/localMemoryStore';
import { azurite } from '../support/azurite';
import { tempDir } from '../support/cleanup';
import { azuriteTable } from '../support/tables';
import { describeMemoryStoreContract } from './memoryStore.contract';

describeMemoryStoreContract({
  name: 'local filesystem',
  async create() {
    const dir = tempDir('memory');
    return {
      store: new LocalMemoryStore(dir),
      another: () => new LocalMemoryStore(dir),
      destroy: () => rm(dir, { recursive: true, force: true }),
    };
  },
});

describeMemoryStoreContract({
  name: 'Azure Table Storage (Azurite)',
  async create() {
    const table = azuriteTable(azurite().tableEndpoint);
    return {
      store: new TableMemoryStore(table, 10_000),
      another: () => new TableMemoryStore(azuriteTable(azurite().tableEndpoint, table.tableName), 10_000),
      async destroy() {
        await table.deleteTable();
      },
    };
  },
});

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
