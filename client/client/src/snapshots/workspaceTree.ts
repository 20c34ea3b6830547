import { type Dirent, promises as fs } from 'node:fs';
import path from 'node:path';

import { pathProblem } from '@cairn-state/protocol/snapshots/manifest';

/**
 * What a workspace folder holds, walked without following links: regular files, symlinks (to
 * files, to folders, dangling: each kept as its target text) and folders (descended into). Anything
 * else (FIFOs, sockets, devices) and any name a manifest cannot hold (not UTF-8, a backslash, a
 * control character) is reported in `unsupported`, never silently dropped. Empty folders hold
 * nothing a snapshot keeps.
 */
export interface TreeFile {
  /** POSIX path relative to the root. */
  readonly path: string;
  readonly absolute: string;
}

export interface TreeSymlink {
  readonly source: string;
  readonly target: string;
}

export interface UnsupportedEntry {
  readonly path: string;
  readonly reason: string;
}

export interface WorkspaceTree {
  readonly files: TreeFile[];
  readonly symlinks: TreeSymlink[];
  readonly unsupported: UnsupportedEntry[];
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

function decodeName(bytes: Buffer): string | null {
  try {
    return utf8.decode(bytes);
  } catch {
    return null;
  }
}

function kindOf(entry: Dirent<Buffer>): string {
  if (entry.isFIFO()) return 'a FIFO';
  if (entry.isSocket()) return 'a socket';
  if (entry.isBlockDevice()) return 'a block device';
  if (entry.isCharacterDevice()) return 'a character device';
  return 'of an unknown type';
}

export async function walkWorkspace(root: string): Promise<WorkspaceTree> {
  const rootStat = await fs.stat(root);
  if (!rootStat.isDirectory()) throw new Error(`${root} is not a folder`);
  const tree: WorkspaceTree = { files: [], symlinks: [], unsupported: [] };
  const folders: { absolute: string; relative: string }[] = [{ absolute: root, relative: '' }];
  for (let folder = folders.pop(); folder !== undefined; folder = folders.pop()) {
    const entries = await fs.readdir(folder.absolute, { withFileTypes: true, encoding: 'buffer' });
    for (const entry of entries) {
      const name = decodeName(entry.name);
      const shown = name ?? entry.name.toString('utf8');
      const relative = folder.relative === '' ? shown : `${folder.relative}/${shown}`;
      const absolute = path.join(folder.absolute, shown);
      if (name === null) {
        tree.unsupported.push({ path: relative, reason: 'its name is not UTF-8' });
        continue;
      }
      const problem = pathProblem(relative);
      if (problem !== null) {
        tree.unsupported.push({ path: relative, reason: `its path ${problem}` });
        continue;
      }
      if (entry.isDirectory()) {
        folders.push({ absolute, relative });
      } else if (entry.isFile()) {
        tree.files.push({ path: relative, absolute });
      } else if (entry.isSymbolicLink()) {
        const target = decodeName(await fs.readlink(absolute, { encoding: 'buffer' }));
        if (target === null) tree.unsupported.push({ path: relative, reason: 'its target is not UTF-8' });
        else tree.symlinks.push({ source: relative, target });
      } else {
        tree.unsupported.push({ path: relative, reason: `it is ${kindOf(entry)}` });
      }
    }
  }
  return tree;
}
