import { randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';

/**
 * A local session directory as an agent keeps it: `events.jsonl` plus append-only files under
 * `native/`, and the client's own record of what it uploaded, `uploaded.json` (never published).
 */

export const EVENTS_FILE = 'events.jsonl';
export const NATIVE_FOLDER = 'native';
export const UPLOAD_STATE_FILE = 'uploaded.json';

export interface SessionFile {
  /** `/`-separated path inside the session directory (the manifest path). */
  readonly path: string;
  readonly absolute: string;
}

/** `events.jsonl` (when present) and every regular file under `native/`, in path order. */
export async function listSessionFiles(dir: string): Promise<SessionFile[]> {
  const files: SessionFile[] = [];
  const events = path.join(dir, EVENTS_FILE);
  if ((await fs.stat(events).catch(() => null))?.isFile() === true)
    files.push({ path: EVENTS_FILE, absolute: events });
  async function walk(folder: string, prefix: string): Promise<void> {
    let entries;
    try {
      entries = await fs.readdir(folder, { withFileTypes: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw error;
    }
    for (const entry of entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
      const absolute = path.join(folder, entry.name);
      if (entry.isDirectory()) await walk(absolute, `${prefix}${entry.name}/`);
      else if (entry.isFile()) files.push({ path: `${prefix}${entry.name}`, absolute });
    }
  }
  await walk(path.join(dir, NATIVE_FOLDER), `${NATIVE_FOLDER}/`);
  return files;
}

/** What was uploaded of one file: its generation and how many full blocks of it. */
export interface UploadedFile {
  readonly generation: string;
  /** Full blocks stored under the generation (blocks `0 … blocks-1`). */
  readonly blocks: number;
  /** SHA-256 of those blocks' bytes: a file whose start no longer matches is rewritten, not appended. */
  readonly prefixSha256: string;
}

export interface UploadState {
  readonly version: 1;
  readonly session: string;
  readonly checkpointId: string;
  readonly files: Readonly<Record<string, UploadedFile>>;
}

/** The state of `sessionId` in `dir`, or an empty one (missing, unreadable or another session's). */
export async function readUploadState(dir: string, sessionId: string): Promise<UploadState | null> {
  try {
    const state = JSON.parse(await fs.readFile(path.join(dir, UPLOAD_STATE_FILE), 'utf8')) as UploadState;
    return state.version === 1 && state.session === sessionId && typeof state.files === 'object'
      ? state
      : null;
  } catch {
    return null;
  }
}

/** Replaces the state file atomically (temp file, then rename): a crash leaves the old or the new. */
export async function writeUploadState(dir: string, state: UploadState): Promise<void> {
  const temp = path.join(dir, `.${UPLOAD_STATE_FILE}.${randomUUID()}`);
  await fs.writeFile(temp, JSON.stringify(state, null, 2) + '\n');
  await fs.rename(temp, path.join(dir, UPLOAD_STATE_FILE));
}
