import type { HttpResponseInit } from '@azure/functions';

import { errorSummary, type Logger } from '#shared/logging';
import {
  CairnError,
  type ErrorCode,
  MethodNotAllowedError,
  NotConfiguredError,
  PreconditionFailedError,
  ThreadBusyError,
} from '#shared/protocol/errors';

/** The one mapping from error codes to HTTP statuses (docs/api.md). */
export const STATUS_BY_CODE: Readonly<Record<ErrorCode, number>> = {
  invalid_argument: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  base_mismatch: 409,
  thread_busy: 409,
  run_fenced: 409,
  precondition_failed: 412,
  payload_too_large: 413,
  missing_objects: 422,
  storage_unavailable: 503,
  not_configured: 501,
  integrity_error: 500,
  internal: 500,
};

/** The response for any thrown value: Cairn's errors by their code, anything else as a 500 bug. */
export function errorResponse(error: unknown, log: Logger): HttpResponseInit {
  const known = error instanceof CairnError ? error : undefined;
  // A part that is not configured is the deployment's choice, not a failure: the request line's
  // 501 says enough, and a client calling it in a loop must not flood the error log.
  if (known === undefined || (known.fault === 'system' && !(known instanceof NotConfiguredError))) {
    // With the stack (its frames only): a system fault is a bug or an outage to trace.
    log.error({ err: errorSummary(error, { stack: true }) }, 'request failed');
  }
  const code: ErrorCode = known?.code ?? 'internal';
  const message = known?.message ?? 'internal error; the request id identifies it in the logs';
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (code === 'unauthorized') headers['www-authenticate'] = 'Bearer';
  if (code === 'storage_unavailable') headers['retry-after'] = '1';
  if (known instanceof ThreadBusyError) headers['retry-after'] = String(known.retryAfterSeconds);
  if (known instanceof MethodNotAllowedError) headers['allow'] = known.allow.join(', ');
  if (known instanceof PreconditionFailedError && known.currentEtag !== undefined) {
    headers['etag'] = known.currentEtag;
  }
  return {
    status: STATUS_BY_CODE[code],
    headers,
    jsonBody: { error: { code, message, ...(known?.details ?? {}) } },
  };
}
