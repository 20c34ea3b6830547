import { randomUUID } from 'node:crypto';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import { createTableClient } from '../../shared/storage/azure/clients';

/** A table name no other test uses (letters and digits, starting with a letter). */
export function freshTableName(): string {
  return `sessions${randomUUID().replaceAll('-', '').slice(0, 20)}`;
}

/** Settings that put the app's session index on a fresh table of the run's Azurite. */
export function sessionIndexSettings(tableEndpoint: string): Record<string, string> {
  return {
    CAIRN_TABLE_ENDPOINT: tableEndpoint,
    CAIRN_SESSION_TABLE: freshTableName(),
    CAIRN_STORAGE_ACCOUNT_KEY: AZURITE_ACCOUNT_KEY,
  };
}

/** A table client on Azurite's development account. */
export function azuriteTable(tableEndpoint: string, tableName = freshTableName()) {
  return createTableClient(
    { endpoint: tableEndpoint, accountName: AZURITE_ACCOUNT, accountKey: AZURITE_ACCOUNT_KEY },
    tableName,
  );
}

/** Settings that put the app's memory facts on a fresh table of the run's Azurite. */
export function memoryTableSettings(tableEndpoint: string): Record<string, string> {
  return {
    CAIRN_TABLE_ENDPOINT: tableEndpoint,
    CAIRN_MEMORY_TABLE: `memory${randomUUID().replaceAll('-', '').slice(0, 20)}`,
    CAIRN_STORAGE_ACCOUNT_KEY: AZURITE_ACCOUNT_KEY,
  };
}
