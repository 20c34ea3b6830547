/**
 * The error taxonomy. Every error the domain raises on purpose is a {@link CairnError} with a stable
 * `code` of the API's error JSON (docs/api.md) and a `fault`: `caller` when the request was wrong (4xx), `system` when Cairn
 * or its storage failed (5xx). The HTTP layer maps codes to statuses in exactly one place
 * (`functions/http/errorResponse.ts`); nothing else chooses a status.
 */

export type ErrorCode =
  | 'invalid_argument'
  | 'unauthorized'
  | 'forbidden'
  | 'not_found'
  | 'method_not_allowed'
  | 'conflict'
  | 'base_mismatch'
  | 'thread_busy'
  | 'run_fenced'
  | 'precondition_failed'
  | 'payload_too_large'
  | 'missing_objects'
  | 'storage_unavailable'
  | 'not_configured'
  | 'integrity_error'
  | 'internal';

export type Fault = 'caller' | 'system';

export abstract class CairnError extends Error {
  abstract readonly code: ErrorCode;
  abstract readonly fault: Fault;
  /** Extra fields for the error JSON (`error.<name>`); never secrets or stored values. */
  readonly details: Record<string, unknown>;

  constructor(message: string, details: Record<string, unknown> = {}, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.details = details;
  }
}

/** Bad key, name, JSON, header combination or limit. `field` names what was wrong. */
export class InvalidArgumentError extends CairnError {
  readonly code = 'invalid_argument';
  readonly fault = 'caller';
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(`${field}: ${message}`);
  }
}

export class UnauthorizedError extends CairnError {
  readonly code = 'unauthorized';
  readonly fault = 'caller';
}

export class ForbiddenError extends CairnError {
  readonly code = 'forbidden';
  readonly fault = 'caller';
}

export class NotFoundError extends CairnError {
  readonly code = 'not_found';
  readonly fault = 'caller';
}

export class MethodNotAllowedError extends CairnError {
  readonly code = 'method_not_allowed';
  readonly fault = 'caller';
  constructor(
    method: string,
    readonly allow: readonly string[],
  ) {
    super(`method ${method} is not allowed here; allowed: ${allow.join(', ')}`);
  }
}

/** The write conflicts with what is stored (e.g. a local key that is another key's folder). */
export class ConflictError extends CairnError {
  readonly code = 'conflict';
  readonly fault = 'caller';
}

/**
 * A value sent as a delta does not resolve: its base is not a value the thread holds, or the result
 * is not the value the digest names. `field` names the value; nothing was written. The sender
 * sends the value whole instead.
 */
export class BaseMismatchError extends CairnError {
  readonly code = 'base_mismatch';
  readonly fault = 'caller';
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(`${field}: ${message}`, { field });
  }
}

/**
 * A thread is held by a live run and the request may not wait for it (or waited in vain): a run
 * start with `onBusy` reject or an expired wait, a write without the holder's run id, a delete.
 * `retryAfterSeconds` (at least 1) is when the holder's lease expires unless it is renewed;
 * `holder` is that run's id.
 */
export class ThreadBusyError extends CairnError {
  readonly code = 'thread_busy';
  readonly fault = 'caller';
  constructor(
    message: string,
    readonly holder: string,
    readonly retryAfterSeconds: number,
  ) {
    super(message, { runId: holder, retryAfter: retryAfterSeconds });
  }
}

/**
 * A request names a run that no longer holds its thread (interrupted, finished, failed, its lease
 * expired, or never there): nothing it sent was stored. `status` is that run's status as known.
 */
export class RunFencedError extends CairnError {
  readonly code = 'run_fenced';
  readonly fault = 'caller';
  constructor(
    message: string,
    readonly runId: string,
    readonly status: string,
  ) {
    super(message, { runId, status });
  }
}

/**
 * A compare-and-swap lost: `ifMatch` did not match or `ifAbsent` found the key. Nothing was written.
 * `currentEtag` is the stored version when the store knows it cheaply.
 */
export class PreconditionFailedError extends CairnError {
  readonly code = 'precondition_failed';
  readonly fault = 'caller';
  constructor(
    message: string,
    readonly currentEtag?: string,
  ) {
    super(message);
  }
}

export class PayloadTooLargeError extends CairnError {
  readonly code = 'payload_too_large';
  readonly fault = 'caller';
  constructor(
    readonly limit: number,
    what = 'body',
  ) {
    super(`${what} exceeds the limit of ${limit} bytes; nothing was written`, { limit });
  }
}

/**
 * The storage failed, timed out or could not be reached. Retryable; never reported as "absent".
 * The cause is kept for the log, never sent to the caller.
 */
export class StorageUnavailableError extends CairnError {
  readonly code = 'storage_unavailable';
  readonly fault = 'system';
  constructor(message = 'the storage is unavailable; retry later', options?: { cause?: unknown }) {
    super(message, {}, options);
  }
}

/**
 * Readiness: a configured store did not answer. `checks` gives each store's outcome by name (no
 * endpoint, path or error text). A 503 like {@link StorageUnavailableError}, with `Retry-After`.
 */
export class NotReadyError extends CairnError {
  readonly code = 'storage_unavailable';
  readonly fault = 'system';
  constructor(message: string, checks: Readonly<Record<string, string>>) {
    super(message, { checks });
  }
}

/**
 * The route belongs to a part of Cairn that this deployment does not configure (auditing off, no
 * table service for memory or session archives, no encryption keys, no Blob backend for a
 * migration). Not the caller's fault and not a bug, and retrying does not help until an operator
 * sets `setting`, which the message and the error JSON name. Nothing was read or written.
 */
export class NotConfiguredError extends CairnError {
  readonly code = 'not_configured';
  readonly fault = 'system';
  constructor(
    readonly setting: string,
    message: string,
  ) {
    super(message, { setting });
  }
}

/**
 * A checkpoint references objects that are not stored (or not with the size it needs). `missing`
 * lists their object keys (the first 1,000; `missingCount` says how many in all).
 */
export class MissingObjectsError extends CairnError {
  readonly code = 'missing_objects';
  readonly fault = 'caller';
  constructor(
    readonly missing: readonly string[],
    readonly missingCount = missing.length,
  ) {
    super(
      `${missingCount} referenced object(s) are not stored or have the wrong size; upload them, then publish again`,
      { missing: missing.slice(0, 1000), missingCount },
    );
  }
}

/** Stored bytes failed their hash. */
export class IntegrityError extends CairnError {
  readonly code = 'integrity_error';
  readonly fault = 'system';
}

/** A bug: an invariant did not hold. */
export class InternalError extends CairnError {
  readonly code = 'internal';
  readonly fault = 'system';
}

/** A setting is missing or invalid; the app must not start. */
export class ConfigurationError extends Error {
  constructor(
    readonly setting: string,
    message: string,
  ) {
    super(`${setting}: ${message}`);
    this.name = 'ConfigurationError';
  }
}
