import { AzureNamedKeyCredential, TableClient } from '@azure/data-tables';
import { ManagedIdentityCredential } from '@azure/identity';
import { BlobServiceClient, StorageSharedKeyCredential } from '@azure/storage-blob';
import { QueueServiceClient } from '@azure/storage-queue';

import type { StorageServiceConfig } from '../../config';

/**
 * The one place that builds Azure Storage clients. Every client authenticates the same way: with an
 * account key when one is configured (Azurite and development only), else with the user-assigned
 * managed identity (production: no secret anywhere). The composition root (`shared/services.ts`)
 * builds one client per service per process and shares it.
 */

const identities = new Map<string, ManagedIdentityCredential>();

/**
 * The process's one credential for the user-assigned managed identity (Blob, Queue and Table
 * clients share it, and with it its token cache).
 */
function managedIdentityCredential(clientId: string | undefined): ManagedIdentityCredential {
  const key = clientId ?? '';
  let credential = identities.get(key);
  if (credential === undefined) {
    credential = new ManagedIdentityCredential({ clientId: key });
    identities.set(key, credential);
  }
  return credential;
}

const USER_AGENT = { userAgentPrefix: 'cairn' };

/**
 * The Blob service client. Retries are the SDK's own, kept short: every operation also has a
 * deadline (CAIRN_STORAGE_TIMEOUT_MS), after which the caller is told 503 rather than left waiting.
 */
export function createBlobServiceClient(service: StorageServiceConfig, timeoutMs: number): BlobServiceClient {
  const credential =
    service.accountKey !== undefined
      ? new StorageSharedKeyCredential(service.accountName, service.accountKey)
      : managedIdentityCredential(service.managedIdentityClientId);
  return new BlobServiceClient(service.endpoint, credential, {
    retryOptions: {
      maxTries: 4,
      retryDelayInMs: 100,
      maxRetryDelayInMs: 1000,
      tryTimeoutInMs: Math.max(1000, Math.floor(timeoutMs / 2)),
    },
    userAgentOptions: USER_AGENT,
  });
}

/**
 * The Queue service client. The SDK does not retry (`maxTries: 1`): a retried send after a timeout
 * could put a second copy on the queue, while a failed send is retried by the next timer run
 * through the window's lease, with the same message.
 */
export function createQueueServiceClient(
  service: StorageServiceConfig,
  timeoutMs: number,
): QueueServiceClient {
  const credential =
    service.accountKey !== undefined
      ? new StorageSharedKeyCredential(service.accountName, service.accountKey)
      : managedIdentityCredential(service.managedIdentityClientId);
  return new QueueServiceClient(service.endpoint, credential, {
    retryOptions: { maxTries: 1, tryTimeoutInMs: timeoutMs },
    userAgentOptions: USER_AGENT,
  });
}

/** A Table client of one table. Plain `http://` is allowed for Azurite. */
export function createTableClient(service: StorageServiceConfig, tableName: string): TableClient {
  const options = {
    allowInsecureConnection: service.endpoint.startsWith('http://'),
    retryOptions: { maxRetries: 3, retryDelayInMs: 100, maxRetryDelayInMs: 1000 },
    userAgentOptions: USER_AGENT,
  };
  return service.accountKey !== undefined
    ? new TableClient(
        service.endpoint,
        tableName,
        new AzureNamedKeyCredential(service.accountName, service.accountKey),
        options,
      )
    : new TableClient(
        service.endpoint,
        tableName,
        managedIdentityCredential(service.managedIdentityClientId),
        options,
      );
}
