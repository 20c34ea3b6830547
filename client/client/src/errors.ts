/**
 * What a call to Cairn can fail with, apart from a caller's own bad argument (a `TypeError` or an
 * invalid-argument error thrown before anything is sent):
 *
 * - {@link CairnHttpError}: Cairn answered with an error status. `code` is the API's error code
 *   (`not_found`, `precondition_failed`, `conflict`, ...); 4xx is the caller's to fix, 5xx the
 *   service's. Transient statuses (429, 502, 503, 504) arrive here only once retries are exhausted
 *   or were not safe.
 * - {@link CairnNetworkError}: no answer arrived (connection refused or cut, DNS). `maybeReceived`
 *   says whether the service may have received and acted on the request.
 * - {@link CairnTimeoutError}: a {@link CairnNetworkError} for an answer that did not arrive in
 *   time. The request may have been carried out.
 */

/** An error answer of Cairn (`{"error": {"code", "message", ...}}`), with its status. */
export class CairnHttpError extends Error {
  override readonly name = 'CairnHttpError';

  constructor(
    readonly status: number,
    /** The API's error code; `unknown` when the answer was not Cairn's error JSON (a proxy's page). */
    readonly code: string,
    message: string,
    /** The other fields of the error object, e.g. `missing` (422) or `latest` (409 on publish). */
    readonly details: Record<string, unknown> = {},
    /** The `ETag` header of the answer: on 412 the current version of the item, when it exists. */
    readonly etag?: string,
    /** The `x-request-id` of the answer, to find the request in the service's logs. */
    readonly requestId?: string,
  ) {
    super(`${status} ${code}: ${message}`);
  }

  /** True for the caller's mistakes (4xx): sending the same request again fails the same way. */
  get isCallerError(): boolean {
    return this.status >= 400 && this.status < 500 && this.status !== 429;
  }

  /** True for answers that may succeed later (429, 502, 503, 504). */
  get isTransient(): boolean {
    return TRANSIENT_STATUSES.has(this.status);
  }
}

/** Statuses that say "try again later" rather than "this request is wrong". */
export const TRANSIENT_STATUSES: ReadonlySet<number> = new Set([429, 502, 503, 504]);

/** No answer arrived. The service's fault (or the network's), never the caller's. */
export class CairnNetworkError extends Error {
  override readonly name: string = 'CairnNetworkError';

  constructor(
    message: string,
    /**
     * False only when the request certainly never reached the service (the connection was never
     * made): then nothing was done. True means it may have been carried out.
     */
    readonly maybeReceived: boolean,
    /** Attempts made, the first included. */
    readonly attempts: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** The answer did not arrive within the request's timeout. The request may have been carried out. */
export class CairnTimeoutError extends CairnNetworkError {
  override readonly name = 'CairnTimeoutError';

  constructor(
    message: string,
    readonly timeoutMs: number,
    attempts: number,
    options?: { cause?: unknown },
  ) {
    super(message, true, attempts, options);
  }
}
