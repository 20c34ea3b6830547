import { CairnError, InternalError, StorageUnavailableError } from '../../protocol/errors';

/**
 * Azure Storage errors, translated in one place (by status and service error code, never by message
 * text). Callers first recognise the outcome they expect (`isAzureError(error, 404)` for absent,
 * `isConditionFailure` for a lost compare-and-swap) and hand everything else to
 * {@link translateAzureError}.
 */

interface AzureLikeError {
  statusCode?: number;
  code?: string;
  name?: string;
  details?: { errorCode?: string };
}

export function azureErrorCode(error: unknown): string | undefined {
  const e = error as AzureLikeError | undefined;
  return e?.details?.errorCode ?? e?.code;
}

export function azureStatus(error: unknown): number | undefined {
  return (error as AzureLikeError | undefined)?.statusCode;
}

/** True for a service error with `status` and, when given, one of `codes`. */
export function isAzureError(error: unknown, status: number, ...codes: string[]): boolean {
  if (azureStatus(error) !== status) return false;
  if (codes.length === 0) return true;
  const code = azureErrorCode(error);
  return code !== undefined && codes.includes(code);
}

/**
 * A conditional write that lost: If-Match not met (412), or If-None-Match: * on an existing blob,
 * which Azure answers 409 BlobAlreadyExists as often as 412.
 */
export function isConditionFailure(error: unknown): boolean {
  return isAzureError(error, 412) || isAzureError(error, 409, 'BlobAlreadyExists');
}

/**
 * Tries of one conditional write sent without the SDK's retries whose earlier tries certainly did
 * not land (the Blob key/value store's and the Table memory store's), as many as the SDK's own.
 */
export const CONDITIONAL_WRITE_TRIES = 4;

/** A conditional write that may have landed: the caller cannot be told it won, nor that it lost. */
export function writeNotConfirmed(cause: unknown): StorageUnavailableError {
  return new StorageUnavailableError('the storage did not confirm the write; it may have landed', { cause });
}

/** An answer after which a write may have landed: no answer at all, a timeout, throttling, a 5xx. */
export function mayHaveLanded(error: unknown): boolean {
  const status = azureStatus(error);
  return status === undefined || status === 408 || status === 429 || status >= 500;
}

/** An absent blob or container. */
export function isNotFound(error: unknown): boolean {
  return isAzureError(error, 404);
}

/**
 * Anything not recognised by the caller: timeouts, aborts, network errors, throttling, 5xx and
 * refused credentials are the storage's fault (503, retryable); another 4xx means Cairn sent a
 * request it should not have (500).
 */
export function translateAzureError(error: unknown): CairnError {
  if (error instanceof CairnError) return error;
  const status = azureStatus(error);
  if (
    status === undefined ||
    status === 401 ||
    status === 403 ||
    status === 408 ||
    status === 429 ||
    status >= 500
  ) {
    return new StorageUnavailableError('the storage is unavailable; retry later', { cause: error });
  }
  return new InternalError(
    `the storage refused a request (${status} ${azureErrorCode(error) ?? ''})`,
    {},
    {
      cause: error,
    },
  );
}

/**
 * Runs one storage operation under a deadline of `timeoutMs` (its signal aborts every request of
 * the operation, retries included) and translates every Azure error once. The timer goes as soon
 * as the operation settles: `AbortSignal.timeout` keeps one timer alive per call for the whole
 * deadline, thousands of them under load.
 */
export async function storageCall<T>(
  timeoutMs: number,
  operation: (abortSignal: AbortSignal) => Promise<T>,
): Promise<T> {
  const controller = new AbortController();
  const timer = setTimeout(
    () => controller.abort(new DOMException('the storage did not answer in time', 'TimeoutError')),
    timeoutMs,
  );
  try {
    return await operation(controller.signal);
  } catch (error) {
    throw translateAzureError(error);
  } finally {
    clearTimeout(timer);
  }
}
