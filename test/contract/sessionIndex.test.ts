import type { TableClient } from '@azure/data-tables';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import { StorageUnavailableError } from '../../shared/protocol/errors';
import { TableSessionIndex } from '../../shared/storage/azure/sessionIndexTable';
import { LocalSessionIndex } from '../../shared/storage/local/localSessionIndex';
import type { SessionIndex, SessionRecord } from '../../shared/storage/sessionIndex';
import { azurite } from '../support/azurite';
import { tempDir } from '../support/cleanup';
import { azuriteTable } from '../support/tables';
import { STORAGE_TIMEOUT_MS } from '../support/timeouts';

/** One implementation of the session index, fresh for each test. */
interface IndexFixture {
  readonly index: SessionIndex;
  /** Another instance on the same storage: its own owner cache, as on another Functions instance. */
  instance(): SessionIndex;
  destroy(): Promise<void>;
}

function onTable(): IndexFixture {
  const table: TableClient = azuriteTable(azurite().tableEndpoint);
  return {
    index: new TableSessionIndex(table, STORAGE_TIMEOUT_MS),
    instance: () =>
      new TableSessionIndex(azuriteTable(azurite().tableEndpoint, table.tableName), STORAGE_TIMEOUT_MS),
    destroy: () => table.deleteTable(),
  };
}

function onLocalFiles(): IndexFixture {
  const dir = tempDir('session-index');
  return {
    index: new LocalSessionIndex(dir),
    instance: () => new LocalSessionIndex(dir),
    destroy: async () => {},
  };
}

/** The session index contract (shared/storage/sessionIndex.ts), on every implementation. */
describe.each([
  ['Azure Table Storage (Azurite)', onTable],
  ['local filesystem', onLocalFiles],
] as const)('session index on %s', (_name, make) => {
  let fixture: IndexFixture;
  let index: SessionIndex;
  const instance = () => fixture.instance();

  beforeEach(() => {
    fixture = make();
    index = fixture.index;
  });
  afterEach(async () => {
    await fixture.destroy();
  });

  const record = (id: string, checkpointId: string, data: SessionRecord['data'] = null): SessionRecord => ({
    id,
    checkpointId,
    updatedAt: new Date().toISOString(),
    data,
  });

  it('answers absent before the table exists, without creating anything', async () => {
    expect(await index.ownerOf('s1')).toBeNull();
    expect(await index.get('alpha', 's1')).toBeNull();
    expect(await index.list('alpha', { limit: 10 })).toEqual({ sessions: [], next: null });
  });

  it('gives a session to its first writer for good', async () => {
    expect(await index.claim('s1', 'alpha')).toBe('alpha');
    expect(await index.claim('s1', 'beta')).toBe('alpha');
    expect(await instance().claim('s1', 'beta')).toBe('alpha');
    expect(await instance().ownerOf('s1')).toBe('alpha');
  });

  it('of 20 concurrent first claims by 20 tenants on 20 instances exactly one owns the session', async () => {
    const tenants = Array.from({ length: 20 }, (_, i) => `tenant-${i}`);
    const owners = await Promise.all(tenants.map((tenant) => instance().claim('contested', tenant)));
    expect(new Set(owners).size).toBe(1);
    expect(tenants).toContain(owners[0]);
    expect(await instance().ownerOf('contested')).toBe(owners[0]);
  });

  it('keeps records per tenant: another tenant neither gets nor lists them', async () => {
    await index.update('alpha', 's1', async () => record('s1', 'c1', { title: 'alpha work' }));
    expect(await index.get('alpha', 's1')).toMatchObject({
      id: 's1',
      checkpointId: 'c1',
      data: { title: 'alpha work' },
    });
    expect(await index.get('beta', 's1')).toBeNull();
    expect(await index.list('beta', { limit: 100 })).toEqual({ sessions: [], next: null });
    expect((await index.list('alpha', { limit: 100 })).sessions.map((s) => s.id)).toEqual(['s1']);
  });

  it('lists ascending by id after `after`, `limit` at a time, with `next` only when more follow', async () => {
    const ids = Array.from({ length: 25 }, (_, i) => `s-${String(i).padStart(3, '0')}`).reverse();
    await Promise.all(ids.map((id) => index.update('alpha', id, async () => record(id, 'c1'))));
    await index.update('alpha-2', 'zzz', async () => record('zzz', 'c1'));
    const seen: string[] = [];
    let after: string | undefined;
    for (let page = 0; page < 10; page++) {
      const result = await index.list('alpha', { limit: 10, ...(after === undefined ? {} : { after }) });
      seen.push(...result.sessions.map((s) => s.id));
      if (result.next === null) break;
      expect(result.next).toBe(result.sessions.at(-1)?.id);
      after = result.next;
    }
    expect(seen).toEqual([...ids].sort());
    const exact = await index.list('alpha', { limit: 25 });
    expect(exact.sessions).toHaveLength(25);
    expect(exact.next).toBeNull();
    expect((await index.list('alpha', { after: 's-020', limit: 1000 })).sessions.map((s) => s.id)).toEqual([
      's-021',
      's-022',
      's-023',
      's-024',
    ]);
  });

  it('updates by compare-and-swap: 10 concurrent read-modify-writes lose nothing', async () => {
    await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        instance().update('alpha', 'counter', async (current) =>
          record('counter', `c${i}`, { count: Number(current?.data?.['count'] ?? 0) + 1 }),
        ),
      ),
    );
    expect((await index.get('alpha', 'counter'))?.data).toEqual({ count: 10 });
  });

  it('leaves a record alone when the decision is no change', async () => {
    await index.update('alpha', 's1', async () => record('s1', 'c1'));
    await index.update('alpha', 's1', async (current) => {
      expect(current?.checkpointId).toBe('c1');
      return null;
    });
    expect((await index.get('alpha', 's1'))?.checkpointId).toBe('c1');
  });

  it("removes a tenant's record (once) and keeps the owner for good", async () => {
    await index.claim('s1', 'alpha');
    await index.update('alpha', 's1', async () => record('s1', 'c1'));
    expect(await index.remove('beta', 's1')).toBe(false);
    expect(await index.get('alpha', 's1')).not.toBeNull();
    const removals = await Promise.all([index.remove('alpha', 's1'), instance().remove('alpha', 's1')]);
    expect(removals.filter(Boolean)).toHaveLength(1);
    expect(await index.get('alpha', 's1')).toBeNull();
    expect(await index.list('alpha', { limit: 10 })).toEqual({ sessions: [], next: null });
    expect(await instance().ownerOf('s1')).toBe('alpha');
    expect(await instance().claim('s1', 'beta')).toBe('alpha');
  });

  it('keeps session ids that are path segments of their own (".", "..") as plain ids', async () => {
    for (const id of ['.', '..', '...']) {
      expect(await index.claim(id, 'alpha')).toBe('alpha');
      await index.update('alpha', id, async () => record(id, 'c1'));
    }
    expect((await index.list('alpha', { limit: 10 })).sessions.map((s) => s.id)).toEqual(['.', '..', '...']);
    expect(await instance().ownerOf('..')).toBe('alpha');
  });
});

describe('session index on Azure Table Storage: faults', () => {
  it('reports an unreachable table service as unavailable, never as absent', async () => {
    const down = new TableSessionIndex(azuriteTable('http://127.0.0.1:1/devstoreaccount1'), 3_000);
    await expect(down.ownerOf('s1')).rejects.toBeInstanceOf(StorageUnavailableError);
    await expect(down.get('alpha', 's1')).rejects.toBeInstanceOf(StorageUnavailableError);
    await expect(down.list('alpha', { limit: 5 })).rejects.toBeInstanceOf(StorageUnavailableError);
    await expect(down.claim('s1', 'alpha')).rejects.toBeInstanceOf(StorageUnavailableError);
  });
});
