import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

import { createSessionArchive } from './archive/createSessionArchive';
import type { SessionArchive } from './archive/sessionArchive';
import { Authenticator } from './auth';
import { type Config, loadConfig } from './config';
import { ChatCursorCache } from './coordination/chatCursorCache';
import {
  AzureEmailWindowQueue,
  createQueueServiceClient,
  type EmailWindowQueue,
} from './coordination/emailWindowQueue';
import { EmailPollTenantRegistry } from './coordination/tenantRegistry';
import { createBlobServiceClient } from './storage/azureClients';
import { BlobKeyValueStoreFactory } from './storage/blobKeyValueStore';
import type { KeyValueStoreFactory } from './storage/keyValueStore';
import { LocalKeyValueStoreFactory } from './storage/localKeyValueStore';
import { ThreadStore } from './threads/threadStore';

/**
 * The composition root: configuration, one client per storage service, the stores and the
 * authenticator, built once per process from the validated settings and shared by every function.
 */
export interface Services {
  readonly config: Config;
  readonly version: string;
  readonly kvStores: KeyValueStoreFactory;
  readonly authenticator: Authenticator;
  /** The tenants the emailWindowPoll timer serves (kept in the key/value store). */
  readonly emailPollRegistry: EmailPollTenantRegistry;
  /** Chat cursor versions this instance knows (a compare-and-swap hint only: see ChatCursorCache). */
  readonly chatCursorCache: ChatCursorCache;
  /** The email-window queue; undefined when CAIRN_QUEUE_ENDPOINT is not set. */
  readonly emailWindowQueue?: EmailWindowQueue;
  /** Session archives; undefined when CAIRN_TABLE_ENDPOINT (the session index) is not set. */
  readonly sessionArchive?: SessionArchive;
  /** Threads, checkpoints and runs, in each tenant's `threads` space of the key/value backend. */
  readonly threads: ThreadStore;
}

export function createServices(config: Config): Services {
  const { backend } = config;
  const blobService =
    backend.kind === 'blob' ? createBlobServiceClient(backend, config.storageTimeoutMs) : undefined;
  const kvStores =
    backend.kind === 'blob' && blobService !== undefined
      ? new BlobKeyValueStoreFactory(
          blobService,
          backend.container,
          config.maxValueBytes,
          config.storageTimeoutMs,
        )
      : new LocalKeyValueStoreFactory(config.dataDir, config.maxValueBytes);
  const { queueService, queueName } = config.emailPoll;
  const emailWindowQueue =
    queueService === undefined
      ? undefined
      : new AzureEmailWindowQueue(
          createQueueServiceClient(queueService, config.storageTimeoutMs).getQueueClient(queueName),
          config.storageTimeoutMs,
        );
  const sessionArchive = createSessionArchive(config, blobService);
  return {
    config,
    version: packageVersion(),
    kvStores,
    authenticator: new Authenticator(config.apiKeys, config.entra),
    emailPollRegistry: new EmailPollTenantRegistry(kvStores),
    chatCursorCache: new ChatCursorCache(),
    threads: new ThreadStore({
      storeOf: (tenant) => kvStores.forSpace('threads', tenant),
      maxValueBytes: kvStores.maxValueBytes,
    }),
    ...(emailWindowQueue === undefined ? {} : { emailWindowQueue }),
    ...(sessionArchive === undefined ? {} : { sessionArchive }),
  };
}

let services: Services | undefined;

/** The process's services; the first call reads the configuration and throws when it is invalid. */
export function getServices(): Services {
  services ??= createServices(loadConfig());
  return services;
}

/** The version in Cairn's package.json (found upwards from here: sources and dist differ in depth). */
function packageVersion(): string {
  for (let dir = __dirname; ; dir = path.dirname(dir)) {
    const file = path.join(dir, 'package.json');
    if (existsSync(file)) {
      const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'cairn' && pkg.version !== undefined) return pkg.version;
    }
    if (path.dirname(dir) === dir) return '0.0.0';
  }
}
