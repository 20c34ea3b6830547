import { PreconditionFailedError, StorageUnavailableError } from '../../protocol/errors';
import type { KeyValueStore } from '../keyValueStore';
import { encodeCursor } from '../listCursor';
import type { SessionIndex, SessionPage, SessionRecord } from '../sessionIndex';
import { localInternalStore } from './localKeyValueStore';

/** A record is ids, times and the checkpoint's `data` (bounded by the checkpoint's own limit). */
const MAX_RECORD_BYTES = 4 * 1024 * 1024;
const UPDATE_ATTEMPTS = 16;

/**
 * The session index on the local filesystem, under `<dataDir>/session-index/`, in a store with the
 * key/value contract (files replaced by rename or created by link, synced with their folder before
 * an answer, see the local key/value store):
 *
 * - ownership: `owners/_<session id>`, the owning tenant, created only (`link`: the first writer
 *   wins, also against another process);
 * - the index record: `records/_<tenant>/_<session id>`, JSON `{checkpointId, updatedAt, data}`,
 *   replaced by compare-and-swap on its ETag, so a tenant's listing is one folder in id order.
 *
 * Every name is prefixed with `_`, so that no id can be a `.` or `..` path segment; the prefix
 * keeps the order of ids.
 */
export class LocalSessionIndex implements SessionIndex {
  private readonly store: KeyValueStore;

  constructor(dataDir: string) {
    this.store = localInternalStore(dataDir, 'session-index', MAX_RECORD_BYTES);
  }

  async ownerOf(sessionId: string): Promise<string | null> {
    return (await this.store.read(ownerKey(sessionId)))?.value.toString('utf8') ?? null;
  }

  async claim(sessionId: string, tenant: string): Promise<string> {
    const known = await this.ownerOf(sessionId);
    if (known !== null) return known;
    try {
      await this.store.write(ownerKey(sessionId), Buffer.from(tenant, 'utf8'), { ifAbsent: true });
      return tenant;
    } catch (error) {
      if (!(error instanceof PreconditionFailedError)) throw error;
    }
    const owner = await this.ownerOf(sessionId);
    if (owner === null) throw new StorageUnavailableError('the session owner could not be read back; retry');
    return owner;
  }

  async get(tenant: string, sessionId: string): Promise<SessionRecord | null> {
    const stored = await this.store.read(recordKey(tenant, sessionId));
    return stored === null ? null : recordOf(sessionId, stored.value);
  }

  async list(tenant: string, options: { after?: string; limit: number }): Promise<SessionPage> {
    const prefix = `${recordFolder(tenant)}/`;
    const after = options.after ?? '';
    const page = await this.store.list({
      prefix,
      limit: options.limit,
      ...(after === '' ? {} : { cursor: encodeCursor(prefix, `${prefix}_${after}`) }),
    });
    const found = await Promise.all(
      page.keys.map(async (key) => {
        const id = key.slice(prefix.length + 1);
        const stored = await this.store.read(key);
        return stored === null ? null : recordOf(id, stored.value);
      }),
    );
    // A record removed between the listing and its read is simply not there.
    const sessions = found.filter((record): record is SessionRecord => record !== null);
    return { sessions, next: page.cursor === null ? null : (sessions.at(-1)?.id ?? null) };
  }

  async update(
    tenant: string,
    sessionId: string,
    decide: (current: SessionRecord | null) => Promise<SessionRecord | null>,
  ): Promise<void> {
    const key = recordKey(tenant, sessionId);
    for (let attempt = 0; attempt < UPDATE_ATTEMPTS; attempt++) {
      const stored = await this.store.read(key);
      const next = await decide(stored === null ? null : recordOf(sessionId, stored.value));
      if (next === null) return;
      const body = Buffer.from(
        JSON.stringify({ checkpointId: next.checkpointId, updatedAt: next.updatedAt, data: next.data }),
        'utf8',
      );
      try {
        await this.store.write(key, body, stored === null ? { ifAbsent: true } : { ifMatch: stored.etag });
        return;
      } catch (error) {
        if (!(error instanceof PreconditionFailedError)) throw error;
      }
    }
    throw new StorageUnavailableError('the session index is changing too fast to update; retry');
  }

  async remove(tenant: string, sessionId: string): Promise<boolean> {
    return this.store.delete(recordKey(tenant, sessionId));
  }
}

function ownerKey(sessionId: string): string {
  return `owners/_${sessionId}`;
}

function recordFolder(tenant: string): string {
  return `records/_${tenant}`;
}

function recordKey(tenant: string, sessionId: string): string {
  return `${recordFolder(tenant)}/_${sessionId}`;
}

function recordOf(id: string, bytes: Buffer): SessionRecord {
  const body = JSON.parse(bytes.toString('utf8')) as Omit<SessionRecord, 'id'>;
  return { id, checkpointId: body.checkpointId, updatedAt: body.updatedAt, data: body.data ?? null };
}
