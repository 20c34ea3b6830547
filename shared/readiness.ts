import { constants as fsConstants } from 'node:fs';
import fs from 'node:fs/promises';

import type { Logger } from './logging';

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

/** The longest a readiness check takes: the protocol's (load balancers' probes commonly time out after 5 s). */
export { MAX_READINESS_MS } from './protocol/service';
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

/**
 * The local backend's data folder can be written: it is a folder (made when missing, as the
 * stores would on their first write) that this process may write to.
 */
export async function writableFolder(dataDir: string): Promise<void> {
  await fs.mkdir(dataDir, { recursive: true });
  await fs.access(dataDir, fsConstants.W_OK | fsConstants.X_OK);
}
