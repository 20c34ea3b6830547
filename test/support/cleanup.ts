import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { type Azurite, type AzuriteOptions, startAzurite as startAzuriteProcess } from '../../dev/azurite';
import { scaled } from './timeouts';

/**
 * What tests and benches leave behind, removed whatever happens: every temporary folder made with
 * {@link tempDir} and every process registered with {@link onCleanUp} (apps, Azurites). Test files
 * get it through the setup file `test/support/setup.ts` (after each file, also when it failed);
 * the bench runner calls {@link cleanUp} before it exits.
 */

const folders = new Set<string>();
const stoppers = new Set<() => Promise<void>>();

/** A new empty folder under the system's temp folder, removed by {@link cleanUp}. */
export function tempDir(prefix: string): string {
  const folder = mkdtempSync(path.join(os.tmpdir(), `cairn-${prefix}-`));
  folders.add(folder);
  return folder;
}

/** Registers `stop` to run at clean-up; the returned function unregisters it (after a normal stop). */
export function onCleanUp(stop: () => Promise<void>): () => void {
  stoppers.add(stop);
  return () => stoppers.delete(stop);
}

/** Stops every registered process, then removes every temporary folder. */
export async function cleanUp(): Promise<void> {
  const stops = [...stoppers];
  stoppers.clear();
  await Promise.allSettled(stops.map((stop) => stop()));
  for (const folder of folders) rmSync(folder, { recursive: true, force: true });
  folders.clear();
}

/** An Azurite of the caller's own (to stop and restart it), stopped at clean-up if not before. */
export async function startAzurite(options: AzuriteOptions = {}): Promise<Azurite> {
  const started = await startAzuriteProcess({ startTimeoutMs: scaled(30_000), ...options });
  const forget = onCleanUp(() => started.stop());
  return {
    ...started,
    stop: async () => {
      forget();
      await started.stop();
    },
  };
}
