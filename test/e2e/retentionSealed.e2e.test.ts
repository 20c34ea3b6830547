import { randomBytes, randomUUID } from 'node:crypto';
import { rm } from 'node:fs/promises';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { AuditRecord } from '../../shared/protocol/audit/chain';
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
import { sessionIndexSettings } from '../support/tables';

/**
 * Retention where every thread value is sealed and every action is audited, over real HTTP on both
 * backends: the prune run reads the sealed thread space (it opens records to find heads and
 * ancestors; checkpoint records go only once older than the hour's grace, so none here), keeps
 * every checkpoint readable, records the deletion of an expired thread in the tenant's audit trail
 * as `thread.deleted` by `retention`, and `GET /api/verify` checks the chain.
 */

type Call = ReturnType<typeof client>;

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64');
const unb64 = (data: string) => JSON.parse(Buffer.from(data, 'base64').toString()) as unknown;

function checkpoint(id: string, parent: string | null, turn: number): string {
  return JSON.stringify({
    checkpointId: id,
    parent,
    checkpoint: { type: 'json', data: b64({ v: 4, id }) },
    metadata: { step: turn },
    channelVersions: { messages: turn },
    values: { messages: { type: 'json', data: b64([`turn ${turn}`]) } },
  });
}

async function json<T>(response: Promise<Response>, status = 200): Promise<T> {
  const answer = await response;
  expect(answer.status).toBe(status);
  return (await answer.json()) as T;
}

interface TenantReport {
  tenant: string;
  threadsDeleted: number;
  threadsBusy: number;
  checkpointsDeleted: number;
  error?: string;
}

describe.each<Backend>(['local', 'blob'])(
  'retention of sealed, audited threads on the %s backend',
  (backend) => {
    const ops = newTenant('ops', true);
    const alpha = newTenant('alpha');
    const settings = backendSettings(backend, azurite().blobEndpoint);
    let app: RunningApp;
    let asOps: Call;
    let asAlpha: Call;

    beforeAll(async () => {
      app = await startApp({
        CAIRN_API_KEYS: apiKeysSetting([ops, alpha]),
        ...settings,
        ...sessionIndexSettings(azurite().tableEndpoint),
        CAIRN_ENCRYPTION_KEYS: `k1:${randomBytes(32).toString('hex')}`,
        CAIRN_AUDIT: 'true',
        CAIRN_AUDIT_TABLE: `audit${randomUUID().replaceAll('-', '').slice(0, 20)}`,
      });
      asOps = client(app.url, ops.key);
      asAlpha = client(app.url, alpha.key);
    });
    afterAll(async () => {
      await app?.stop();
      if (settings['CAIRN_DATA_DIR'] !== undefined)
        await rm(settings['CAIRN_DATA_DIR'], { recursive: true, force: true });
    });

    it('deletes an expired thread, reads the kept one through its seal, and audits the deletion', async () => {
      const put = (thread: string, body: string) =>
        asAlpha(`/api/threads/${thread}/checkpoints`, { method: 'POST', body });
      expect((await asAlpha('/api/threads/old', { method: 'PUT' })).status).toBe(201);
      expect((await put('old', checkpoint('c1', null, 1))).status).toBe(201);
      // The app stamped the last change of `old` before it answered: no later than this.
      const oldChangedBy = Date.now();
      // The time to live is the margin `kept` has for the prune to reach it after its last change
      // (on a loaded machine a request can take seconds), and what `old` must be waited past.
      const ttlSeconds = 6;
      const policy = await asOps(`/api/retention/policies/${alpha.tenant}`, {
        method: 'PUT',
        body: JSON.stringify({ threadTtlSeconds: ttlSeconds, keepCheckpoints: 2 }),
      });
      expect(policy.status).toBe(200);
      // Past the time to live of `old` by this machine's clock (the app's is the same).
      await eventually(
        'the time to live of `old` has passed',
        () => Date.now() > oldChangedBy + ttlSeconds * 1000 + 250,
        {
          everyMs: 50,
        },
      );
      // Written after the wait: its last change is well within its time to live when prune runs.
      expect((await asAlpha('/api/threads/kept', { method: 'PUT' })).status).toBe(201);
      for (let turn = 1; turn <= 6; turn++) {
        const parent = turn === 1 ? null : `c${turn - 1}`;
        expect((await put('kept', checkpoint(`c${turn}`, parent, turn))).status).toBe(201);
      }

      const report = await json<{ tenants: TenantReport[] }>(
        asOps('/api/retention/prune', { method: 'POST', body: JSON.stringify({ tenant: alpha.tenant }) }),
      );
      expect(report.tenants).toHaveLength(1);
      expect(report.tenants[0]).toMatchObject({
        tenant: alpha.tenant,
        threadsDeleted: 1,
        threadsBusy: 0,
        checkpointsDeleted: 0,
      });
      expect(report.tenants[0]?.error).toBeUndefined();

      expect((await asAlpha('/api/threads/old')).status).toBe(404);
      const latest = await json<{ checkpointId: string; values: Record<string, { data: string }> }>(
        asAlpha('/api/threads/kept/checkpoints/latest'),
      );
      expect(latest.checkpointId).toBe('c6');
      expect(unb64(latest.values['messages']?.data ?? '')).toEqual(['turn 6']);
      const history = await json<{ checkpoints: { checkpointId: string }[] }>(
        asAlpha('/api/threads/kept/checkpoints?limit=10'),
      );
      expect(history.checkpoints.map((entry) => entry.checkpointId)).toEqual([
        'c6',
        'c5',
        'c4',
        'c3',
        'c2',
        'c1',
      ]);
      const first = await json<{ values: Record<string, { data: string }> }>(
        asAlpha('/api/threads/kept/checkpoints/c1'),
      );
      expect(unb64(first.values['messages']?.data ?? '')).toEqual(['turn 1']);

      const deleted = await json<{ records: AuditRecord[] }>(
        asAlpha('/api/audit/records?action=thread.deleted'),
      );
      expect(deleted.records.map((record) => [record.threadId, record.actor])).toEqual([
        ['old', 'retention'],
      ]);

      // A second run right after finds nothing more to delete.
      const again = await json<{ tenants: TenantReport[] }>(
        asOps('/api/retention/prune', { method: 'POST', body: JSON.stringify({ tenant: alpha.tenant }) }),
      );
      expect(again.tenants[0]).toMatchObject({ threadsDeleted: 0, checkpointsDeleted: 0 });

      const verified = await json<{
        ok: boolean;
        tenants: { tenant: string; audit: { status: string; records?: number } }[];
      }>(asOps(`/api/verify?tenant=${alpha.tenant}`));
      expect(verified.tenants[0]?.audit).toMatchObject({ status: 'ok' });
      expect(verified.tenants[0]?.audit.records).toBeGreaterThanOrEqual(1);
      expect(verified).toMatchObject({ ok: true, tenants: [{ findingCount: 0, orphanCount: 0 }] });
    });
  },
);
