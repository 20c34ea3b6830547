import type { InvocationContext } from '@azure/functions';
import * as df from 'durable-functions';

import { NotFoundError } from '#shared/protocol/errors';

import { isJobId } from './jobIds';

/**
 * What the durable admin jobs (migrations, rewraps) share: starting one, reading its status as the
 * API's job status, and the retry and batching of their activities.
 */

/** A job's status as the API answers it, from the durable runtime status. */
export type JobState = 'pending' | 'running' | 'completed' | 'failed';

export function jobState(runtimeStatus: string): JobState {
  switch (runtimeStatus) {
    case 'Pending':
      return 'pending';
    case 'Completed':
      return 'completed';
    case 'Failed':
    case 'Terminated':
    case 'Canceled':
      return 'failed';
    default:
      return 'running';
  }
}

/**
 * Transient failures (a storage outage, an overloaded account) are retried: 5 attempts, 1, 2, 4
 * and 8 s apart, so that a long job rides out a minute of trouble instead of failing.
 */
export function jobRetryOptions(): df.RetryOptions {
  const options = new df.RetryOptions(1000, 5);
  options.backoffCoefficient = 2;
  options.maxRetryIntervalInMilliseconds = 10_000;
  return options;
}

export function chunk<T>(items: readonly T[], size: number): T[][] {
  const chunks: T[][] = [];
  for (let index = 0; index < items.length; index += size) chunks.push(items.slice(index, index + size));
  return chunks;
}

/** Starts an instance of the orchestration `name` with `input`; its id. */
export function startJob(context: InvocationContext, name: string, input: unknown): Promise<string> {
  return df.getClient(context).startNew(name, { input });
}

/**
 * The status of the job `id` that is an instance of the orchestration `name`, or a 404 (`unknown`
 * as its message) when there is none: an id no job can have, an id the runtime does not know, and
 * the id of another kind of job (a rewrap's id is no migration) alike.
 */
export async function jobStatus(
  context: InvocationContext,
  name: string,
  id: string,
  unknown: string,
): Promise<df.DurableOrchestrationStatus> {
  if (!isJobId(id)) throw new NotFoundError(unknown);
  let status;
  try {
    // The client puts the id into the status URL as it is: encoded, an id is only ever an id.
    status = await df.getClient(context).getStatus(encodeURIComponent(id));
  } catch (error) {
    if (isUnknownInstance(error)) throw new NotFoundError(unknown);
    throw error;
  }
  if (status.name !== name) throw new NotFoundError(unknown);
  return status;
}

/**
 * Whether the durable client's error is its answer to an instance it does not know (HTTP 404).
 * The error's status is taken where the client gives one (`statusCode`, `status`, or a `response`
 * with a status). durable-functions 3.5 gives none on `getStatus`: it throws a plain Error whose
 * message names the 404, so that message (the client's own sentence, not free text) is the
 * fallback; every other failure stays a failure (503 or 500 as the pipeline maps it).
 */
export function isUnknownInstance(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { statusCode, status, response } = error as {
    statusCode?: unknown;
    status?: unknown;
    response?: { status?: unknown } | null;
  };
  const code = statusCode ?? status ?? response?.status;
  if (code !== undefined) return code === 404;
  return error instanceof Error && /replied with HTTP 404 response/.test(error.message);
}
