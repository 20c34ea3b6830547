import { promises as fs } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';

import { walkInKeyOrder } from '../../shared/keyOrderWalk';
import { keyPath } from '../transport';
import { ApiError, type ApiSettings, apiSettingsFrom, callApi, expectStatus } from './apiClient';
import type { CommandIo } from './migrateCommand';

/**
 * `cairn persona push|pull --dir <d> [--prefix claude_memory]` : copies
 * a persona-memory folder into the caller's key/value space under the prefix, or back.
 * - push: every regular file not yet stored (create-only, never overwrites; existing keys are
 *   skipped); symbolic links and anything resolving outside the folder are errors, not followed.
 * - pull: every key under the prefix overwrites its local file (the cloud is authoritative); a key
 *   whose path would leave the folder is skipped and reported.
 * Exit 0, or 2 when the report has errors, 1 when the command could not run.
 */

export interface PersonaReport {
  copied: number;
  skipped: number;
  pulled: number;
  errors: [string, string][];
  keys: string[];
  skippedKeys: string[];
}

function emptyPersonaReport(): PersonaReport {
  return { copied: 0, skipped: 0, pulled: 0, errors: [], keys: [], skippedKeys: [] };
}

/** The folder `relative` resolves to, or null when it would leave `root`. */
function inside(root: string, relative: string): string | null {
  const resolved = path.resolve(root, relative);
  return resolved.startsWith(root + path.sep) ? resolved : null;
}

async function push(settings: ApiSettings, dir: string, prefix: string): Promise<PersonaReport> {
  const report = emptyPersonaReport();
  const root = await fs.realpath(dir).catch(() => null);
  if (root === null) return report;
  let after = '';
  for (;;) {
    const entries = await walkInKeyOrder(root, { after, limit: 500, include: () => true });
    for (const entry of entries) {
      const key = `${prefix}/${entry.key}`;
      if (entry.kind === 'symlink') {
        report.errors.push([key, 'symlinks are not allowed']);
        continue;
      }
      if (entry.kind !== 'file') continue;
      const file = inside(root, entry.key);
      if (file === null) {
        report.errors.push([key, 'outside the persona folder']);
        continue;
      }
      try {
        const response = await callApi(settings, `/api/kv/${keyPath(key)}`, {
          method: 'PUT',
          headers: { 'if-none-match': '*' },
          body: await fs.readFile(file),
        });
        await expectStatus(response, 201, 412);
        if (response.status === 412) {
          report.skipped++;
        } else {
          report.copied++;
          report.keys.push(key);
        }
      } catch (error) {
        if (error instanceof ApiError && error.status >= 500) throw error;
        report.errors.push([key, error instanceof Error ? error.message : String(error)]);
      }
    }
    const last = entries[entries.length - 1];
    if (entries.length < 500 || last === undefined) return report;
    after = last.key;
  }
}

async function pull(settings: ApiSettings, dir: string, prefix: string): Promise<PersonaReport> {
  const report = emptyPersonaReport();
  await fs.mkdir(dir, { recursive: true });
  const root = await fs.realpath(dir);
  let cursor: string | null = null;
  do {
    const query: string = `prefix=${encodeURIComponent(prefix + '/')}&limit=1000${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`;
    const page = (await (await expectStatus(await callApi(settings, `/api/keys?${query}`), 200)).json()) as {
      keys: string[];
      cursor: string | null;
    };
    for (const key of page.keys) {
      const relative = key.slice(prefix.length + 1);
      const file = relative === '' ? null : inside(root, relative);
      if (file === null) {
        report.skipped++;
        report.skippedKeys.push(key);
        continue;
      }
      const response = await callApi(settings, `/api/kv/${keyPath(key)}`);
      if (response.status === 404) continue;
      await expectStatus(response, 200);
      await fs.mkdir(path.dirname(file), { recursive: true });
      await fs.writeFile(file, Buffer.from(await response.arrayBuffer()));
      report.pulled++;
      report.keys.push(key);
    }
    cursor = page.cursor;
  } while (cursor !== null);
  return report;
}

export async function runPersonaCommand(args: string[], io: CommandIo): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    options: { dir: { type: 'string' }, prefix: { type: 'string', default: 'claude_memory' } },
    allowPositionals: true,
    strict: true,
  });
  const action = positionals[0];
  if ((action !== 'push' && action !== 'pull') || values.dir === undefined) {
    io.stderr.write('usage: cairn persona push|pull --dir <folder> [--prefix claude_memory]\n');
    return 1;
  }
  const settings = apiSettingsFrom(io.env);
  const prefix = values.prefix.replace(/\/+$/, '');
  const report =
    action === 'push' ? await push(settings, values.dir, prefix) : await pull(settings, values.dir, prefix);
  io.stdout.write(JSON.stringify(report, null, 2) + '\n');
  return report.errors.length > 0 ? 2 : 0;
}
