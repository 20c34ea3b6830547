import { AzureNamedKeyCredential, TableClient, type TableServiceClientOptions } from '@azure/data-tables';
import { ManagedIdentityCredential } from '@azure/identity';
import {
  BlobServiceClient,
  ContainerClient,
  newPipeline,
  type Pipeline,
  StorageSharedKeyCredential,
} from '@azure/storage-blob';
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
 * Conditional writes of the key/value store go through its {@link withoutRetries} twin.
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
 * The twin of a Blob service client (same endpoint and credential) whose SDK does not retry
 * (`maxTries: 1`), for conditional writes (If-Match, If-None-Match: *, a delete on a version).
 * Such a write is not idempotent: when its first try lands and the answer is lost (a dropped
 * connection, a timeout), the SDK's retry of the identical request is answered 412 or 409 because
 * of that very write, which would read as "another writer won". Without the SDK's retry the loss
 * surfaces as an error, and the key/value store decides by reading back (see
 * `BlobKeyValueStore`'s conditional upload), retrying itself only when the write certainly did not
 * land. Reads and idempotent writes keep the retrying client.
 */
export function withoutRetries(client: BlobServiceClient, timeoutMs: number): BlobServiceClient {
  return new BlobServiceClient(client.url, pipelineWithoutRetries(client, timeoutMs));
}

/** {@link withoutRetries} for one container's client (the object stores' pointer moves). */
export function containerWithoutRetries(container: ContainerClient, timeoutMs: number): ContainerClient {
  return new ContainerClient(container.url, pipelineWithoutRetries(container, timeoutMs));
}

/**
 * A storage client's pipeline with the SDK's retries off. Built from the client's own (`pipeline`
 * is a property every storage client has, typed protected): its credential, options and any policy
 * added to it carry over, only the retries differ.
 */
function pipelineWithoutRetries(client: BlobServiceClient | ContainerClient, timeoutMs: number): Pipeline {
  const { pipeline } = client as unknown as { readonly pipeline: Pipeline };
  const twin = newPipeline(client.credential, {
    ...pipeline.options,
    retryOptions: { maxTries: 1, tryTimeoutInMs: timeoutMs },
  });
  twin.factories.push(...pipeline.factories);
  return twin;
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

/**
 * A Table client of one table. Plain `http://` is allowed for Azurite. Conditional writes of the
 * memory store go through its {@link tableWithoutRetries} twin.
 */
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

/**
 * The twin of a Table client (same endpoint, table, credential and options) whose SDK does not
 * retry (`maxRetries: 0`), for conditional writes (create-only, Replace on an etag, a delete on an
 * etag, and the transactions holding them). Such a write is not idempotent: when its first try
 * lands and the answer is lost (a dropped connection, a timeout), the SDK's retry of the identical
 * request is answered 409 or 412 because of that very write, which would read as "another writer
 * won". Without the SDK's retry the loss surfaces as an error, and the memory store decides by
 * reading back (see `TableMemoryStore`'s transactions). Reads and idempotent writes keep the
 * retrying client.
 */
export function tableWithoutRetries(client: TableClient): TableClient {
  // The client keeps its credential (an account key or the managed identity, as createTableClient
  // gives it) and its options, both typed private: only the retries differ.
  const { credential, clientOptions } = client as unknown as {
    readonly credential?: AzureNamedKeyCredential | ManagedIdentityCredential;
    readonly clientOptions?: TableServiceClientOptions;
  };
  const options: TableServiceClientOptions = { ...clientOptions, retryOptions: { maxRetries: 0 } };
  if (credential === undefined) return new TableClient(client.url, client.tableName, options);
  return credential instanceof ManagedIdentityCredential
    ? new TableClient(client.url, client.tableName, credential, options)
    : new TableClient(client.url, client.tableName, credential, options);
}
