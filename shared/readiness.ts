import { constants as fsConstants } from 'node:fs';
import fs from 'node:fs/promises';

import type { BlobServiceClient } from '@azure/storage-blob';

import type { Config, StorageServiceConfig } from './config';
import type { Logger } from './logging';
import { isNotFound, storageCall } from './storage/azure/azureErrors';
import { createQueueServiceClient, createTableClient } from './storage/azure/clients';

/**
 * Readiness (`GET /api/health/ready`): does every store this deployment configures answer? One
 * probe per store, each a single cheap request (a container's or queue's properties, a point read
 * of an entity that is never written, the data folder's access bits), all at once under one
 * deadline. A probe passes when the store answers at all, "absent" included: a container or table
 * that is not created yet is a store that works. The report names the stores and their outcome,
 * never an endpoint, account, path or error text (those go to the log).
 *
 * The answer is anonymous, so it must not turn a flood of probes into a flood of storage calls:
 * concurrent requests share one check, and a finished check is reused for {@link REUSE_MS}.
 */

export type ProbeOutcome = 'ok' | 'failed' | 'timeout';

export interface ReadinessProbe {
  /** The store's name in the report: `backend`, `sessionIndex`, `memory`, `audit`, `emailWindowQueue`. */
  readonly name: string;
  /** Resolves when the store answered; `signal` aborts it at the deadline. */
  check(signal: AbortSignal): Promise<void>;
}

export interface ReadinessReport {
  readonly ready: boolean;
  readonly checks: Readonly<Record<string, ProbeOutcome>>;
}

/** The longest a readiness check takes (load balancers' probes commonly time out after 5 s). */
export const MAX_READINESS_MS = 3000;
/** How long a finished check answers further requests. */
const REUSE_MS = 1000;

export class Readiness {
  private pending: Promise<ReadinessReport> | undefined;
  private last: { report: ReadinessReport; at: number } | undefined;

  constructor(
    private readonly probes: readonly ReadinessProbe[],
    private readonly timeoutMs: number,
  ) {}

  /** The stores' outcomes; never throws. `log` gets each failing probe's cause. */
  check(log?: Logger): Promise<ReadinessReport> {
    if (this.last !== undefined && performance.now() - this.last.at < REUSE_MS) {
      return Promise.resolve(this.last.report);
    }
    this.pending ??= this.run(log).finally(() => (this.pending = undefined));
    return this.pending;
  }

  private async run(log: Logger | undefined): Promise<ReadinessReport> {
    const outcomes = await Promise.all(
      this.probes.map(async (probe) => [probe.name, await this.probe(probe, log)] as const),
    );
    const report = {
      ready: outcomes.every(([, outcome]) => outcome === 'ok'),
      checks: Object.fromEntries(outcomes),
    };
    this.last = { report, at: performance.now() };
    return report;
  }

  /** One probe under the deadline; a probe that ignores its signal is still given up on in time. */
  private async probe(probe: ReadinessProbe, log: Logger | undefined): Promise<ProbeOutcome> {
    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => {
        controller.abort(new DOMException('the store did not answer in time', 'TimeoutError'));
        resolve('timeout');
      }, this.timeoutMs);
    });
    try {
      return await Promise.race([probe.check(controller.signal).then(() => 'ok' as const), deadline]);
    } catch (error) {
      if (controller.signal.aborted) return 'timeout';
      log?.warn({ err: error, store: probe.name }, 'readiness probe failed');
      return 'failed';
    } finally {
      clearTimeout(timer);
    }
  }
}

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

/**
 * The local backend's data folder can be written: it is a folder (made when missing, as the
 * stores would on their first write) that this process may write to.
 */
async function writableFolder(dataDir: string): Promise<void> {
  await fs.mkdir(dataDir, { recursive: true });
  await fs.access(dataDir, fsConstants.W_OK | fsConstants.X_OK);
}
