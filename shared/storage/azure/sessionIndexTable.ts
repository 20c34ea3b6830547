import { odata, type TableClient } from '@azure/data-tables';

import { lru } from '../../lru';
import { StorageUnavailableError } from '../../protocol/errors';
import { casPause } from '../../retry';
import type { SessionIndex, SessionPage, SessionRecord } from '../sessionIndex';
import { isAzureError, isNotFound, storageCall } from './azureErrors';
import { TableRows } from './tableRows';

/**
 * The session index on Azure Table Storage (Azurite locally), in one table with two kinds of rows:
 *
 * - ownership: PartitionKey `s:<session id>`, RowKey `owner`, `{tenant, createdAt}`: one partition
 *   per session, written once by a create-only insert (`createEntity`), so the first writer wins
 *   atomically and no partition is shared by tenants;
 * - the index record: PartitionKey `t:<tenant>`, RowKey `<session id>`, `{checkpointId, updatedAt,
 *   data}`: one partition per tenant, so a tenant's listing is one ordered range query (RowKeys sort
 *   ascending) and tenants never share a hot partition.
 *
 * Updates are conditional: `createEntity` when absent, `updateEntity(..., 'Replace', {etag})` on
 * the version read (the SDK's default etag is `*`, unconditional: never relied on). The table is
 * created on first use. Owners never change, so owners seen are remembered (bounded).
 */
export class TableSessionIndex implements SessionIndex {
  private readonly owners = lru<string, string>(10_000);
  private readonly rows: TableRows;

  constructor(
    private readonly table: TableClient,
    private readonly timeoutMs: number,
  ) {
    this.rows = new TableRows(table);
  }

  async ownerOf(sessionId: string): Promise<string | null> {
    const known = this.owners.get(sessionId);
    if (known !== undefined) return known;
    const owner = await this.call(async (abortSignal) => {
      const entity = await this.rows.get(ownerPartition(sessionId), OWNER_ROW, abortSignal);
      return entity === null ? null : String(entity['tenant']);
    });
    if (owner !== null) this.remember(sessionId, owner);
    return owner;
  }

  async claim(sessionId: string, tenant: string): Promise<string> {
    const known = await this.ownerOf(sessionId);
    if (known !== null) return known;
    const owner = await this.call(async (abortSignal) => {
      const created = await this.rows.create(
        {
          partitionKey: ownerPartition(sessionId),
          rowKey: OWNER_ROW,
          tenant,
          createdAt: new Date().toISOString(),
        },
        abortSignal,
      );
      if (created) return tenant;
      const entity = await this.rows.get(ownerPartition(sessionId), OWNER_ROW, abortSignal);
      if (entity === null)
        throw new StorageUnavailableError('the session owner could not be read back; retry');
      return String(entity['tenant']);
    });
    this.remember(sessionId, owner);
    return owner;
  }

  async get(tenant: string, sessionId: string): Promise<SessionRecord | null> {
    return this.call(async (abortSignal) => {
      const entity = await this.rows.get(tenantPartition(tenant), sessionId, abortSignal);
      return entity === null ? null : recordOf(entity);
    });
  }

  async list(tenant: string, options: { after?: string; limit: number }): Promise<SessionPage> {
    const { limit } = options;
    return this.call(async (abortSignal) => {
      const filter =
        options.after === undefined || options.after === ''
          ? odata`PartitionKey eq ${tenantPartition(tenant)}`
          : odata`PartitionKey eq ${tenantPartition(tenant)} and RowKey gt ${options.after}`;
      const sessions: SessionRecord[] = [];
      try {
        // One more than asked tells whether another page exists; the iterator follows the
        // service's continuations (a page may hold fewer entities than asked).
        const entities = this.table.listEntities({ queryOptions: { filter }, abortSignal });
        for await (const page of entities.byPage({ maxPageSize: Math.min(1000, limit + 1) })) {
          for (const entity of page) sessions.push(recordOf(entity));
          if (sessions.length > limit) break;
        }
      } catch (error) {
        if (!isNotFound(error)) throw error;
      }
      if (sessions.length <= limit) return { sessions, next: null };
      sessions.length = limit;
      return { sessions, next: sessions[limit - 1]?.id ?? null };
    });
  }

  async update(
    tenant: string,
    sessionId: string,
    decide: (current: SessionRecord | null) => Promise<SessionRecord | null>,
  ): Promise<void> {
    const partitionKey = tenantPartition(tenant);
    for (let attempt = 0; attempt < UPDATE_ATTEMPTS; attempt++) {
      await casPause(attempt);
      const done = await this.call(async (abortSignal) => {
        const entity = await this.rows.get(partitionKey, sessionId, abortSignal);
        const next = await decide(entity === null ? null : recordOf(entity));
        if (next === null) return true;
        const row = {
          partitionKey,
          rowKey: sessionId,
          checkpointId: next.checkpointId,
          updatedAt: next.updatedAt,
          ...(next.data === null ? {} : { data: JSON.stringify(next.data) }),
        };
        if (entity === null) return this.rows.create(row, abortSignal);
        try {
          await this.table.updateEntity(row, 'Replace', { etag: entity.etag, abortSignal });
          return true;
        } catch (error) {
          if (isAzureError(error, 412) || isNotFound(error)) return false;
          throw error;
        }
      });
      if (done) return;
    }
    throw new StorageUnavailableError('the session index is changing too fast to update; retry');
  }

  async remove(tenant: string, sessionId: string): Promise<boolean> {
    return this.call(async (abortSignal) => {
      try {
        await this.table.deleteEntity(tenantPartition(tenant), sessionId, { abortSignal });
        return true;
      } catch (error) {
        if (isNotFound(error)) return false;
        throw error;
      }
    });
  }

  private call<T>(operation: (abortSignal: AbortSignal) => Promise<T>): Promise<T> {
    return storageCall(this.timeoutMs, operation);
  }

  private remember(sessionId: string, owner: string): void {
    this.owners.set(sessionId, owner);
  }
}

const OWNER_ROW = 'owner';
const UPDATE_ATTEMPTS = 16;

/** Session ids and tenant ids use `[A-Za-z0-9._-]`, all legal in table keys. */
function ownerPartition(sessionId: string): string {
  return `s:${sessionId}`;
}

function tenantPartition(tenant: string): string {
  return `t:${tenant}`;
}

function recordOf(entity: Record<string, unknown>): SessionRecord {
  const data = entity['data'];
  return {
    id: String(entity['rowKey']),
    checkpointId: String(entity['checkpointId']),
    updatedAt: String(entity['updatedAt']),
    data: typeof data === 'string' ? (JSON.parse(data) as Record<string, unknown>) : null,
  };
}
