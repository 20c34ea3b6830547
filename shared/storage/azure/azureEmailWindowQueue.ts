import type { QueueClient } from '@azure/storage-queue';

import {
  type EmailWindowMessage,
  type EmailWindowQueue,
  encodeEmailWindowMessage,
} from '../../coordination/emailWindowQueue';
import { isNotFound, storageCall } from './azureErrors';

/** {@link EmailWindowQueue} on Azure Queue Storage; creates the queue on first use when missing. */
export class AzureEmailWindowQueue implements EmailWindowQueue {
  private ready: Promise<void> | undefined;

  constructor(
    private readonly queue: QueueClient,
    private readonly timeoutMs: number,
  ) {}

  async send(message: EmailWindowMessage): Promise<void> {
    await this.ensureQueue();
    await storageCall(this.timeoutMs, async (abortSignal) => {
      try {
        await this.queue.sendMessage(encodeEmailWindowMessage(message), {
          messageTimeToLive: -1,
          abortSignal,
        });
      } catch (error) {
        // The queue was deleted since: make it again on the next send.
        if (isNotFound(error)) this.ready = undefined;
        throw error;
      }
    });
  }

  private ensureQueue(): Promise<void> {
    this.ready ??= storageCall(this.timeoutMs, async (abortSignal) => {
      await this.queue.createIfNotExists({ abortSignal });
    }).catch((error: unknown) => {
      this.ready = undefined;
      throw error;
    });
    return this.ready;
  }
}
