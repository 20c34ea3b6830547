import { setTimeout as sleep } from 'node:timers/promises';

import { readJson, segment, type Transport } from './transport';

/**
 * Migrations of local state (folders on the service's host) into a tenant's key/value space on the
 * Blob backend, run as durable orchestrations. Admin only. Existing keys are skipped, never
 * overwritten, so running a migration again copies nothing new.
 */

export interface MigrationSource {
  /** A folder on the host running Cairn. */
  readonly root: string;
  /** Key prefix in the target ('' or absent: the root of the tenant's space). */
  readonly prefix?: string;
}

export interface MigrationRequest {
  readonly tenant: string;
  readonly sources: readonly MigrationSource[];
  /** Count what would be copied, write nothing. */
  readonly dryRun?: boolean;
}

export interface MigrationReport {
  readonly copied: number;
  readonly skipped: number;
  readonly bytesCopied: number;
  readonly keysCopied: readonly string[];
  /** `[key, message]` for every file that could not be copied. */
  readonly errors: readonly (readonly [string, string])[];
}

export interface MigrationStatus {
  readonly id: string;
  readonly status: 'pending' | 'running' | 'completed' | 'failed';
  readonly progress: { readonly total: number; readonly done: number };
  /** Set once the migration completed. */
  readonly report: MigrationReport | null;
  /** Why it failed, when it did. */
  readonly error?: string;
}

export interface WaitOptions {
  /** Between two status reads (default 500 ms). */
  readonly pollMs?: number;
  /** Called with every status read, the last one included. */
  readonly onProgress?: (status: MigrationStatus) => void;
  /** Stops waiting (rejects with the signal's reason); the migration itself goes on. */
  readonly signal?: AbortSignal;
}

export class MigrationsClient {
  constructor(private readonly transport: Transport) {}

  /**
   * Starts a migration; resolves with its id. Not idempotent: a start whose answer was lost is not
   * sent again (a second start would run a second migration, which copies nothing new).
   */
  async start(request: MigrationRequest): Promise<{ id: string; statusUri: string }> {
    const reply = await this.transport.call('POST', '/migrations', { json: request });
    return readJson(reply, 202);
  }

  async get(id: string): Promise<MigrationStatus> {
    return readJson(await this.transport.call('GET', `/migrations/${segment(id)}`), 200);
  }

  /** Reads the status until the migration completed or failed; resolves with that last status. */
  async wait(id: string, options: WaitOptions = {}): Promise<MigrationStatus> {
    for (;;) {
      options.signal?.throwIfAborted();
      const status = await this.get(id);
      options.onProgress?.(status);
      if (status.status === 'failed' || (status.status === 'completed' && status.report !== null)) {
        return status;
      }
      await sleep(
        options.pollMs ?? 500,
        undefined,
        options.signal === undefined ? {} : { signal: options.signal },
      );
    }
  }
}
