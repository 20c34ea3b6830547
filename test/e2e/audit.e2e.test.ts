import { spawn } from 'node:child_process';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { type AuditRecord, GENESIS_HASH, withHash } from '../../shared/protocol/audit/chain';
import type { VerifyAnswer } from '../../shared/protocol/audit/headChain';
import type { SignedHead } from '../../shared/protocol/audit/headSignature';
import {
  apiKeysSetting,
  backendSettings,
  client,
  newTenant,
  type RunningApp,
  runTimer,
  startApp,
  type TestTenant,
} from '../support/app';
import { azurite } from '../support/azurite';
import { tempDir } from '../support/cleanup';
import { buildSnapshot, newKeyPair } from '../support/snapshotTestKit';
import { azuriteTable, memoryTableSettings, sessionIndexSettings } from '../support/tables';

/**
 * The audit trail end to end (docs/audit.md): the routes over real HTTP against the app in the
 * local runtime, records of every audited action (threads, archives, memory facts, snapshots, admin
 * jobs), verification with and without an expected head,
 * signed heads (on verify and by the timer) checked by `cairn audit verify` with the public key
 * alone, tampering caught, the setting off, and 16 writers on two app processes with gapless seq.
 */

const CLI = path.resolve('client/cli/dist/cjs/bin.js');
type Call = ReturnType<typeof client>;

function cairn(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      env: { PATH: process.env['PATH'] ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (data: Buffer) => (stdout += data.toString()));
    child.stderr.on('data', (data: Buffer) => (stderr += data.toString()));
    child.once('exit', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

async function records(call: Call, query = ''): Promise<{ records: AuditRecord[]; next: number | null }> {
  const response = await call(`/api/audit/records${query}`);
  expect(response.status).toBe(200);
  return (await response.json()) as { records: AuditRecord[]; next: number | null };
}

const lines = (list: AuditRecord[]) =>
  list.map((record) => `${record.seq} ${record.action} ${record.threadId ?? ''}`.trim());

async function json<T>(response: Promise<Response>, status = 200): Promise<T> {
  const answer = await response;
  expect(answer.status).toBe(status);
  return (await answer.json()) as T;
}

function auditSettings(): Record<string, string> {
  return {
    ...sessionIndexSettings(azurite().tableEndpoint),
    ...memoryTableSettings(azurite().tableEndpoint),
    CAIRN_AUDIT: 'true',
    CAIRN_AUDIT_TABLE: `audit${randomUUID().replaceAll('-', '').slice(0, 20)}`,
  };
}

describe('audit trail end to end', () => {
  const ops = newTenant('ops', true);
  const other = newTenant('other');
  const agent = newTenant('agent');
  const probe = newTenant('probe');
  let app: RunningApp;
  let settings: Record<string, string>;
  let asOps: Call;
  let asOther: Call;
  let publicKeyFile: string;
  let cliEnv: Record<string, string>;

  beforeAll(async () => {
    const folder = tempDir('audit-keys');
    publicKeyFile = path.join(folder, 'audit.pub');
    // The key pair comes from the CLI, as an operator would make it.
    const keygen = await cairn(['audit', 'keygen', '--public-key', publicKeyFile], {});
    expect(keygen.code).toBe(0);
    expect(readFileSync(publicKeyFile, 'utf8')).toMatch(/^-----BEGIN PUBLIC KEY-----/);
    expect((await cairn(['audit', 'keygen', '--public-key', publicKeyFile], {})).code).toBe(2);
    settings = { ...backendSettings('blob', azurite().blobEndpoint), ...auditSettings() };
    app = await startApp({
      CAIRN_API_KEYS: apiKeysSetting([ops, other, agent, probe]),
      CAIRN_AUDIT_SIGNING_KEY: keygen.stdout.trim(),
      CAIRN_ENCRYPTION_KEYS: `k1:${randomBytes(32).toString('hex')}`,
      ...settings,
    });
    asOps = client(app.url, ops.key);
    asOther = client(app.url, other.key);
    cliEnv = { CAIRN_URL: app.url, CAIRN_KEY: ops.key };
  });
  afterAll(async () => app?.stop());

  it('records run start, interrupt and finish, rewind, deletion and checkpoint publish, with ids and names only', async () => {
    const start = (thread: string, onBusy = 'reject') =>
      json<{ runId: string }>(
        asOps(`/api/threads/${thread}/runs`, { method: 'POST', body: JSON.stringify({ onBusy }) }),
        201,
      );
    const first = await start('t1');
    const put = await asOps('/api/threads/t1/checkpoints', {
      method: 'POST',
      body: JSON.stringify({
        checkpointId: 'c1',
        runId: first.runId,
        checkpoint: { type: 'json', data: Buffer.from('{"secret":"SECRET-CONTENT"}').toString('base64') },
        metadata: { note: 'SECRET-CONTENT' },
        channelVersions: { m: 1 },
        values: { m: { type: 'json', data: Buffer.from('"SECRET-CONTENT"').toString('base64') } },
      }),
    });
    expect(put.status).toBe(201);
    const second = await start('t1', 'interrupt');
    expect(
      (
        await asOps('/api/threads/t1/rewind', {
          method: 'POST',
          body: JSON.stringify({ checkpointId: 'c1', runId: second.runId }),
        })
      ).status,
    ).toBe(200);
    await json(
      asOps(`/api/threads/t1/runs/${second.runId}/finish`, { method: 'POST', body: '{"status":"finished"}' }),
    );
    expect((await asOps('/api/threads/t1', { method: 'DELETE' })).status).toBe(204);

    const sid = `s-${randomBytes(4).toString('hex')}`;
    const tail = Buffer.from('hello');
    expect(
      (await asOps(`/api/sessions/${sid}/objects/tails/c1/g1`, { method: 'PUT', body: tail })).status,
    ).toBe(201);
    const manifest = {
      checkpointId: 'c1',
      parent: null,
      files: [
        {
          path: 'events.jsonl',
          generation: 'g1',
          size: 5,
          sha256: createHash('sha256').update(tail).digest('hex'),
        },
      ],
    };
    const publish = () =>
      asOps(`/api/sessions/${sid}/checkpoints`, { method: 'POST', body: JSON.stringify(manifest) });
    expect((await publish()).status).toBe(201);
    expect((await publish()).status).toBe(201); // an idempotent retry: recorded once

    const { records: trail, next } = await records(asOps);
    expect(next).toBeNull();
    expect(lines(trail)).toEqual([
      '1 run.started t1',
      '2 run.interrupted t1',
      '3 run.started t1',
      '4 thread.rewound t1',
      '5 run.finished t1',
      '6 thread.deleted t1',
      '7 checkpoint.published',
    ]);
    expect(trail[1]).toMatchObject({ runId: first.runId, details: { by: second.runId } });
    expect(trail[3]).toMatchObject({ subject: 'c1', details: { ns: '' } });
    expect(trail[6]).toMatchObject({ subject: `${sid}/c1`, details: { sessionId: sid, files: 1 } });
    expect(trail.every((record) => record.actor === ops.tenant && record.outcome === 'ok')).toBe(true);
    expect(JSON.stringify(trail)).not.toContain('SECRET-CONTENT');
    // Another tenant's trail is its own.
    expect((await records(asOther)).records).toEqual([]);
  });

  it('records memory writes and forgets and snapshot publishes, with names and counts, never a value', async () => {
    const asAgent = client(app.url, agent.key);
    const fact = (namespace: string, key: string) =>
      `/api/memory/facts?${new URLSearchParams({ namespace, key }).toString()}`;
    const remember = (key: string, value: string) =>
      asAgent(fact('users/42', key), { method: 'PUT', body: JSON.stringify({ value }) });
    expect((await remember('lang', 'SECRET-FACT fr')).status).toBe(201);
    expect((await remember('lang', 'SECRET-FACT en')).status).toBe(200);
    expect((await remember('a/b', 'SECRET-FACT x')).status).toBe(201);
    expect((await asAgent(fact('users/42', 'lang'), { method: 'DELETE' })).status).toBe(204);
    // Absent: nothing was forgotten, nothing is recorded.
    expect((await asAgent(fact('users/42', 'lang'), { method: 'DELETE' })).status).toBe(204);
    expect(await json(asAgent('/api/memory/namespaces?namespace=users', { method: 'DELETE' }))).toEqual({
      deleted: 1,
      more: false,
    });

    const built = buildSnapshot(
      'w1',
      [{ path: 'a.txt', bytes: Buffer.from('SECRET-FILE') }],
      newKeyPair().privateKey,
    );
    for (const [sha256, part, bytes] of built.parts) {
      const put = await asAgent(`/api/workspaces/w1/snapshots/objects/${sha256}/${part}`, {
        method: 'PUT',
        body: bytes,
      });
      expect(put.status).toBe(201);
    }
    const publish = () =>
      asAgent('/api/workspaces/w1/snapshots', {
        method: 'POST',
        body: JSON.stringify({
          manifest: built.manifest.toString('base64'),
          signature: built.signature.toString('base64'),
          parent: null,
        }),
      });
    expect((await publish()).status).toBe(201);
    expect((await publish()).status).toBe(201); // a retry: recorded once

    const { records: trail } = await records(asAgent);
    expect(trail.map((record) => [record.seq, record.action, record.subject, record.details])).toEqual([
      [1, 'memory.written', '["users/42","lang"]', { created: true }],
      [2, 'memory.written', '["users/42","lang"]', { created: false }],
      [3, 'memory.written', '["users/42","a/b"]', { created: true }],
      [4, 'memory.forgotten', '["users/42","lang"]', undefined],
      [5, 'memory.forgotten', '["users"]', { count: 1, more: false }],
      [6, 'snapshot.published', `w1/${built.id}`, { parent: null, files: 1 }],
    ]);
    expect(trail.every((record) => record.actor === agent.tenant && record.outcome === 'ok')).toBe(true);
    expect(JSON.stringify(trail)).not.toMatch(/SECRET/);
    expect(await json(asAgent('/api/audit/verify'))).toMatchObject({
      ok: true,
      records: 6,
      firstBroken: null,
    });
  });

  it('filters by thread and action, and pages with afterSeq and limit', async () => {
    for (const thread of ['f1', 'f2', 'f1']) {
      const { runId } = await json<{ runId: string }>(
        asOps(`/api/threads/${thread}/runs`, { method: 'POST', body: '{"onBusy":"interrupt"}' }),
        201,
      );
      await json(
        asOps(`/api/threads/${thread}/runs/${runId}/finish`, { method: 'POST', body: '{"status":"failed"}' }),
      );
    }
    const f1 = await records(asOps, '?threadId=f1');
    expect(f1.records.map((record) => record.action)).toEqual([
      'run.started',
      'run.finished',
      'run.started',
      'run.finished',
    ]);
    expect(f1.records[1]?.details).toMatchObject({ status: 'failed' });
    const finished = await records(asOps, '?threadId=f1&action=run.finished');
    expect(finished.records).toHaveLength(2);
    const page = await records(asOps, '?limit=3');
    expect(page.records.map((record) => record.seq)).toEqual([1, 2, 3]);
    expect(page.next).toBe(3);
    const after = await records(asOps, `?afterSeq=${page.next}&limit=1000`);
    expect(after.records[0]?.seq).toBe(4);
    expect(after.next).toBeNull();
    for (const bad of ['?limit=0', '?limit=1001', '?afterSeq=-1', '?threadId=a/b', '?action=Run']) {
      const response = await asOps(`/api/audit/records${bad}`);
      expect(response.status, bad).toBe(400);
    }
  });

  it("records the rewrap job in the starting admin's trail", async () => {
    const started = await json<{ id: string }>(
      asOps('/api/encryption/rewraps', { method: 'POST', body: '{}' }),
      202,
    );
    for (;;) {
      const status = await json<{ status: string }>(asOps(`/api/encryption/rewraps/${started.id}`));
      if (status.status === 'completed') break;
      if (status.status === 'failed') throw new Error(`the rewrap job failed: ${JSON.stringify(status)}`);
      await sleep(100);
    }
    const jobs = await records(asOps, '?action=admin.rewrap.completed');
    expect(jobs.records).toHaveLength(1);
    expect(jobs.records[0]).toMatchObject({
      subject: started.id,
      details: { firstKeyId: 'k1', remaining: 0 },
    });
    expect((await records(asOps, '?action=admin.rewrap.started')).records).toHaveLength(1);
  });

  it('verifies, signs the head, and the CLI checks the trail against the signed heads with the public key alone', async () => {
    const verified = await json<{
      ok: boolean;
      records: number;
      firstBroken: number | null;
      head: [number, string];
      signedHead: { seq: number; hash: string };
    }>(asOps('/api/audit/verify'));
    expect(verified).toMatchObject({ ok: true, firstBroken: null });
    expect(verified.signedHead).toMatchObject({ seq: verified.head[0], hash: verified.head[1] });
    const heads = await json<{ heads: { seq: number }[] }>(asOps('/api/audit/heads'));
    expect(heads.heads.map((head) => head.seq)).toContain(verified.head[0]);

    const clean = await cairn(['audit', 'verify', '--public-key', publicKeyFile], cliEnv);
    expect(clean.code, clean.stderr).toBe(0);
    expect(JSON.parse(clean.stdout)).toMatchObject({ ok: true, records: verified.records, problems: [] });
    expect((await cairn(['audit', 'verify'], cliEnv)).code).toBe(2);
    const wrongKey = path.join(tempDir('audit-other'), 'other.pub');
    expect((await cairn(['audit', 'keygen', '--public-key', wrongKey], {})).code).toBe(0);
    const unsigned = await cairn(['audit', 'verify', '--public-key', wrongKey], cliEnv);
    expect(unsigned.code).toBe(1);
    expect((JSON.parse(unsigned.stdout) as { problems: string[] }).problems).toContain(
      'no head of the trail is signed by this key',
    );

    // Tampering with record 2: the service and the CLI both find it.
    const table = azuriteTable(azurite().tableEndpoint, settings['CAIRN_AUDIT_TABLE']);
    const row = (seq: number) => `r:${String(seq).padStart(12, '0')}`;
    const original = await table.getEntity<{ json: string }>(`t:${ops.tenant}`, row(2));
    const changed = { ...(JSON.parse(original.json) as AuditRecord), actor: 'someone-else' };
    await table.updateEntity(
      { partitionKey: `t:${ops.tenant}`, rowKey: row(2), json: JSON.stringify(changed) },
      'Merge',
    );
    expect(await json(asOps('/api/audit/verify'))).toMatchObject({ ok: false, firstBroken: 2 });
    const tampered = await cairn(['audit', 'verify', '--public-key', publicKeyFile], cliEnv);
    expect(tampered.code).toBe(1);
    expect(JSON.parse(tampered.stdout)).toMatchObject({ ok: false, firstBroken: 2 });
    await table.updateEntity(
      { partitionKey: `t:${ops.tenant}`, rowKey: row(2), json: original.json },
      'Merge',
    );

    // A cut tail: the records left are a chain, but not one that holds the signed head (nor an
    // expected one): the service says so and does not sign.
    const [headSeq, headHash] = verified.head;
    const last = await table.getEntity<{ json: string; action: string }>(`t:${ops.tenant}`, row(headSeq));
    await table.deleteEntity(`t:${ops.tenant}`, row(headSeq));
    const cut = await json<VerifyAnswer>(asOps('/api/audit/verify'));
    expect(cut).toMatchObject({ ok: false, firstBroken: headSeq });
    expect(cut.signedHead).toBeUndefined();
    expect(
      await json(asOps(`/api/audit/verify?expectedSeq=${headSeq}&expectedHash=${headHash}`)),
    ).toMatchObject({ ok: false, firstBroken: headSeq });
    const cutCli = await cairn(['audit', 'verify', '--public-key', publicKeyFile], cliEnv);
    expect(cutCli.code).toBe(1);
    expect(JSON.parse(cutCli.stdout)).toMatchObject({ firstBroken: headSeq });
    await table.createEntity({
      partitionKey: `t:${ops.tenant}`,
      rowKey: row(headSeq),
      json: last.json,
      action: last.action,
    });
    expect((await cairn(['audit', 'verify', '--public-key', publicKeyFile], cliEnv)).code).toBe(0);
    expect((await asOps('/api/audit/verify?expectedSeq=3')).status).toBe(400);
  });

  it('signs heads on the auditHeadSign timer, safe to run twice at once', async () => {
    const { runId } = await json<{ runId: string }>(
      asOps('/api/threads/timer/runs', { method: 'POST', body: '{}' }),
      201,
    );
    await json(
      asOps(`/api/threads/timer/runs/${runId}/finish`, { method: 'POST', body: '{"status":"finished"}' }),
    );
    const head = (await records(asOps, '?limit=1000')).records.at(-1)?.seq ?? 0;
    for (let run = 0; run < 2; run++) {
      expect((await runTimer(app, 'auditHeadSign')).status).toBe(202);
    }
    for (let waited = 0; ; waited += 100) {
      const heads = await json<{ heads: { seq: number }[] }>(asOps(`/api/audit/heads?afterSeq=${head - 1}`));
      if (heads.heads.some((signed) => signed.seq === head)) break;
      expect(waited).toBeLessThan(20_000);
      await sleep(100);
    }
  });

  it('refuses to sign a tampered and rebuilt trail; the CLI catches it against heads kept elsewhere once every signed head is gone', async () => {
    const asProbe = client(app.url, probe.key);
    const env = { CAIRN_URL: app.url, CAIRN_KEY: probe.key };
    const cli = (...extra: string[]) =>
      cairn(['audit', 'verify', '--public-key', publicKeyFile, ...extra], env);
    const report = (run: { stdout: string }) =>
      JSON.parse(run.stdout) as { ok: boolean; firstBroken: number | null; problems: string[] };
    for (const thread of ['p1', 'p2']) {
      const { runId } = await json<{ runId: string }>(
        asProbe(`/api/threads/${thread}/runs`, { method: 'POST', body: '{}' }),
        201,
      );
      await json(
        asProbe(`/api/threads/${thread}/runs/${runId}/finish`, {
          method: 'POST',
          body: '{"status":"finished"}',
        }),
      );
    }
    const first = await json<VerifyAnswer>(asProbe('/api/audit/verify'));
    expect(first).toMatchObject({ ok: true, problems: [], signedHead: { seq: 4, prevSeq: 0 } });
    // The user keeps the heads elsewhere.
    const keptFile = path.join(tempDir('audit-kept'), 'heads.json');
    const saved = await cli('--save-heads', keptFile);
    expect(saved.code, saved.stdout).toBe(0);
    expect(JSON.parse(readFileSync(keptFile, 'utf8'))).toEqual([first.signedHead]);

    // The probe: record 1 edited, then every record rewritten with fresh hashes.
    const table = azuriteTable(azurite().tableEndpoint, settings['CAIRN_AUDIT_TABLE']);
    const partition = `t:${probe.tenant}`;
    const row = (seq: number) => `r:${String(seq).padStart(12, '0')}`;
    let prevHash = GENESIS_HASH;
    for (let seq = 1; seq <= 4; seq++) {
      const original = JSON.parse(
        (await table.getEntity<{ json: string }>(partition, row(seq))).json,
      ) as AuditRecord;
      // withHash hashes everything but the old hash, then replaces it.
      const forged = withHash({ ...original, ...(seq === 1 ? { actor: 'someone-else' } : {}), prevHash });
      await table.updateEntity(
        { partitionKey: partition, rowKey: row(seq), json: JSON.stringify(forged) },
        'Merge',
      );
      prevHash = forged.hash;
    }
    const rewritten = await json<VerifyAnswer>(asProbe('/api/audit/verify'));
    expect(rewritten).toMatchObject({
      ok: false,
      firstBroken: 4,
      problems: ['record 4 no longer has the hash of the head at seq 4 (the chain was rewritten)'],
    });
    expect(rewritten.signedHead).toBeUndefined();
    expect(rewritten.notSigned).toMatch(/^the head at seq 4 is not signed: record 4 no longer has the hash/);
    const listed = await json<{ heads: SignedHead[] }>(asProbe('/api/audit/heads'));
    expect(listed.heads).toEqual([first.signedHead]);
    // The timer refuses too, and says so.
    expect((await runTimer(app, 'auditHeadSign')).status).toBe(202);
    const refused = () =>
      app
        .output()
        .split('\n')
        .some(
          (line) =>
            line.includes('"alert":"audit_head_not_signed"') &&
            line.includes('"refused":[') &&
            line.includes(`"${probe.tenant}"`),
        );
    for (let waited = 0; !refused(); waited += 100) {
      expect(waited).toBeLessThan(20_000);
      await sleep(100);
    }
    expect((await json<{ heads: SignedHead[] }>(asProbe('/api/audit/heads'))).heads).toEqual([
      first.signedHead,
    ]);
    const caught = await cli();
    expect(caught.code).toBe(1);
    expect(report(caught)).toMatchObject({ ok: false, firstBroken: 4 });

    // Every stored signed head deleted as well: the service cannot tell, and signs the rebuilt head
    // as a first head; with only the service's heads, neither can the CLI; the kept heads catch it.
    const deleteSignedHeads = async () => {
      for await (const entity of table.listEntities({
        queryOptions: { filter: `PartitionKey eq '${partition}' and RowKey gt 's:' and RowKey lt 's;'` },
      })) {
        await table.deleteEntity(partition, String(entity.rowKey));
      }
    };
    await deleteSignedHeads();
    expect(await json(asProbe('/api/audit/verify'))).toMatchObject({
      ok: true,
      signedHead: { seq: 4, prevSeq: 0 },
    });
    expect((await cli()).code).toBe(0);
    const rebuilt = await cli('--heads', keptFile);
    expect(rebuilt.code).toBe(1);
    expect(report(rebuilt)).toMatchObject({
      ok: false,
      firstBroken: 4,
      problems: [
        'the trail is broken at seq 4: record 4 no longer has the hash of the head at seq 4 (the chain was rewritten)',
      ],
    });

    // Cut back as well, with the heads gone again: the service's heads end before the kept one.
    await table.deleteEntity(partition, row(4));
    await deleteSignedHeads();
    const cut = await cli('--heads', keptFile);
    expect(cut.code).toBe(1);
    expect(report(cut).problems).toEqual([
      'the trail is broken at seq 4: the trail ends at seq 3, before the head at seq 4 (its tail was cut)',
      "the service's signed heads end at seq 0, before the kept head at seq 4 (signed heads were removed, or the trail was cut)",
      'no head of the trail is signed by this key',
    ]);
    // A heads file that is not one is a usage error.
    const bad = path.join(tempDir('audit-bad'), 'heads.json');
    writeFileSync(bad, '{"heads": [{"seq": "one"}]}');
    expect((await cli('--heads', bad)).code).toBe(2);
  });
});

describe('audit trail settings', () => {
  // With the trail off every audit route answers 501 not_configured: test/e2e/notConfigured.e2e.test.ts.

  it('without a signing key: says so once at start-up and signs nothing', async () => {
    const tenant = newTenant('unsigned');
    const app = await startApp({
      CAIRN_API_KEYS: apiKeysSetting([tenant]),
      ...backendSettings('local', azurite().blobEndpoint),
      ...auditSettings(),
    });
    try {
      const call = client(app.url, tenant.key);
      await json(call('/api/threads/t/runs', { method: 'POST', body: '{}' }), 201);
      const verified = await json<Record<string, unknown>>(call('/api/audit/verify'));
      expect(verified).toMatchObject({ ok: true, records: 1 });
      expect(verified['signedHead']).toBeUndefined();
      expect(await json(call('/api/audit/heads'))).toEqual({ heads: [], next: null });
      expect(app.output().match(/CAIRN_AUDIT_SIGNING_KEY is not set/g)).toHaveLength(1);
    } finally {
      await app.stop();
    }
  });
});

describe('audit trail with two app processes', () => {
  it('gives gapless seq to 16 concurrent writers, 8 on each process', async () => {
    const tenant: TestTenant = newTenant('fleet');
    const shared = {
      CAIRN_API_KEYS: apiKeysSetting([tenant]),
      ...backendSettings('blob', azurite().blobEndpoint),
      ...auditSettings(),
    };
    const apps = await Promise.all([startApp(shared), startApp(shared)]);
    try {
      const calls = apps.map((started) => client(started.url, tenant.key));
      await Promise.all(
        Array.from({ length: 16 }, async (_, writer) => {
          const call = calls[writer % 2] as Call;
          for (let round = 0; round < 3; round++) {
            const { runId } = await json<{ runId: string }>(
              call(`/api/threads/w${writer}/runs`, { method: 'POST', body: '{"onBusy":"reject"}' }),
              201,
            );
            await json(
              call(`/api/threads/w${writer}/runs/${runId}/finish`, {
                method: 'POST',
                body: '{"status":"finished"}',
              }),
            );
          }
        }),
      );
      const trail = (await records(calls[0] as Call, '?limit=1000')).records;
      expect(trail.map((record) => record.seq)).toEqual(Array.from({ length: 96 }, (_, i) => i + 1));
      expect(new Set(trail.map((record) => record.eventId)).size).toBe(96);
      for (let writer = 0; writer < 16; writer++) {
        expect(trail.filter((record) => record.threadId === `w${writer}`)).toHaveLength(6);
      }
      expect(await json((calls[1] as Call)('/api/audit/verify'))).toMatchObject({ ok: true, records: 96 });
    } finally {
      await Promise.all(apps.map((started) => started.stop()));
    }
  });
});
