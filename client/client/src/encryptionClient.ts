import { setTimeout as sleep } from 'node:timers/promises';

import type { JobStarted } from '@cairn-state/protocol/jobs';
import type {
  RewrapReport as RewrapReportSchema,
  RewrapStatus as RewrapStatusSchema,
} from '@cairn-state/protocol/rewrap';
import type { z } from 'zod';

import { readJson, segment, type Transport } from './transport.js';
import type { Wire } from './wire.js';

/**
 * Encryption at rest (admin): the `rewrap` job re-seals every stored sealed value with the first key
 * of the service's CAIRN_ENCRYPTION_KEYS, so that an old key can be removed once the report says
 * nothing is left sealed with it. Idempotent: running it again re-seals nothing twice.
 */

/** What a rewrap job re-sealed; `remaining` per key: 0 means the key can be removed. */
export type RewrapReport = Wire<z.output<typeof RewrapReportSchema>>;

/** A rewrap job's status: `report` once completed, `error` why it failed when it did. */
export type RewrapStatus = Wire<z.output<typeof RewrapStatusSchema>>;

export class EncryptionClient {
  constructor(private readonly transport: Transport) {}

  /** Starts a rewrap job (not resent after an ambiguous failure: a second job would only re-check). */
  async startRewrap(): Promise<z.output<typeof JobStarted>> {
    return readJson(await this.transport.call('POST', '/encryption/rewraps', { json: {} }), 202);
  }

  async getRewrap(id: string): Promise<RewrapStatus> {
    return readJson(await this.transport.call('GET', `/encryption/rewraps/${segment(id)}`), 200);
  }

  /** Reads the status until the job completed or failed; resolves with that last status. */
  async waitRewrap(
    id: string,
    options: { pollMs?: number; onProgress?: (status: RewrapStatus) => void } = {},
  ): Promise<RewrapStatus> {
    for (;;) {
      const status = await this.getRewrap(id);
      options.onProgress?.(status);
      if (status.status === 'failed' || (status.status === 'completed' && status.report !== null))
        return status;
      await sleep(options.pollMs ?? 500);
    }
  }
}
