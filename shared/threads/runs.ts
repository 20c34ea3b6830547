import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';

import type { AuditEvent } from '../audit/auditLog';
import {
  InvalidArgumentError,
  NotFoundError,
  StorageUnavailableError,
  ThreadBusyError,
} from '../protocol/errors';
import { checkRunId, checkThreadId } from './identifiers';
import {
  type EndedRun,
  endedRunView,
  type LiveRun,
  liveRunView,
  MAX_RECENT_RUNS,
  type RunView,
  type ThreadRecord,
} from './records';
import {
  busy,
  fenced,
  iso,
  liveRun,
  newThreadRecord,
  noThread,
  type Snapshot,
  statusOf,
  type ThreadRecords,
} from './threadRecords';
import type { RunStart } from './threadTypes';
import { checkLease, MAX_BUSY_TIMEOUT_MS } from './validation';

/**
 * Runs: a run holds a thread with a lease and a fencing token, in the thread record (each change a
 * compare-and-swap). The serving instance's clock decides whether a lease has expired
 * (`leaseExpiresAt` is compared with this process's `Date.now()`). Instances are assumed to keep
 * their clocks within a second or two of each other (NTP; Azure's hosts do): a lease is therefore
 * only as exact as that skew, and holders should renew at a fraction of it. Writers are fenced by
 * threadRecords.ts's `writerRefusal`.
 */
export class ThreadRuns {
  constructor(private readonly records: ThreadRecords) {}

  /**
   * Starts a run on the thread (creating the thread when absent). When a live run holds it:
   * `reject` answers `thread_busy` at once; `wait` polls with backoff until the thread is free or
   * `busyTimeoutMs` passed (then `thread_busy`); `interrupt` ends the holder as `interrupted` (its
   * stored checkpoints stay) and starts this run. An expired holder is ended as `expired`. Every
   * start takes the next fencing token.
   */
  async startRun(
    tenant: string,
    threadId: string,
    start: RunStart,
    actor?: string,
  ): Promise<{ run: RunView; interrupted: string | null }> {
    checkThreadId(threadId);
    checkLease(start.leaseMs);
    if (!(start.busyTimeoutMs >= 0 && start.busyTimeoutMs <= MAX_BUSY_TIMEOUT_MS)) {
      throw new InvalidArgumentError(
        'busyTimeout',
        `must be from 0 to ${MAX_BUSY_TIMEOUT_MS / 1000} seconds`,
      );
    }
    const deadline = this.records.now() + start.busyTimeoutMs;
    let interrupted: string | null = null;
    for (let delay = 50; ; delay = Math.min(1000, delay * 1.5)) {
      try {
        const written = await this.records.mutate(tenant, threadId, async (_store, current, now) => {
          const thread = current?.record ?? newThreadRecord(threadId, now);
          const live = liveRun(thread, now);
          if (live !== null && start.onBusy !== 'interrupt') {
            throw busy(thread, live, now, 'the run cannot start');
          }
          interrupted = live?.runId ?? null;
          const ended: EndedRun[] =
            thread.run === null
              ? []
              : [
                  {
                    runId: thread.run.runId,
                    fencingToken: thread.run.fencingToken,
                    startedAt: thread.run.startedAt,
                    endedAt: live === null ? thread.run.leaseExpiresAt : iso(now),
                    status: live === null ? 'expired' : 'interrupted',
                  },
                ];
          const run: LiveRun = {
            runId: `run-${randomBytes(12).toString('base64url')}`,
            fencingToken: thread.fence + 1,
            startedAt: iso(now),
            leaseExpiresAt: iso(now + start.leaseMs),
            leaseMs: start.leaseMs,
          };
          const by = actor === undefined ? {} : { actor };
          const events: AuditEvent[] = [];
          if (live !== null) {
            events.push({
              tenant,
              action: 'run.interrupted',
              ...by,
              threadId,
              runId: live.runId,
              outcome: 'ok',
              details: { fencingToken: live.fencingToken, by: run.runId },
            });
          }
          events.push({
            tenant,
            action: 'run.started',
            ...by,
            threadId,
            runId: run.runId,
            outcome: 'ok',
            details: {
              fencingToken: run.fencingToken,
              onBusy: start.onBusy,
              leaseMs: start.leaseMs,
              ...(thread.run !== null && live === null ? { expiredRunId: thread.run.runId } : {}),
            },
          });
          return {
            next: {
              ...thread,
              fence: run.fencingToken,
              run,
              recentRuns: [...ended, ...thread.recentRuns].slice(0, MAX_RECENT_RUNS),
              updatedAt: iso(now),
            },
            events,
          };
        });
        const run = written.record.run;
        if (run === null) throw new StorageUnavailableError('the run was not recorded; retry');
        return { run: liveRunView(threadId, run, this.records.now()), interrupted };
      } catch (error) {
        if (!(error instanceof ThreadBusyError) || start.onBusy !== 'wait') throw error;
        const remaining = deadline - this.records.now();
        if (remaining <= 0) throw error;
        await sleep(Math.min(remaining, delay * (0.75 + Math.random() / 2)));
      }
    }
  }

  /**
   * Renews the lease of the live run `runId` for `leaseMs` (default: the lease it started with);
   * `run_fenced` once it no longer holds the thread, its lease expired included.
   */
  async heartbeat(tenant: string, threadId: string, runId: string, leaseMs?: number): Promise<RunView> {
    checkThreadId(threadId);
    checkRunId(runId);
    if (leaseMs !== undefined) checkLease(leaseMs);
    const written = await this.records.mutate(tenant, threadId, async (_store, current, now) => {
      const thread = this.runHolder(current, threadId, runId, now);
      const held = thread.run as LiveRun;
      const run = {
        ...held,
        leaseMs: leaseMs ?? held.leaseMs,
        leaseExpiresAt: iso(now + (leaseMs ?? held.leaseMs)),
      };
      return { next: { ...thread, run, updatedAt: iso(now) } };
    });
    return liveRunView(threadId, written.record.run as LiveRun, this.records.now());
  }

  /**
   * Ends the live run `runId` as `finished` or `failed`. Idempotent: ending it again with the same
   * status answers the same; another status, or a run that no longer holds the thread, is
   * `run_fenced`.
   */
  async finishRun(
    tenant: string,
    threadId: string,
    runId: string,
    status: 'finished' | 'failed',
    actor?: string,
  ): Promise<RunView> {
    checkThreadId(threadId);
    checkRunId(runId);
    let view: RunView | undefined;
    await this.records.mutate(tenant, threadId, async (_store, current, now) => {
      const thread = current?.record;
      const ended = thread?.recentRuns.find((run) => run.runId === runId);
      if (thread !== undefined && ended !== undefined && ended.status === status) {
        view = endedRunView(threadId, ended);
        return {};
      }
      const holder = this.runHolder(current, threadId, runId, now);
      const run = holder.run as LiveRun;
      const done: EndedRun = {
        runId,
        fencingToken: run.fencingToken,
        startedAt: run.startedAt,
        endedAt: iso(now),
        status,
      };
      view = endedRunView(threadId, done);
      return {
        next: {
          ...holder,
          run: null,
          recentRuns: [done, ...holder.recentRuns].slice(0, MAX_RECENT_RUNS),
          updatedAt: iso(now),
        },
        events: [
          {
            tenant,
            action: 'run.finished',
            ...(actor === undefined ? {} : { actor }),
            threadId,
            runId,
            outcome: 'ok',
            details: { status, fencingToken: run.fencingToken },
          },
        ],
      };
    });
    return view as RunView;
  }

  async getRun(tenant: string, threadId: string, runId: string): Promise<RunView> {
    checkThreadId(threadId);
    checkRunId(runId);
    const current = await this.records.readThread(this.records.storeOf(tenant), tenant, threadId);
    if (current === null) throw noThread(threadId);
    const thread = current.record;
    if (thread.run?.runId === runId) return liveRunView(threadId, thread.run, this.records.now());
    const ended = thread.recentRuns.find((run) => run.runId === runId);
    if (ended === undefined) throw new NotFoundError(`thread ${threadId} has no run ${runId}`);
    return endedRunView(threadId, ended);
  }

  /** The thread whose live run is `runId`; throws not_found or run_fenced otherwise. */
  private runHolder(current: Snapshot | null, threadId: string, runId: string, now: number): ThreadRecord {
    if (current === null) throw noThread(threadId);
    const thread = current.record;
    if (thread.run?.runId === runId && liveRun(thread, now) !== null) return thread;
    if (statusOf(thread, runId) === 'unknown') {
      throw new NotFoundError(`thread ${threadId} has no run ${runId}`);
    }
    throw fenced(thread, runId);
  }
}
