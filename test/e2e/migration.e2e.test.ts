import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { MigrationReport } from '../../shared/migration/migration';
import {
  apiKeysSetting,
  backendSettings,
  client,
  newTenant,
  type RunningApp,
  startApp,
} from '../support/app';
import { azurite } from '../support/azurite';
import { tempDir } from '../support/cleanup';

/**
 * The migration end to end (docs/migration.md): HTTP starter, the durable orchestration run by the local
 * runtime through the real durable-functions library, activities writing to Azurite.
 */

interface Status {
  id: string;
  status: string;
  progress: { total: number; done: number };
  report: MigrationReport | null;
}

function tree(files: Record<string, string | Buffer>): string {
  const root = tempDir('migrate');
  for (const [relative, content] of Object.entries(files)) {
    const full = path.join(root, relative);
    mkdirSync(path.dirname(full), { recursive: true });
    writeFileSync(full, content);
  }
  return root;
}

describe('migration of local state to blob storage', () => {
  const ops = newTenant('ops', true);
  const agent = newTenant('agent');
  const fresh = newTenant('fresh');
  let app: RunningApp;
  const binary = randomBytes(3000);
  let source: string;
  let persona: string;

  beforeAll(async () => {
    app = await startApp({
      CAIRN_API_KEYS: apiKeysSetting([ops, agent, fresh]),
      // The sources are temp folders.
      CAIRN_MIGRATION_SOURCE_ROOTS: os.tmpdir(),
      ...backendSettings('blob', azurite().blobEndpoint),
    });
    source = tree({
      'notes/today.md': 'hello',
      'deep/a/b/c.bin': binary,
      'poll_state/email_cursor.txt': '2026-01-01T00:00:00Z',
      'email_cursor.txt': 'legacy',
      watched_chats: '["19:a"]',
      chat_id: 'legacy',
      'chat_cursors/19:abc.json': '{}',
      '.singleton.lock': '123',
      'existing.txt': 'local version',
    });
    execFileSync('mkfifo', [path.join(source, 'pipe')]);
    persona = tree({
      'poll_state/email_cursor.txt': 'kept under a prefix',
      'chat_cursors/x.json': '{"x":1}',
    });
  });
  afterAll(async () => app.stop());

  async function migrate(body: unknown, key = ops.key): Promise<Status> {
    const started = await client(app.url, key)('/api/migrations', {
      method: 'POST',
      body: JSON.stringify(body),
    });
    expect(started.status).toBe(202);
    const { id, statusUri } = (await started.json()) as { id: string; statusUri: string };
    expect(started.headers.get('location')).toBe(statusUri);
    for (let poll = 0; poll < 300; poll++) {
      const response = await client(app.url, key)(`/api/migrations/${id}`);
      const status = (await response.json()) as Status;
      if (status.status === 'completed' || status.status === 'failed') return status;
      expect(['pending', 'running']).toContain(status.status);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error('the migration did not finish');
  }

  it('copies byte for byte, skips what exists, leaves sources alone, excludes root poll state, reports errors', async () => {
    const asAgent = client(app.url, agent.key);
    expect((await asAgent('/api/kv/existing.txt', { method: 'PUT', body: 'cloud version' })).status).toBe(
      201,
    );

    const status = await migrate({
      tenant: agent.tenant,
      sources: [
        { root: source, prefix: '' },
        { root: persona, prefix: 'claude_memory' },
      ],
    });
    expect(status.status).toBe('completed');
    const report = status.report!;
    expect(report.keysCopied).toEqual([
      'deep/a/b/c.bin',
      'notes/today.md',
      'claude_memory/chat_cursors/x.json',
      'claude_memory/poll_state/email_cursor.txt',
    ]);
    expect(report.copied).toBe(4);
    expect(report.skipped).toBe(1);
    expect(report.bytesCopied).toBe(binary.length + 5 + 7 + 'kept under a prefix'.length);
    expect(report.errors).toEqual([['pipe', 'not a regular file']]);
    expect(status.progress).toEqual({ total: 6, done: 6 });

    expect(Buffer.from(await (await asAgent('/api/kv/deep/a/b/c.bin')).arrayBuffer()).equals(binary)).toBe(
      true,
    );
    expect(await (await asAgent('/api/kv/notes/today.md')).text()).toBe('hello');
    expect(await (await asAgent('/api/kv/existing.txt')).text()).toBe('cloud version');
    expect(await (await asAgent('/api/kv/claude_memory/poll_state/email_cursor.txt')).text()).toBe(
      'kept under a prefix',
    );
    for (const excluded of [
      'poll_state/email_cursor.txt',
      'email_cursor.txt',
      'watched_chats',
      'chat_id',
      '.singleton.lock',
    ]) {
      expect((await asAgent(`/api/kv/${excluded}`)).status, excluded).toBe(404);
    }
    expect(
      ((await (await asAgent('/api/keys?prefix=chat_cursors')).json()) as { keys: string[] }).keys,
    ).toEqual([]);
    expect(readFileSync(path.join(source, 'existing.txt'), 'utf8')).toBe('local version');
    expect(readFileSync(path.join(source, 'notes/today.md'), 'utf8')).toBe('hello');

    const again = await migrate({
      tenant: agent.tenant,
      sources: [
        { root: source, prefix: '' },
        { root: persona, prefix: 'claude_memory' },
      ],
    });
    expect(again.report).toMatchObject({ copied: 0, skipped: 5, bytesCopied: 0, keysCopied: [] });
    expect(again.report?.errors).toHaveLength(1);
  });

  it('reports what a dry run would copy and writes nothing', async () => {
    const status = await migrate({
      tenant: fresh.tenant,
      sources: [{ root: persona, prefix: 'p' }],
      dryRun: true,
    });
    expect(status.report).toMatchObject({
      copied: 2,
      skipped: 0,
      keysCopied: ['p/chat_cursors/x.json', 'p/poll_state/email_cursor.txt'],
    });
    expect(await (await client(app.url, fresh.key)('/api/keys')).json()).toEqual({ keys: [], cursor: null });
  });

  it('is for admins only, validates its input, and answers 404 for an unknown migration', async () => {
    const asAgent = client(app.url, agent.key);
    const body = JSON.stringify({ tenant: agent.tenant, sources: [{ root: source, prefix: '' }] });
    expect((await asAgent('/api/migrations', { method: 'POST', body })).status).toBe(403);
    expect((await asAgent('/api/migrations/whatever')).status).toBe(403);
    expect((await client(app.url)('/api/migrations', { method: 'POST', body })).status).toBe(401);
    const asOps = client(app.url, ops.key);
    for (const [bad, field] of [
      [{ sources: [{ root: source }] }, 'tenant'],
      [{ tenant: 'a b', sources: [{ root: source }] }, 'tenant'],
      [{ tenant: 't', sources: [] }, 'sources'],
      [{ tenant: 't', sources: [{ root: source, prefix: '../up' }] }, 'sources.0.prefix'],
      [{ tenant: 't', sources: [{ root: source }], extra: 1 }, 'extra'],
      [{ tenant: 't', sources: [{ root: source }], dryRun: 'yes' }, 'dryRun'],
      [{ tenant: 't', sources: [{ root: '/etc' }] }, 'sources.0.root'],
      [{ tenant: 't', sources: [{ root: source }, { root: 'relative/folder' }] }, 'sources.1.root'],
    ] as const) {
      const response = await asOps('/api/migrations', { method: 'POST', body: JSON.stringify(bad) });
      expect(response.status, field).toBe(400);
      expect(((await response.json()) as { error: { message: string } }).error.message).toContain(field);
    }
    // A folder that does not exist on the host, or a file, is refused up front naming it, for a
    // dry run too: not run as a migration that copies nothing and succeeds. Nothing is written.
    const missing = path.join(source, 'does-not-exist');
    for (const [root, dryRun] of [
      [missing, false],
      [missing, true],
      [path.join(source, 'existing.txt'), false],
    ] as const) {
      const body = { tenant: fresh.tenant, sources: [{ root: persona }, { root }], dryRun };
      const response = await asOps('/api/migrations', { method: 'POST', body: JSON.stringify(body) });
      expect(response.status, root).toBe(400);
      const { error } = (await response.json()) as { error: { code: string; message: string } };
      expect(error.code).toBe('invalid_argument');
      expect(error.message).toContain('sources.1.root');
      expect(error.message).toContain(root);
    }
    expect(await (await client(app.url, fresh.key)('/api/keys')).json()).toEqual({ keys: [], cursor: null });
    const unknown = await asOps('/api/migrations/no-such-id');
    expect(unknown.status).toBe(404);
  });
});

describe('migration source roots reached through a symbolic link', () => {
  const ops = newTenant('ops', true);
  const target = newTenant('target');
  let app: RunningApp;
  let allowed: string;
  let outside: string;

  beforeAll(async () => {
    // The one allowed folder holds a link to a folder outside it: naming the link (or a folder
    // below it) as a root must not read what the instance does not allow.
    allowed = tree({ 'inside.txt': 'allowed' });
    outside = tree({ 'secret.txt': 'not allowed', 'below/deeper.txt': 'not allowed either' });
    symlinkSync(outside, path.join(allowed, 'link'), 'dir');
    app = await startApp({
      CAIRN_API_KEYS: apiKeysSetting([ops, target]),
      CAIRN_MIGRATION_SOURCE_ROOTS: allowed,
      ...backendSettings('blob', azurite().blobEndpoint),
    });
  });
  afterAll(async () => app.stop());

  it('refuses a root whose real folder is outside CAIRN_MIGRATION_SOURCE_ROOTS (400 naming it), dry run or not', async () => {
    const asOps = client(app.url, ops.key);
    for (const root of [path.join(allowed, 'link'), path.join(allowed, 'link', 'below')]) {
      for (const dryRun of [true, false]) {
        const body = { tenant: target.tenant, sources: [{ root, prefix: '' }], dryRun };
        const response = await asOps('/api/migrations', { method: 'POST', body: JSON.stringify(body) });
        expect(response.status, root).toBe(400);
        const { error } = (await response.json()) as { error: { code: string; message: string } };
        expect(error.code).toBe('invalid_argument');
        expect(error.message).toContain('sources.0.root');
      }
    }
    expect(await (await client(app.url, target.key)('/api/keys')).json()).toEqual({ keys: [], cursor: null });
    // The allowed folder itself is still migrated (its link is listed, never followed).
    const started = await asOps('/api/migrations', {
      method: 'POST',
      body: JSON.stringify({ tenant: target.tenant, sources: [{ root: allowed, prefix: '' }], dryRun: true }),
    });
    expect(started.status).toBe(202);
  });
});

// A migration on the local backend: test/e2e/notConfigured.e2e.test.ts.
