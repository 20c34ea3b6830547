import { ManagedIdentityCredential } from '@azure/identity';
import { describe, expect, it } from 'vitest';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import {
  createBlobServiceClient,
  createTableClient,
  tableWithoutRetries,
  withoutRetries,
} from '../../shared/storage/azure/clients';

/** What a Table client holds (typed private in the SDK): its credential and options. */
const insides = (client: object) =>
  client as unknown as { credential?: unknown; clientOptions?: { retryOptions?: unknown } };

describe('tableWithoutRetries', () => {
  it('keeps the endpoint, table and credential (account key or managed identity); only the retries differ', () => {
    const keyed = createTableClient(
      {
        endpoint: 'http://127.0.0.1:10002/devstoreaccount1',
        accountName: AZURITE_ACCOUNT,
        accountKey: AZURITE_ACCOUNT_KEY,
      },
      'facts',
    );
    const identity = createTableClient(
      {
        endpoint: 'https://account.table.core.windows.net',
        accountName: 'account',
        managedIdentityClientId: 'client-id',
      },
      'facts',
    );
    expect(insides(identity).credential).toBeInstanceOf(ManagedIdentityCredential);
    for (const client of [keyed, identity]) {
      const twin = tableWithoutRetries(client);
      expect([twin.url, twin.tableName]).toEqual([client.url, client.tableName]);
      expect(insides(twin).credential).toBe(insides(client).credential);
      expect(insides(twin).clientOptions?.retryOptions).toEqual({ maxRetries: 0 });
      expect(insides(client).clientOptions?.retryOptions).not.toEqual({ maxRetries: 0 });
    }
  });
});

describe('withoutRetries (Blob)', () => {
  it('keeps the endpoint and credential (account key or managed identity); only the retries differ', () => {
    const keyed = createBlobServiceClient(
      {
        endpoint: 'http://127.0.0.1:10000/devstoreaccount1',
        accountName: AZURITE_ACCOUNT,
        accountKey: AZURITE_ACCOUNT_KEY,
      },
      5_000,
    );
    const identity = createBlobServiceClient(
      {
        endpoint: 'https://account.blob.core.windows.net',
        accountName: 'account',
        managedIdentityClientId: 'client-id',
      },
      5_000,
    );
    expect(identity.credential).toBeInstanceOf(ManagedIdentityCredential);
    const retries = (client: object) =>
      (client as unknown as { pipeline: { options: { retryOptions?: { maxTries?: number } } } }).pipeline
        .options.retryOptions?.maxTries;
    for (const client of [keyed, identity]) {
      const twin = withoutRetries(client, 5_000);
      expect(twin.url).toBe(client.url);
      expect(twin.credential).toBe(client.credential);
      expect(retries(twin)).toBe(1);
      expect(retries(client)).toBe(4);
    }
  });
});
