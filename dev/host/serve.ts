/**
 * Serves the app's registrations with the local runtime, on PORT (default 7071), with the settings
 * in the environment. Used by `npm start` (in-process) and by the end-to-end tests (as a child
 * process). Exits 1 when the app refuses to start (e.g. a configuration error, named). The host's
 * master key is `.cairn/host-key` of the current folder, made when missing.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';

import { ConfigurationError } from '../../shared/protocol/errors';
import { loadOrCreateHostKey } from './hostAccess';
import { type LocalRuntime, startLocalRuntime } from './localRuntime';

/** The app's entry point: package.json `main`, the very file the Functions host loads. */
export const APP_ENTRY = appEntry();

function appEntry(): string {
  // dist/dev/host/ → the project folder.
  const projectRoot = path.resolve(__dirname, '..', '..', '..');
  const manifest = JSON.parse(readFileSync(path.join(projectRoot, 'package.json'), 'utf8')) as {
    main: string;
  };
  return path.resolve(projectRoot, manifest.main);
}

/** The development state folder of the current folder, where the host key is kept. */
export function stateDirectory(): string {
  return path.join(process.cwd(), '.cairn');
}

export async function serve(
  port = Number(process.env['PORT'] ?? 7071),
  hostKey = loadOrCreateHostKey(stateDirectory()).key,
): Promise<LocalRuntime> {
  try {
    return await startLocalRuntime({ entry: APP_ENTRY, port, hostKey });
  } catch (error) {
    if (error instanceof ConfigurationError) {
      process.stderr.write(`Cairn cannot start: ${error.message}\n`);
    } else if ((error as NodeJS.ErrnoException).code === 'EADDRINUSE') {
      process.stderr.write(
        `Cairn cannot start: PORT ${port} is in use by another program: stop it, or set PORT to a free port\n`,
      );
    } else {
      process.stderr.write(`Cairn cannot start: ${error instanceof Error ? error.stack : String(error)}\n`);
    }
    throw error;
  }
}

/** Stops `runtime` on Ctrl-C or SIGTERM, then `after()`. */
export function stopOnSignals(
  runtime: { close(): Promise<void> },
  after: () => Promise<void> = async () => {},
): void {
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    void runtime
      .close()
      .then(after)
      .finally(() => process.exit(0));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

if (require.main === module) {
  serve().then(
    (runtime) => stopOnSignals(runtime),
    () => process.exit(1),
  );
}
