import type { AuditStore, RecordQuery, StoredMarker } from '../../audit/auditStore';
import type { PendingCheck, PendingEvent } from '../../audit/pending';
import type { AuditRecord } from '../../protocol/audit/chain';
import { storedHead } from '../../protocol/audit/headChain';
import type { SignedHead } from '../../protocol/audit/headSignature';
import { PreconditionFailedError } from '../../protocol/errors';
import type { KeyValueStore } from '../keyValueStore';
import { encodeCursor } from '../listCursor';
import { localInternalStore } from './localKeyValueStore';

/** A record holds an event's names, ids and details (bounded where events are made). */
const MAX_ROW_BYTES = 1024 * 1024;
const SEQ_DIGITS = 12;
/** Keys listed, and files read, per step of a listing. */
const PAGE = 200;

/**
 * The audit trail on the local filesystem, under `<dataDir>/audit/`, in a store with the key/value
 * contract (files replaced by rename or created by link, synced with their folder before an
 * answer, see the local key/value store). Per tenant, under `trails/_<tenant>/`:
 * - `r/<seq, 12 digits>`: a record, its JSON, created only (`link`: one writer of a seq wins);
 * - `e/_<event id>`: a receipt, the seq of the event's record (created only);
 * - `p/_<event id>`: a pending marker `{event, check, claim?}`, replaced; a repair claims it by a
 *   compare-and-swap on its ETag;
 * - `h`: the head hint; `s/<seq, 12 digits>`: a signed head (replaced).
 * `tenants/_<tenant>` lists the tenants with a trail. Names are prefixed with `_` so that no id can
 * be a `.` or `..` path segment; the prefix keeps their order.
 */
export class LocalAuditStore implements AuditStore {
  private readonly store: KeyValueStore;

  constructor(dataDir: string) {
    this.store = localInternalStore(dataDir, 'audit', MAX_ROW_BYTES);
  }

  async createRecord(tenant: string, record: AuditRecord): Promise<boolean> {
    return this.createOnly(`${trail(tenant)}/r/${pad(record.seq)}`, JSON.stringify(record));
  }

  async readRecord(tenant: string, seq: number): Promise<AuditRecord | null> {
    const stored = await this.store.read(`${trail(tenant)}/r/${pad(seq)}`);
    return stored === null ? null : recordOf(seq, stored.value);
  }

  async listRecords(tenant: string, query: RecordQuery): Promise<AuditRecord[]> {
    const prefix = `${trail(tenant)}/r/`;
    const filtered = query.threadId !== undefined || query.action !== undefined;
    const records: AuditRecord[] = [];
    let cursor: string | null = encodeCursor(prefix, `${prefix}${pad(query.afterSeq)}`);
    while (cursor !== null && records.length < query.limit) {
      const page = await this.store.list({
        prefix,
        cursor,
        limit: filtered ? PAGE : Math.min(PAGE, query.limit - records.length),
      });
      const read = await Promise.all(
        page.keys.map(async (key) => {
          const stored = await this.store.read(key);
          return stored === null ? null : recordOf(Number(key.slice(prefix.length)), stored.value);
        }),
      );
      for (const record of read) {
        if (record === null) continue;
        if (query.threadId !== undefined && record.threadId !== query.threadId) continue;
        if (query.action !== undefined && record.action !== query.action) continue;
        records.push(record);
        if (records.length >= query.limit) break;
      }
      cursor = page.cursor;
    }
    return records;
  }

  async createReceipt(tenant: string, eventId: string, seq: number): Promise<void> {
    await this.createOnly(`${trail(tenant)}/e/_${eventId}`, String(seq));
  }

  async readReceipt(tenant: string, eventId: string): Promise<number | null> {
    const stored = await this.store.read(`${trail(tenant)}/e/_${eventId}`);
    return stored === null ? null : Number(stored.value.toString('utf8'));
  }

  async putMarker(tenant: string, event: PendingEvent, check: PendingCheck): Promise<void> {
    await this.store.write(markerKey(tenant, event.id), json({ event, check }));
  }

  async readMarker(tenant: string, eventId: string): Promise<StoredMarker | null> {
    const stored = await this.store.read(markerKey(tenant, eventId));
    return stored === null ? null : markerOf(stored.value, stored.etag);
  }

  async listMarkers(tenant: string, limit: number): Promise<StoredMarker[]> {
    const prefix = `${trail(tenant)}/p/`;
    const markers: StoredMarker[] = [];
    let cursor: string | undefined;
    while (markers.length < limit) {
      const page = await this.store.list({
        prefix,
        limit: Math.min(PAGE, limit - markers.length),
        ...(cursor === undefined ? {} : { cursor }),
      });
      const read = await Promise.all(page.keys.map((key) => this.store.read(key)));
      for (const stored of read) if (stored !== null) markers.push(markerOf(stored.value, stored.etag));
      if (page.cursor === null) break;
      cursor = page.cursor;
    }
    return markers;
  }

  async claimMarker(
    tenant: string,
    marker: StoredMarker,
    claim: { by: string; untilMs: number },
  ): Promise<string | null> {
    try {
      const written = await this.store.write(
        markerKey(tenant, marker.event.id),
        json({ event: marker.event, check: marker.check, claim }),
        { ifMatch: marker.etag },
      );
      return written.etag;
    } catch (error) {
      if (error instanceof PreconditionFailedError) return null;
      throw error;
    }
  }

  async deleteMarker(tenant: string, eventId: string, etag?: string): Promise<void> {
    try {
      await this.store.delete(markerKey(tenant, eventId), etag === undefined ? {} : { ifMatch: etag });
    } catch (error) {
      // Stored again since (another action of the event) or gone: not this delete's to remove.
      if (!(error instanceof PreconditionFailedError)) throw error;
    }
  }

  async readHeadHint(tenant: string): Promise<number | null> {
    const stored = await this.store.read(`${trail(tenant)}/h`);
    return stored === null ? null : Number(stored.value.toString('utf8'));
  }

  async writeHeadHint(tenant: string, seq: number): Promise<void> {
    await this.store.write(`${trail(tenant)}/h`, Buffer.from(String(seq), 'utf8'));
  }

  async putSignedHead(head: SignedHead): Promise<void> {
    await this.store.write(`${trail(head.tenant)}/s/${pad(head.seq)}`, json(head));
  }

  async listSignedHeads(tenant: string, afterSeq: number, limit: number): Promise<SignedHead[]> {
    const prefix = `${trail(tenant)}/s/`;
    const heads: SignedHead[] = [];
    let cursor: string | null = encodeCursor(prefix, `${prefix}${pad(afterSeq)}`);
    while (cursor !== null && heads.length < limit) {
      const page = await this.store.list({ prefix, cursor, limit: Math.min(PAGE, limit - heads.length) });
      const read = await Promise.all(
        page.keys.map(async (key) => {
          const stored = await this.store.read(key);
          const seq = Number(key.slice(prefix.length));
          return stored === null ? null : storedHead(tenant, seq, stored.value.toString('utf8'));
        }),
      );
      for (const head of read) if (head !== null) heads.push(head);
      cursor = page.cursor;
    }
    return heads;
  }

  async registerTenant(tenant: string): Promise<void> {
    await this.createOnly(`tenants/_${tenant}`, '');
  }

  async *tenants(): AsyncIterable<string> {
    let cursor: string | undefined;
    for (;;) {
      const page = await this.store.list({
        prefix: 'tenants/',
        limit: 1000,
        ...(cursor === undefined ? {} : { cursor }),
      });
      yield* page.keys.map((key) => key.slice('tenants/_'.length));
      if (page.cursor === null) return;
      cursor = page.cursor;
    }
  }

  /** Creates `key` unless it exists: false then (what is stored stays). */
  private async createOnly(key: string, text: string): Promise<boolean> {
    try {
      await this.store.write(key, Buffer.from(text, 'utf8'), { ifAbsent: true });
      return true;
    } catch (error) {
      if (error instanceof PreconditionFailedError) return false;
      throw error;
    }
  }
}

function pad(seq: number): string {
  return String(seq).padStart(SEQ_DIGITS, '0');
}

function trail(tenant: string): string {
  return `trails/_${tenant}`;
}

function markerKey(tenant: string, eventId: string): string {
  return `${trail(tenant)}/p/_${eventId}`;
}

function json(value: unknown): Buffer {
  return Buffer.from(JSON.stringify(value), 'utf8');
}

/**
 * The record of a file. A file whose JSON no longer parses (damaged in storage) is answered as a
 * record with nothing right but its seq, so that verifying the trail reports it as broken there.
 */
function recordOf(seq: number, bytes: Buffer): AuditRecord {
  try {
    return JSON.parse(bytes.toString('utf8')) as AuditRecord;
  } catch {
    return { seq, atMs: 0, action: '', outcome: '', eventId: '', prevHash: '', hash: '' };
  }
}

function markerOf(bytes: Buffer, etag: string): StoredMarker {
  const { event, check, claim } = JSON.parse(bytes.toString('utf8')) as {
    event: PendingEvent;
    check: PendingCheck;
    claim?: { by: string; untilMs: number };
  };
  return { event, check, ...(claim === undefined ? {} : { claim }), etag };
}
