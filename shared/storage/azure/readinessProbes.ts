import type { BlobServiceClient } from '@azure/storage-blob';

import type { Config, StorageServiceConfig } from '../../config';
import { type ReadinessProbe, writableFolder } from '../../readiness';
import { isNotFound, storageCall } from './azureErrors';
import { createQueueServiceClient, createTableClient } from './clients';

/** The probes of every store `config` configures; `blobService` is the backend's, when it is Blob. */
export function readinessProbes(config: Config, blobService?: BlobServiceClient): ReadinessProbe[] {
  const { backend, storageTimeoutMs: timeoutMs } = config;
  const probes: ReadinessProbe[] = [];
  if (backend.kind === 'blob' && blobService !== undefined) {
    const container = blobService.getContainerClient(backend.container);
    probes.push({
      name: 'backend',
      // `exists` is one properties request; false (404) is an answer too.
      check: (signal) =>
        storageCall(timeoutMs, () => container.exists({ abortSignal: signal })).then(() => {}),
    });
  } else {
    probes.push({ name: 'backend', check: () => writableFolder(config.dataDir) });
  }
  const table = (name: string, service: StorageServiceConfig | undefined, tableName: string) => {
    if (service === undefined) return;
    const client = createTableClient(service, tableName);
    probes.push({
      name,
      check: (signal) =>
        storageCall(timeoutMs, async () => {
          try {
            // An entity no store writes (its keys are not valid ones of any table Cairn keeps).
            await client.getEntity('~readiness', '~probe', { abortSignal: signal });
          } catch (error) {
            if (!isNotFound(error)) throw error;
          }
        }),
    });
  };
  table('sessionIndex', config.sessionIndex.tableService, config.sessionIndex.tableName);
  table('memory', config.memory.tableService, config.memory.tableName);
  if (config.audit.enabled) table('audit', config.audit.tableService, config.audit.tableName);
  const { queueService, queueName } = config.emailPoll;
  if (queueService !== undefined) {
    const queue = createQueueServiceClient(queueService, timeoutMs).getQueueClient(queueName);
    probes.push({
      name: 'emailWindowQueue',
      check: (signal) => storageCall(timeoutMs, () => queue.exists({ abortSignal: signal })).then(() => {}),
    });
  }
  return probes;
}
