import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

import { Authenticator } from './auth';
import { type Config, loadConfig } from './config';
import { createBlobServiceClient } from './storage/azureClients';
import { BlobKeyValueStoreFactory } from './storage/blobKeyValueStore';
import type { KeyValueStoreFactory } from './storage/keyValueStore';
import { LocalKeyValueStoreFactory } from './storage/localKeyValueStore';

/**
 * The composition root: configuration, one client per storage service, the stores and the
 * authenticator, built once per process from the validated settings and shared by every function.
 */
export interface Services {
  readonly config: Config;
  readonly version: string;
  readonly kvStores: KeyValueStoreFactory;
  readonly authenticator: Authenticator;
}

export function createServices(config: Config): Services {
  const { backend } = config;
  const kvStores =
    backend.kind === 'blob'
      ? new BlobKeyValueStoreFactory(
          createBlobServiceClient(backend, config.storageTimeoutMs),
          backend.container,
          config.maxValueBytes,
          config.storageTimeoutMs,
        )
      : new LocalKeyValueStoreFactory(backend.dataDir, config.maxValueBytes);
  return {
    config,
    version: packageVersion(),
    kvStores,
    authenticator: new Authenticator(config.apiKeys, config.entra),
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
