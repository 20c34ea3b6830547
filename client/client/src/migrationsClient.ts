import { setTimeout as sleep } from 'node:timers/promises';

import type {
  MigrationReport as MigrationReportSchema,
  MigrationStarted,
  MigrationStatus as MigrationStatusSchema,
  startMigrationBody,
} from '@cairn-state/protocol/migrations';
import type { z } from 'zod';

import { readJson, segment, type Transport } from './transport.js';
import type { Wire } from './wire.js';

/**
 * Migrations of local state (folders on the service's host) into a tenant's key/value space on the
 * Blob backend, run as durable orchestrations. Admin only. Existing keys are skipped, never
 * overwritten, so running a migration again copies nothing new.
 */

/** A source: `root`, a folder on the host running Cairn; `prefix`, the key prefix in the target. */
export type MigrationSource = Wire<z.input<typeof startMigrationBody>['sources'][number]>;

/** What to copy for which tenant; `dryRun` counts what would be copied and writes nothing. */
export type MigrationRequest = Wire<z.input<typeof startMigrationBody>>;

/** What a migration copied; `errors` holds `[key, message]` for every file that could not be. */
export type MigrationReport = Wire<z.output<typeof MigrationReportSchema>>;

/** A migration's status: `report` once completed, `error` why it failed when it did. */
export type MigrationStatus = Wire<z.output<typeof MigrationStatusSchema>>;

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
  async start(request: MigrationRequest): Promise<z.output<typeof MigrationStarted>> {
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
