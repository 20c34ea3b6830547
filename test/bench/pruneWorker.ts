/**
 * The prune process of `npm run bench -- prune` (see prune.ts): a process of its own, as a
 * Functions instance running the `retentionPrune` timer is, so that its peak RSS is the prune's
 * alone. It reads the app's settings from its environment (`loadConfig`, as the app does: the
 * backend, the CAIRN_PRUNE_MAX_* budget and the CAIRN_RETENTION_* defaults) and wires the stores
 * retention uses as the composition root does without a table service (shared/services.ts), with
 * one addition that counts storage requests: on the Blob backend a policy in the Blob client's
 * pipeline (every request the SDK sends), on the local backend a wrapper around the key/value
 * store (every call of the store contract). Then it runs prune runs until one reports that nothing
 * is left, then one more, and prints one JSON line ({@link WorkerResult}) on stdout, progress on
 * stderr.
 *
 * Argument: the pruner's clock offset in ms (the storage's times are compared with `Date.now()`
 * plus it), so that what was written minutes ago is as old as the grace requires.
 */
import path from 'node:path';

import {
  BlobServiceClient,
  newPipeline,
  type RequestPolicy,
  type RequestPolicyFactory,
  StorageSharedKeyCredential,
} from '@azure/storage-blob';

import { sha256Hex } from '../../shared/auth';
import { loadConfig } from '../../shared/config';
import type { PruneReport } from '../../shared/jobs/retentionPrune';
import { createLogger } from '../../shared/logging';
import { RetentionPolicies } from '../../shared/retention/policy';
import { PruneStates } from '../../shared/retention/pruneState';
import { retentionPruner } from '../../shared/services';
import type { SnapshotStores } from '../../shared/snapshots/workspaceSnapshots';
import { BlobImmutableObjectStore } from '../../shared/storage/azure/blobImmutableObjectStore';
import { BlobKeyValueStoreFactory } from '../../shared/storage/azure/blobKeyValueStore';
import type { KeyValueStore, KeyValueStoreFactory } from '../../shared/storage/keyValueStore';
import { LocalImmutableObjectStore } from '../../shared/storage/local/localImmutableObjectStore';
import { LocalKeyValueStoreFactory } from '../../shared/storage/local/localKeyValueStore';
import { recordingKeyValueStores, recordingSnapshotStores } from '../../shared/tenants/recordingStores';
import { TenantDirectory } from '../../shared/tenants/tenantDirectory';

/**
 * Requests by kind (`list`, `read`, `head`, `write`, `delete`, `other`) and by where they went: the
 * Blob container, or locally `<space>/<tenant>` (`kv` for a tenant's own namespace).
 */
export interface RequestTally {
  readonly total: number;
  readonly byKind: Record<string, number>;
  readonly byContainer: Record<string, Record<string, number>>;
}

export interface WorkerRun {
  readonly ms: number;
  readonly report: PruneReport;
  readonly requests: RequestTally;
}

export interface WorkerResult {
  /** The runs until the first that completed (each bounded by the CAIRN_PRUNE_MAX_* budget). */
  readonly runs: WorkerRun[];
  /** One more run right after. */
  readonly again: WorkerRun;
  readonly budget: { readonly maxDeletes: number; readonly maxSeconds: number };
  /** The process's peak resident set (the kernel's figure), MB. */
  readonly maxRssMb: number;
}

const MAX_RUNS = 100;

class Tally {
  private byKind = new Map<string, number>();
  private byContainer = new Map<string, Map<string, number>>();

  count(kind: string, container: string): void {
    this.byKind.set(kind, (this.byKind.get(kind) ?? 0) + 1);
    const kinds = this.byContainer.get(container) ?? new Map<string, number>();
    kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
    this.byContainer.set(container, kinds);
  }

  /** A request of the Blob SDK. */
  countRequest(method: string, url: string): void {
    const parsed = new URL(url);
    const kind =
      method === 'GET' && parsed.searchParams.get('comp') === 'list'
        ? 'list'
        : (({ GET: 'read', HEAD: 'head', PUT: 'write', DELETE: 'delete' } as Record<string, string>)[
            method
          ] ?? 'other');
    this.count(kind, parsed.pathname.split('/').filter(Boolean)[1] ?? '');
  }

  /** The counts so far, and a fresh start. */
  take(): RequestTally {
    const byKind = Object.fromEntries(this.byKind);
    const byContainer = Object.fromEntries(
      [...this.byContainer].map(([container, kinds]) => [container, Object.fromEntries(kinds)]),
    );
    this.byKind = new Map();
    this.byContainer = new Map();
    return { total: Object.values(byKind).reduce((a, b) => a + b, 0), byKind, byContainer };
  }
}

/** A store whose every call is counted, as `kind`, under `where`. */
function countedStore(inner: KeyValueStore, tally: Tally, where: string): KeyValueStore {
  const seen = (kind: string) => tally.count(kind, where);
  return {
    read: async (key) => (seen('read'), inner.read(key)),
    head: async (key) => (seen('head'), inner.head(key)),
    write: async (key, value, conditions) => (seen('write'), inner.write(key, value, conditions)),
    append: async (key, bytes, conditions) => (seen('write'), inner.append(key, bytes, conditions)),
    delete: async (key, conditions) => (seen('delete'), inner.delete(key, conditions)),
    list: async (options) => (seen('list'), inner.list(options)),
    listItems: async (options) => (seen('list'), inner.listItems(options)),
  };
}

function countedStores(inner: KeyValueStoreFactory, tally: Tally): KeyValueStoreFactory {
  return {
    kind: inner.kind,
    maxValueBytes: inner.maxValueBytes,
    forTenant: (tenant) => countedStore(inner.forTenant(tenant), tally, `kv/${tenant}`),
    forSpace: (space, tenant) => countedStore(inner.forSpace(space, tenant), tally, `${space}/${tenant}`),
  };
}

/** The key/value stores and snapshot stores of the configured backend, every request counted. */
function storesOf(
  config: ReturnType<typeof loadConfig>,
  tally: Tally,
): { base: KeyValueStoreFactory; snapshots: SnapshotStores } {
  const { backend } = config;
  if (backend.kind === 'local') {
    const tmp = path.join(config.dataDir, 'tmp');
    return {
      base: countedStores(new LocalKeyValueStoreFactory(config.dataDir, config.maxValueBytes), tally),
      snapshots: {
        forTenant: (tenant) =>
          new LocalImmutableObjectStore(
            path.join(config.dataDir, 'snapshots', tenant),
            tmp,
            path.join(config.dataDir, 'snapshots-long', tenant),
          ),
      },
    };
  }
  if (backend.accountKey === undefined) {
    throw new Error('the prune bench runs on Azurite, with an account key');
  }
  // The same options as createBlobServiceClient (shared/storage/azure/clients.ts), and the counter.
  const pipeline = newPipeline(new StorageSharedKeyCredential(backend.accountName, backend.accountKey), {
    retryOptions: {
      maxTries: 4,
      retryDelayInMs: 100,
      maxRetryDelayInMs: 1000,
      tryTimeoutInMs: Math.max(1000, Math.floor(config.storageTimeoutMs / 2)),
    },
    userAgentOptions: { userAgentPrefix: 'cairn' },
  });
  const counting: RequestPolicyFactory = {
    create: (next: RequestPolicy): RequestPolicy => ({
      sendRequest: (request) => {
        tally.countRequest(request.method, request.url);
        return next.sendRequest(request);
      },
    }),
  };
  pipeline.factories.unshift(counting);
  const service = new BlobServiceClient(backend.endpoint, pipeline);
  const shared = service.getContainerClient(backend.container);
  return {
    base: new BlobKeyValueStoreFactory(
      service,
      backend.container,
      config.maxValueBytes,
      config.storageTimeoutMs,
    ),
    snapshots: {
      forTenant: (tenant) =>
        new BlobImmutableObjectStore(
          shared,
          `snapshots/${sha256Hex(tenant).slice(0, 32)}/`,
          config.storageTimeoutMs,
        ),
    },
  };
}

async function main(): Promise<void> {
  const clockOffsetMs = Number(process.argv[2] ?? '0');
  const config = loadConfig(process.env);
  const tally = new Tally();
  // As createServices wires them without CAIRN_TABLE_ENDPOINT.
  const { base, snapshots } = storesOf(config, tally);
  const directory = new TenantDirectory(base);
  const pruner = retentionPruner(
    {
      kvStores: recordingKeyValueStores(base, directory),
      directory,
      policies: new RetentionPolicies(base, config.retention.defaults),
      states: new PruneStates(base),
      snapshots: recordingSnapshotStores(snapshots, directory),
    },
    {
      maxDeletes: config.retention.maxDeletes,
      maxMs: config.retention.maxSeconds * 1000,
      now: () => Date.now() + clockOffsetMs,
    },
  );
  const log = createLogger('warn', (line) => process.stderr.write(line + '\n'));
  const runOnce = async (): Promise<WorkerRun> => {
    tally.take();
    const started = performance.now();
    const report = await pruner.run(log);
    const ms = performance.now() - started;
    const failed = report.tenants.find((tenant) => tenant.error !== undefined);
    if (failed !== undefined) throw new Error(`prune failed for ${failed.tenant}: ${failed.error ?? ''}`);
    return { ms, report, requests: tally.take() };
  };

  const runs: WorkerRun[] = [];
  for (;;) {
    const run = await runOnce();
    runs.push(run);
    const deleted = run.report.tenants.reduce((sum, tenant) => sum + tenant.objectsDeleted, 0);
    process.stderr.write(
      `run ${runs.length}: ${deleted} objects deleted in ${(run.ms / 1000).toFixed(1)} s` +
        `${run.report.complete ? '' : ' (more left)'}\n`,
    );
    if (run.report.complete) break;
    if (runs.length >= MAX_RUNS) throw new Error(`prune not complete after ${MAX_RUNS} runs`);
  }
  const again = await runOnce();
  const result: WorkerResult = {
    runs,
    again,
    budget: { maxDeletes: config.retention.maxDeletes, maxSeconds: config.retention.maxSeconds },
    maxRssMb: process.resourceUsage().maxRSS / 1024,
  };
  process.stdout.write(JSON.stringify(result) + '\n');
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
