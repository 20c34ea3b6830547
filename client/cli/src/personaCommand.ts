import { constants, promises as fs } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';

import type { KeyValueClient } from '@cairn-state/client';
import { CairnHttpError, CairnNetworkError } from '@cairn-state/client';
import { walkInKeyOrder } from '@cairn-state/protocol/keyOrderWalk';
import { validateKey } from '@cairn-state/protocol/keys';

import { checked, type Command, existingFolder, EXIT_FAILURE, EXIT_SUCCESS, UsageError } from './command.js';

/**
 * `cairn persona push|pull`: copies a persona-memory folder into the caller's key/value space under
 * a prefix, or back. Prints the report on stdout; exit 1 when it has errors.
 * - push: every regular file not yet stored (create-only, never overwrites; existing keys are
 *   skipped); symbolic links and anything resolving outside the folder are errors, not followed.
 * - pull: every key under the prefix overwrites its local file (the service is authoritative); a
 *   key whose path would leave the folder is skipped and reported. No symbolic link inside the
 *   folder is followed: a key whose file, or a folder on its path, is a link is an error naming
 *   that path, and nothing is written for it (the folder given itself may be a link).
 * A refusal of the service (5xx) or no answer at all stops the command instead of repeating itself
 * for every file.
 */
export const personaCommand: Command = {
  usage: '  cairn persona push|pull --dir <folder> [--prefix claude_memory]',

  async run(args, io) {
    const { values, positionals } = parseArgs({
      args,
      options: { dir: { type: 'string' }, prefix: { type: 'string', default: 'claude_memory' } },
      allowPositionals: true,
      strict: true,
    });
    const [action, ...rest] = positionals;
    if ((action !== 'push' && action !== 'pull') || rest.length > 0) {
      throw new UsageError('expected "push" or "pull"');
    }
    if (values.dir === undefined) throw new UsageError('--dir <folder> is required');
    const prefix = values.prefix.replace(/\/+$/, '');
    if (prefix === '') throw new UsageError('--prefix must not be empty');
    checked('--prefix', prefix, validateKey);
    if (action === 'push') await existingFolder('--dir', values.dir);
    const kv = io.connect().kv;
    const report =
      action === 'push' ? await push(kv, values.dir, prefix) : await pull(kv, values.dir, prefix);
    io.stdout.write(JSON.stringify(report, null, 2) + '\n');
    return report.errors.length > 0 ? EXIT_FAILURE : EXIT_SUCCESS;
  },
};

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

/** The file `relative` resolves to, or null when it would leave `root`. */
function inside(root: string, relative: string): string | null {
  const resolved = path.resolve(root, relative);
  return resolved.startsWith(root + path.sep) ? resolved : null;
}

const PUSH_PAGE = 500;

async function push(kv: KeyValueClient, dir: string, prefix: string): Promise<PersonaReport> {
  const report = emptyPersonaReport();
  const root = await fs.realpath(dir).catch(() => null);
  if (root === null) return report;
  let after = '';
  for (;;) {
    const entries = await walkInKeyOrder(root, { after, limit: PUSH_PAGE, include: () => true });
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
        await kv.put(key, await fs.readFile(file), { ifNoneMatch: '*' });
        report.copied++;
        report.keys.push(key);
      } catch (error) {
        if (error instanceof CairnHttpError && error.code === 'precondition_failed') {
          report.skipped++;
          continue;
        }
        if (error instanceof CairnNetworkError || (error instanceof CairnHttpError && error.status >= 500)) {
          throw error;
        }
        report.errors.push([key, error instanceof Error ? error.message : String(error)]);
      }
    }
    const last = entries[entries.length - 1];
    if (entries.length < PUSH_PAGE || last === undefined) return report;
    after = last.key;
  }
}

async function pull(kv: KeyValueClient, dir: string, prefix: string): Promise<PersonaReport> {
  const report = emptyPersonaReport();
  await fs.mkdir(dir, { recursive: true });
  const root = await fs.realpath(dir);
  for await (const key of kv.list({ prefix: `${prefix}/` })) {
    const relative = key.slice(prefix.length + 1);
    const file = relative === '' ? null : inside(root, relative);
    if (file === null) {
      report.skipped++;
      report.skippedKeys.push(key);
      continue;
    }
    const link = await linkOnPath(root, relative);
    if (link !== null) {
      report.errors.push([
        key,
        `${link} is a symbolic link inside the persona folder: not followed, nothing written`,
      ]);
      continue;
    }
    const stored = await kv.get(key);
    if (stored === null) continue;
    try {
      await writeNoFollow(file, stored.value);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ELOOP') throw error;
      report.errors.push([
        key,
        `${relative} is a symbolic link inside the persona folder: not followed, nothing written`,
      ]);
      continue;
    }
    report.pulled++;
    report.keys.push(key);
  }
  return report;
}

/**
 * The first symbolic link on the path of `relative` below `root` (as a `/` path relative to root),
 * or null: every component that exists is checked with lstat.
 */
async function linkOnPath(root: string, relative: string): Promise<string | null> {
  const segments = relative.split('/').filter((segment) => segment !== '');
  for (let count = 1; count <= segments.length; count++) {
    const stat = await fs
      .lstat(path.join(root, ...segments.slice(0, count)))
      .catch((error: NodeJS.ErrnoException) => {
        if (error.code === 'ENOENT' || error.code === 'ENOTDIR') return null;
        throw error;
      });
    if (stat === null) return null;
    if (stat.isSymbolicLink()) return segments.slice(0, count).join('/');
  }
  return null;
}

/**
 * Writes `file` (its folders made first) without following a link at the file itself (O_NOFOLLOW:
 * ELOOP); the folders on its path were checked by linkOnPath just before.
 */
async function writeNoFollow(file: string, bytes: Buffer): Promise<void> {
  await fs.mkdir(path.dirname(file), { recursive: true });
  const handle = await fs.open(
    file,
    constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW,
    0o666,
  );
  try {
    await handle.writeFile(bytes);
  } finally {
    await handle.close();
  }
}
