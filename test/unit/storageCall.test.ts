import { describe, expect, it } from 'vitest';

import { InternalError, StorageUnavailableError } from '../../shared/protocol/errors';
import { storageCall } from '../../shared/storage/azure/azureErrors';

describe('storageCall', () => {
  it('aborts an operation that outlives its deadline and reports the storage as unavailable', async () => {
    let seen: AbortSignal | undefined;
    const call = storageCall(50, (signal) => {
      seen = signal;
      return new Promise((_resolve, reject) =>
        signal.addEventListener('abort', () => reject(signal.reason as Error)),
      );
    });
    await expect(call).rejects.toBeInstanceOf(StorageUnavailableError);
    expect(seen?.aborted).toBe(true);
  });

  it('returns the result and leaves the signal alone once the operation has settled', async () => {
    let seen: AbortSignal | undefined;
    const result = await storageCall(30, async (signal) => {
      seen = signal;
      return 'done';
    });
    expect(result).toBe('done');
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(seen?.aborted).toBe(false);
  });

  it('translates Azure errors once: throttling is unavailable, a refused request internal', async () => {
    const fail = (statusCode: number) =>
      storageCall(1000, () => Promise.reject(Object.assign(new Error('refused'), { statusCode })));
    await expect(fail(429)).rejects.toBeInstanceOf(StorageUnavailableError);
    await expect(fail(400)).rejects.toBeInstanceOf(InternalError);
  });
});
