/**
 * Serves the app's registrations with the local runtime, on PORT (default 7071), with the settings
 * in the environment. Used by `npm start` (in-process) and by the end-to-end tests (as a child
 * process). Exits 1 when the app refuses to start (e.g. a configuration error, named).
 */
import path from 'node:path';

import { ConfigurationError } from '../errors';
import { type LocalRuntime, startLocalRuntime } from './localRuntime';

export const APP_ENTRY = path.resolve(__dirname, '..', '..', 'functions', 'index.js');

export async function serve(port = Number(process.env['PORT'] ?? 7071)): Promise<LocalRuntime> {
  try {
    return await startLocalRuntime({ entry: APP_ENTRY, port });
  } catch (error) {
    if (error instanceof ConfigurationError) {
      process.stderr.write(`Cairn cannot start: ${error.message}\n`);
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
