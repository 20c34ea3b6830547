import { randomUUID } from 'node:crypto';

import { BlobServiceClient, StorageSharedKeyCredential } from '@azure/storage-blob';
import { QueueClient, StorageSharedKeyCredential as QueueKeyCredential } from '@azure/storage-queue';

import { AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY } from '../../dev/azurite';
import {
  decodeEmailWindowMessage,
  type EmailWindowMessage,
} from '../../shared/coordination/emailWindowQueue';
import { StorageUnavailableError } from '../../shared/protocol/errors';
import { BlobKeyValueStoreFactory } from '../../shared/storage/azure/blobKeyValueStore';
import type {
  ItemPage,
  KeyValueStore,
  KeyValueStoreFactory,
  ListOptions,
  ListPage,
  StoredItem,
  StoredValue,
  WriteConditions,
  WriteResult,
} from '../../shared/storage/keyValueStore';
import { LocalKeyValueStoreFactory } from '../../shared/storage/local/localKeyValueStore';
import { SYSTEM_NAMESPACE } from '../../shared/tenants/systemNamespace';
import { azurite } from './azurite';
import { tempDir } from './cleanup';
import { STORAGE_TIMEOUT_MS } from './timeouts';

/**
 * Real stores for the coordination tests (a fresh temp folder, or a fresh container base in the
 * run's Azurite) and the one kind of fake they allow: a wrapper around a real store that injects a
 * fault the real store cannot produce on demand (a failed read, a write that lands and then times
 * out, a competing write just before ours).
 */

export type Backend = 'local' | 'blob';
export const BACKENDS: Backend[] = ['local', 'blob'];

export function realStores(backend: Backend): KeyValueStoreFactory {
  if (backend === 'local') {
    return new LocalKeyValueStoreFactory(tempDir('coord'), 2 * 1024 * 1024);
  }
  const service = new BlobServiceClient(
    azurite().blobEndpoint,
    new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY),
  );
  return new BlobKeyValueStoreFactory(
    service,
    `c${randomUUID().replaceAll('-', '').slice(0, 16)}`,
    2 * 1024 * 1024,
    STORAGE_TIMEOUT_MS,
  );
}

export interface Faults {
  /** Reads of matching keys throw StorageUnavailableError (nothing is read). */
  failReads?: (key: string) => boolean;
  /** The write lands, then the call throws StorageUnavailableError, as a timeout after the fact. */
  landThenTimeout?: (key: string, write: number) => boolean;
  /** The write throws StorageUnavailableError without reaching the store. */
  failWrites?: (key: string, write: number) => boolean;
  /** Runs before each write of a matching key (e.g. a competing real write, so ours really loses). */
  beforeWrite?: (key: string, write: number) => Promise<void>;
}

/** A real store with injected faults; counts the writes it was asked for, per key. */
export class FaultyStore implements KeyValueStore {
  readonly writes = new Map<string, number>();

  constructor(
    readonly inner: KeyValueStore,
    readonly faults: Faults = {},
  ) {}

  writesTo(key: string): number {
    return this.writes.get(key) ?? 0;
  }

  async read(key: string): Promise<StoredValue | null> {
    if (this.faults.failReads?.(key) === true) throw new StorageUnavailableError('injected read failure');
    return this.inner.read(key);
  }

  async head(key: string): Promise<StoredItem | null> {
    if (this.faults.failReads?.(key) === true) throw new StorageUnavailableError('injected read failure');
    return this.inner.head(key);
  }

  async write(key: string, value: Buffer, conditions?: WriteConditions): Promise<WriteResult> {
    const write = this.writesTo(key) + 1;
    this.writes.set(key, write);
    await this.faults.beforeWrite?.(key, write);
    if (this.faults.failWrites?.(key, write) === true) {
      throw new StorageUnavailableError('injected write failure (not sent)');
    }
    const result = await this.inner.write(key, value, conditions);
    if (this.faults.landThenTimeout?.(key, write) === true) {
      throw new StorageUnavailableError('injected timeout after the write landed');
    }
    return result;
  }

  append(key: string, bytes: Buffer, conditions?: WriteConditions): Promise<WriteResult> {
    return this.inner.append(key, bytes, conditions);
  }

  delete(key: string, conditions?: Pick<WriteConditions, 'ifMatch'>): Promise<boolean> {
    return this.inner.delete(key, conditions);
  }

  list(options: ListOptions): Promise<ListPage> {
    return this.inner.list(options);
  }

  listItems(options: ListOptions): Promise<ItemPage> {
    return this.inner.listItems(options);
  }
}

/** A factory whose tenants' stores are wrapped by `wrap` (the registry's namespace stays real). */
export function faultyStores(
  inner: KeyValueStoreFactory,
  wrap: (tenant: string, store: KeyValueStore) => KeyValueStore,
): KeyValueStoreFactory {
  return {
    kind: inner.kind,
    maxValueBytes: inner.maxValueBytes,
    forTenant: (tenant) =>
      tenant === SYSTEM_NAMESPACE ? inner.forTenant(tenant) : wrap(tenant, inner.forTenant(tenant)),

    forSpace: (space, tenant) => inner.forSpace(space, tenant),
  };
}

/** A fresh, uniquely named queue in the run's Azurite (created). */
export async function freshQueue(): Promise<QueueClient> {
  const queue = new QueueClient(
    `${azurite().queueEndpoint}/q${randomUUID().replaceAll('-', '').slice(0, 20)}`,
    new QueueKeyCredential(AZURITE_ACCOUNT, AZURITE_ACCOUNT_KEY),
  );
  await queue.createIfNotExists();
  return queue;
}

/** Takes every message off `queue` (they stay invisible for 5 minutes) and decodes them. */
export async function drainQueue(queue: QueueClient): Promise<EmailWindowMessage[]> {
  const messages: EmailWindowMessage[] = [];
  for (;;) {
    const batch = await queue.receiveMessages({ numberOfMessages: 32, visibilityTimeout: 300 });
    if (batch.receivedMessageItems.length === 0) return messages;
    for (const item of batch.receivedMessageItems) messages.push(decodeEmailWindowMessage(item.messageText));
  }
}
