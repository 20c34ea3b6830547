import { ManagedIdentityCredential } from '@azure/identity';
import { BlobServiceClient, StorageSharedKeyCredential } from '@azure/storage-blob';

import type { BackendConfig } from '../config';

type BlobBackendConfig = Extract<BackendConfig, { kind: 'blob' }>;

const identities = new Map<string, ManagedIdentityCredential>();

/**
 * The process's one credential for the user-assigned managed identity (Blob, Queue and Table
 * clients share it, and with it its token cache).
 */
export function managedIdentityCredential(clientId: string | undefined): ManagedIdentityCredential {
  const key = clientId ?? '';
  let credential = identities.get(key);
  if (credential === undefined) {
    credential = new ManagedIdentityCredential({ clientId: key });
    identities.set(key, credential);
  }
  return credential;
}

/**
 * The one Blob service client of the process. In Azure it authenticates with the user-assigned
 * managed identity; an account key is accepted for Azurite and development only. Retries are the
 * SDK's own, kept short: every operation also has a deadline (CAIRN_STORAGE_TIMEOUT_MS), after which
 * the caller is told 503 rather than left waiting.
 */
export function createBlobServiceClient(backend: BlobBackendConfig, timeoutMs: number): BlobServiceClient {
  const credential =
    backend.accountKey !== undefined
      ? new StorageSharedKeyCredential(backend.accountName, backend.accountKey)
      : managedIdentityCredential(backend.managedIdentityClientId);
  return new BlobServiceClient(backend.endpoint, credential, {
    retryOptions: {
      maxTries: 4,
      retryDelayInMs: 100,
      maxRetryDelayInMs: 1000,
      tryTimeoutInMs: Math.max(1000, Math.floor(timeoutMs / 2)),
    },
    userAgentOptions: { userAgentPrefix: 'cairn' },
  });
}
