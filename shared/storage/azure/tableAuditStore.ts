import { odata, type TableClient, type TableEntityResult } from '@azure/data-tables';

import type { AuditStore, RecordQuery, StoredMarker } from '../../audit/auditStore';
import type { PendingCheck, PendingEvent } from '../../audit/pending';
import type { AuditRecord } from '../../protocol/audit/chain';
import { storedHead } from '../../protocol/audit/headChain';
import type { SignedHead } from '../../protocol/audit/headSignature';
import { isAzureError, isNotFound, storageCall } from './azureErrors';
import { TableRows } from './tableRows';

/**
 * The audit trail on Azure Table Storage (Azurite locally), one table (CAIRN_AUDIT_TABLE), one
 * partition per tenant (`t:<tenant>`), so that a tenant's records are one ordered range and
 * tenants never share a hot partition. Rows of a tenant:
 * - `r:<seq, 12 digits>`: a record (its canonical JSON, plus `threadId` and `action` as properties
 *   for server-side filters), created with `createEntity` (create-only: one writer of a seq wins);
 * - `e:<event id>`: a receipt, the seq of the event's record (create-only);
 * - `p:<event id>`: a pending marker (upsert; a repair claims it by updating it on its ETag);
 * - `h`: the head hint (upsert);
 * - `s:<seq, 12 digits>`: a signed head (upsert).
 * The partition `tenants` lists the tenants with a trail (RowKey = tenant id). Only single-entity
 * operations are used (Azurite may ignore If-Match inside batches). The table is created on first
 * use. Tenant ids (`[A-Za-z0-9._-]`) and event ids (`[A-Za-z0-9._:~-]`) are legal in keys.
 */
export class TableAuditStore implements AuditStore {
  private readonly rows: TableRows;

  constructor(
    private readonly table: TableClient,
    private readonly timeoutMs: number,
  ) {
    this.rows = new TableRows(table);
  }

  createRecord(tenant: string, record: AuditRecord): Promise<boolean> {
    return this.call((signal) =>
      this.rows.create(
        {
          partitionKey: partition(tenant),
          rowKey: recordRow(record.seq),
          json: JSON.stringify(record),
          action: record.action,
          ...(record.threadId === undefined ? {} : { threadId: record.threadId }),
        },
        signal,
      ),
    );
  }

  readRecord(tenant: string, seq: number): Promise<AuditRecord | null> {
    return this.call(async (signal) => {
      const entity = await this.rows.get(partition(tenant), recordRow(seq), signal);
      return entity === null ? null : recordOf(entity);
    });
  }

  listRecords(tenant: string, query: RecordQuery): Promise<AuditRecord[]> {
    return this.call(async (abortSignal) => {
      let filter = odata`PartitionKey eq ${partition(tenant)} and RowKey gt ${recordRow(query.afterSeq)} and RowKey lt ${'r;'}`;
      if (query.threadId !== undefined) filter += ` and ${odata`threadId eq ${query.threadId}`}`;
      if (query.action !== undefined) filter += ` and ${odata`action eq ${query.action}`}`;
      const records: AuditRecord[] = [];
      try {
        const entities = this.table.listEntities({ queryOptions: { filter }, abortSignal });
        // The service follows its continuations: a page may hold fewer entities than asked.
        for await (const page of entities.byPage({ maxPageSize: Math.min(1000, query.limit) })) {
          for (const entity of page) {
            records.push(recordOf(entity));
            if (records.length >= query.limit) return records;
          }
        }
      } catch (error) {
        if (!isNotFound(error)) throw error;
      }
      return records;
    });
  }

  createReceipt(tenant: string, eventId: string, seq: number): Promise<void> {
    return this.call(async (signal) => {
      await this.rows.create({ partitionKey: partition(tenant), rowKey: `e:${eventId}`, seq }, signal);
    });
  }

  readReceipt(tenant: string, eventId: string): Promise<number | null> {
    return this.call(async (signal) => {
      const entity = await this.rows.get(partition(tenant), `e:${eventId}`, signal);
      return entity === null ? null : Number(entity['seq']);
    });
  }

  putMarker(tenant: string, event: PendingEvent, check: PendingCheck): Promise<void> {
    return this.call((signal) =>
      this.rows.upsert(
        { partitionKey: partition(tenant), rowKey: `p:${event.id}`, json: JSON.stringify({ event, check }) },
        signal,
      ),
    );
  }

  readMarker(tenant: string, eventId: string): Promise<StoredMarker | null> {
    return this.call(async (signal) => {
      const entity = await this.rows.get(partition(tenant), `p:${eventId}`, signal);
      return entity === null ? null : markerOf(entity);
    });
  }

  listMarkers(tenant: string, limit: number): Promise<StoredMarker[]> {
    return this.call(async (abortSignal) => {
      const filter = odata`PartitionKey eq ${partition(tenant)} and RowKey gt ${'p:'} and RowKey lt ${'p;'}`;
      const markers: StoredMarker[] = [];
      try {
        const entities = this.table.listEntities({ queryOptions: { filter }, abortSignal });
        for await (const page of entities.byPage({ maxPageSize: Math.min(1000, limit) })) {
          for (const entity of page) {
            markers.push(markerOf(entity));
            if (markers.length >= limit) return markers;
          }
        }
      } catch (error) {
        if (!isNotFound(error)) throw error;
      }
      return markers;
    });
  }

  claimMarker(
    tenant: string,
    marker: StoredMarker,
    claim: { by: string; untilMs: number },
  ): Promise<string | null> {
    return this.call(async (abortSignal) => {
      try {
        const updated = await this.table.updateEntity(
          {
            partitionKey: partition(tenant),
            rowKey: `p:${marker.event.id}`,
            json: JSON.stringify({ event: marker.event, check: marker.check }),
            claimBy: claim.by,
            claimUntilMs: claim.untilMs,
          },
          'Replace',
          { etag: marker.etag, abortSignal },
        );
        if (updated.etag === undefined) throw new Error('the table answered an update without its ETag');
        return updated.etag;
      } catch (error) {
        if (isAzureError(error, 412) || isNotFound(error)) return null;
        throw error;
      }
    });
  }

  deleteMarker(tenant: string, eventId: string, etag?: string): Promise<void> {
    return this.call(async (abortSignal) => {
      try {
        await this.table.deleteEntity(partition(tenant), `p:${eventId}`, {
          abortSignal,
          ...(etag === undefined ? {} : { etag }),
        });
      } catch (error) {
        // 412: stored again since (another action of the event): not this delete's to remove.
        if (!isNotFound(error) && !isAzureError(error, 412)) throw error;
      }
    });
  }

  readHeadHint(tenant: string): Promise<number | null> {
    return this.call(async (signal) => {
      const entity = await this.rows.get(partition(tenant), 'h', signal);
      return entity === null ? null : Number(entity['seq']);
    });
  }

  writeHeadHint(tenant: string, seq: number): Promise<void> {
    return this.call((signal) =>
      this.rows.upsert({ partitionKey: partition(tenant), rowKey: 'h', seq }, signal),
    );
  }

  putSignedHead(head: SignedHead): Promise<void> {
    return this.call((signal) =>
      this.rows.upsert(
        { partitionKey: partition(head.tenant), rowKey: `s:${pad(head.seq)}`, json: JSON.stringify(head) },
        signal,
      ),
    );
  }

  listSignedHeads(tenant: string, afterSeq: number, limit: number): Promise<SignedHead[]> {
    return this.call(async (abortSignal) => {
      const filter = odata`PartitionKey eq ${partition(tenant)} and RowKey gt ${`s:${pad(afterSeq)}`} and RowKey lt ${'s;'}`;
      const heads: SignedHead[] = [];
      try {
        const entities = this.table.listEntities({ queryOptions: { filter }, abortSignal });
        for await (const page of entities.byPage({ maxPageSize: Math.min(1000, limit) })) {
          for (const entity of page) {
            const seq = Number(String(entity.rowKey).slice(2));
            heads.push(storedHead(tenant, seq, String(entity['json'])));
            if (heads.length >= limit) return heads;
          }
        }
      } catch (error) {
        if (!isNotFound(error)) throw error;
      }
      return heads;
    });
  }

  registerTenant(tenant: string): Promise<void> {
    return this.call(async (signal) => {
      await this.rows.create({ partitionKey: TENANTS, rowKey: tenant }, signal);
    });
  }

  async *tenants(): AsyncIterable<string> {
    let after = '';
    for (;;) {
      const page = await this.call(async (abortSignal) => {
        const names: string[] = [];
        try {
          const entities = this.table.listEntities({
            queryOptions: {
              filter: odata`PartitionKey eq ${TENANTS} and RowKey gt ${after}`,
              select: ['rowKey'],
            },
            abortSignal,
          });
          for await (const batch of entities.byPage({ maxPageSize: 1000 })) {
            for (const entity of batch) names.push(String(entity.rowKey));
            if (names.length >= 1000) break;
          }
        } catch (error) {
          if (!isNotFound(error)) throw error;
        }
        return names;
      });
      yield* page;
      if (page.length < 1000) return;
      after = page[page.length - 1] ?? after;
    }
  }

  private call<T>(operation: (abortSignal: AbortSignal) => Promise<T>): Promise<T> {
    return storageCall(this.timeoutMs, operation);
  }
}

const TENANTS = 'tenants';
const SEQ_DIGITS = 12;

function pad(seq: number): string {
  return String(seq).padStart(SEQ_DIGITS, '0');
}

function partition(tenant: string): string {
  return `t:${tenant}`;
}

function recordRow(seq: number): string {
  return `r:${pad(seq)}`;
}

/**
 * The record of a row. A row whose JSON no longer parses (damaged in storage) is answered as a
 * record with nothing right but its seq, so that verifying the trail reports it as broken there.
 */
function recordOf(entity: Record<string, unknown>): AuditRecord {
  try {
    return JSON.parse(String(entity['json'])) as AuditRecord;
  } catch {
    const seq = Number(String(entity['rowKey']).slice(2));
    return { seq, atMs: 0, action: '', outcome: '', eventId: '', prevHash: '', hash: '' };
  }
}

function markerOf(entity: TableEntityResult<Record<string, unknown>>): StoredMarker {
  const { event, check } = JSON.parse(String(entity['json'])) as { event: PendingEvent; check: PendingCheck };
  const by = entity['claimBy'];
  const until = entity['claimUntilMs'];
  return {
    event,
    check,
    ...(typeof by === 'string' ? { claim: { by, untilMs: Number(until) } } : {}),
    etag: entity.etag,
  };
}
