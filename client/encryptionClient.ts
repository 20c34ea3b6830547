import { setTimeout as sleep } from 'node:timers/promises';

import { readJson, segment, type Transport } from './transport';

/**
 * Encryption at rest (admin): the `rewrap` job re-seals every stored sealed value with the first key
 * of the service's CAIRN_ENCRYPTION_KEYS, so that an old key can be removed once the report says
 * nothing is left sealed with it. Idempotent: running it again re-seals nothing twice.
 */

export interface RewrapReport {
  readonly firstKeyId: string;
  readonly tenants: number;
  readonly examined: number;
  readonly resealed: number;
  /** Key id → values found sealed with it before the job re-sealed them. */
  readonly sealedWith: Readonly<Record<string, number>>;
  /** Every configured key other than the first → values still sealed with it (0: removable). */
  readonly remaining: Readonly<Record<string, number>>;
  /** `[where, message]` for values that could not be re-sealed. */
  readonly errors: readonly (readonly [string, string])[];
}

export interface RewrapStatus {
  readonly id: string;
  readonly status: 'pending' | 'running' | 'completed' | 'failed';
  readonly progress: { readonly tenants: number; readonly examined: number; readonly resealed: number };
  readonly report: RewrapReport | null;
  readonly error?: string;
}

export class EncryptionClient {
  constructor(private readonly transport: Transport) {}

  /** Starts a rewrap job (not resent after an ambiguous failure: a second job would only re-check). */
  async startRewrap(): Promise<{ id: string; statusUri: string }> {
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
