import { createHash, randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import {
  apiKeysSetting,
  type Backend,
  backendSettings,
  client,
  newTenant,
  type RunningApp,
  startApp,
} from '../support/app';
import { azurite } from '../support/azurite';
import { eventually } from '../support/eventually';
import { azuriteTable, sessionIndexSettings } from '../support/tables';

/**
 * A session index record whose sealed `data` does not open (changed in the table, outside Cairn),
 * for a tenant whose archives are sealed at rest, over real HTTP on both backends: `GET /api/verify`
 * reports it as `unreadable` and checks the tenant's sessions all the same; the listing answers
 * 500 `integrity_error` naming the session (never a listing without it, or with its data left
 * out); the prune still deletes every expired session, judged by the sealed manifests; the
 * session's next publish replaces the record.
 */

type Call = ReturnType<typeof client>;

interface Finding {
  kind: string;
  key: string;
  detail: string;
}

interface TenantVerifyReport {
  ok: boolean;
  findings: Finding[];
  checked: { sessions: number };
}

interface TenantPruneReport {
  sessionsDeleted: number;
  error?: string;
}

async function publish(call: Call, sessionId: string, note: string, checkpointId = 'c1'): Promise<void> {
  const bytes = Buffer.from(`the notes of ${sessionId} at ${checkpointId}`);
  const key = `tails/${checkpointId}/g1`;
  const put = await call(`/api/sessions/${sessionId}/objects/${key}`, { method: 'PUT', body: bytes });
  expect(put.status).toBe(201);
  const published = await call(`/api/sessions/${sessionId}/checkpoints`, {
    method: 'POST',
    body: JSON.stringify({
      checkpointId,
      parent: checkpointId === 'c1' ? null : 'c1',
      files: [
        {
          path: 'notes.txt',
          generation: 'g1',
          size: bytes.length,
          sha256: createHash('sha256').update(bytes).digest('hex'),
        },
      ],
      data: { note },
    }),
    headers: { 'content-type': 'application/json' },
  });
  expect(published.status).toBe(201);
}

describe.each<Backend>(['local', 'blob'])(
  'a damaged sealed session index record on the %s backend',
  (backend) => {
    const ops = newTenant('ops', true);
    const alpha = newTenant('alpha');
    const beta = newTenant('beta');
    const settings = backendSettings(backend, azurite().blobEndpoint);
    const tableSettings = sessionIndexSettings(azurite().tableEndpoint);
    const indexTable = () => azuriteTable(azurite().tableEndpoint, tableSettings['CAIRN_SESSION_TABLE']);
    let app: RunningApp;
    let asOps: Call;
    let asAlpha: Call;
    let asBeta: Call;

    /** Changes one byte of the sealed data in the session's index row (damage outside Cairn). */
    async function damageIndexData(tenant: string, sessionId: string): Promise<void> {
      const table = indexTable();
      const row = await table.getEntity<{ data: string }>(`t:${tenant}`, sessionId);
      const sealed = Buffer.from((JSON.parse(row.data) as { sealed: string }).sealed, 'base64');
      sealed.writeUInt8(sealed.readUInt8(sealed.length - 1) ^ 0xff, sealed.length - 1);
      const data = JSON.stringify({ sealed: sealed.toString('base64') });
      await table.updateEntity({ partitionKey: `t:${tenant}`, rowKey: sessionId, data }, 'Merge');
    }

    beforeAll(async () => {
      app = await startApp({
        CAIRN_API_KEYS: apiKeysSetting([ops, alpha, beta]),
        ...settings,
        ...tableSettings,
        CAIRN_ENCRYPTION_KEYS: `k1:${randomBytes(32).toString('hex')}`,
        CAIRN_ENCRYPT_TENANTS: `${alpha.tenant},${beta.tenant}`,
      });
      asOps = client(app.url, ops.key);
      asAlpha = client(app.url, alpha.key);
      asBeta = client(app.url, beta.key);
    });
    afterAll(async () => {
      await app?.stop();
      await indexTable()
        .deleteTable()
        .catch(() => undefined);
      if (settings['CAIRN_DATA_DIR'] !== undefined)
        await rm(settings['CAIRN_DATA_DIR'], { recursive: true, force: true });
    });

    it('is reported by verify, refused by the listing, and stops no prune', async () => {
      const published = Date.now();
      for (const sessionId of ['s1', 's2', 's3']) await publish(asAlpha, sessionId, `note of ${sessionId}`);
      const clean = (await (await asOps(`/api/verify?tenant=${alpha.tenant}`)).json()) as {
        tenants: TenantVerifyReport[];
      };
      expect(clean.tenants[0]).toMatchObject({ ok: true, checked: { sessions: 3 } });

      await damageIndexData(alpha.tenant, 's2');

      // Verify reports the record and checks every session all the same.
      const verified = await asOps(`/api/verify?tenant=${alpha.tenant}`);
      expect(verified.status).toBe(200);
      const report = ((await verified.json()) as { tenants: TenantVerifyReport[] }).tenants[0];
      expect(report?.ok).toBe(false);
      expect(report?.checked.sessions).toBe(3);
      expect(report?.findings.map(({ kind, key }) => [kind, key])).toEqual([['unreadable', 'index/s2']]);

      // The listing does not hide the damage: 500 integrity_error naming the session.
      const listed = await asAlpha('/api/sessions');
      expect(listed.status).toBe(500);
      const error = ((await listed.json()) as { error: { code: string; message: string } }).error;
      expect(error.code).toBe('integrity_error');
      expect(error.message).toContain('s2');
      expect((await asAlpha('/api/sessions/s2')).status).toBe(500);
      expect((await asAlpha('/api/sessions/s1')).status).toBe(200);

      // The prune deletes every expired session, s2 too: the time to live is judged by the sealed
      // manifest, which opens; the index record's data plays no part in it.
      const policy = await asOps(`/api/retention/policies/${alpha.tenant}`, {
        method: 'PUT',
        body: JSON.stringify({ sessionTtlSeconds: 1 }),
      });
      expect(policy.status).toBe(200);
      await eventually('the sessions expired', () => Date.now() > published + 2000, { everyMs: 50 });
      const pruned = await asOps('/api/retention/prune', {
        method: 'POST',
        body: JSON.stringify({ tenant: alpha.tenant }),
      });
      expect(pruned.status).toBe(200);
      const prune = ((await pruned.json()) as { tenants: TenantPruneReport[] }).tenants[0];
      expect(prune?.error).toBeUndefined();
      expect(prune?.sessionsDeleted).toBe(3);
      expect(((await (await asAlpha('/api/sessions')).json()) as { sessions: unknown[] }).sessions).toEqual(
        [],
      );
    });

    it('is replaced by the next publish of its session, which the listing then shows', async () => {
      await publish(asBeta, 'r1', 'first');
      await publish(asBeta, 'r2', 'first');
      await damageIndexData(beta.tenant, 'r1');
      expect((await asBeta('/api/sessions')).status).toBe(500);

      // The record's data was of the checkpoint the publish replaces: the new record takes its place.
      await publish(asBeta, 'r1', 'second', 'c2');
      const listed = await asBeta('/api/sessions');
      expect(listed.status).toBe(200);
      const sessions = (
        (await listed.json()) as { sessions: { id: string; checkpointId: string; data: unknown }[] }
      ).sessions;
      expect(sessions.map(({ id, checkpointId, data }) => [id, checkpointId, data])).toEqual([
        ['r1', 'c2', { note: 'second' }],
        ['r2', 'c1', { note: 'first' }],
      ]);
      const verified = await asOps(`/api/verify?tenant=${beta.tenant}`);
      expect(((await verified.json()) as { tenants: TenantVerifyReport[] }).tenants[0]).toMatchObject({
        ok: true,
        findings: [],
      });
    });
  },
);
