#!/usr/bin/env node
/**
 * `cairn checkpoint`: the command line of the archive client (registered in the `cairn` command,
 * shared/cli/main.ts; also runnable alone as `node dist/shared/client/cli.js checkpoint ...`).
 *
 *     cairn checkpoint publish <dir> --session <id> [--data <json>] [--checkpoint <id>] [--concurrency <n>]
 *     cairn checkpoint restore --session <id> <dir> [--checkpoint <id>]
 *
 * CAIRN_URL is Cairn's base URL (e.g. http://127.0.0.1:7071), CAIRN_KEY an API key or an Entra ID
 * access token. Prints one JSON report on stdout; errors go to stderr with exit code 1 (2 for a
 * usage error).
 */
import { parseArgs } from 'node:util';

import { ArchiveClient } from '../archiveClient';

export const CHECKPOINT_USAGE = `usage:
  cairn checkpoint publish <dir> --session <id> [--data <json>] [--checkpoint <id>] [--concurrency <n>]
  cairn checkpoint restore --session <id> <dir> [--checkpoint <id>]
environment: CAIRN_URL (e.g. http://127.0.0.1:7071), CAIRN_KEY (API key or access token)`;

export interface CheckpointCommandIo {
  readonly env: NodeJS.ProcessEnv;
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream;
}

class UsageError extends Error {}

/** Runs `checkpoint publish|restore ...` (the arguments after `checkpoint`); returns the exit code. */
export async function runCheckpointCommand(args: string[], io: CheckpointCommandIo): Promise<number> {
  try {
    const report = await checkpointCommand(args, io.env);
    io.stdout.write(`${JSON.stringify(report)}\n`);
    return 0;
  } catch (error) {
    const usage =
      error instanceof UsageError || String((error as { code?: unknown }).code).startsWith('ERR_PARSE_ARGS');
    io.stderr.write(`cairn checkpoint: ${error instanceof Error ? error.message : String(error)}\n`);
    if (usage) io.stderr.write(`${CHECKPOINT_USAGE}\n`);
    return usage ? 2 : 1;
  }
}

async function checkpointCommand(args: string[], env: NodeJS.ProcessEnv): Promise<unknown> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    strict: true,
    options: {
      session: { type: 'string' },
      checkpoint: { type: 'string' },
      data: { type: 'string' },
      concurrency: { type: 'string' },
    },
  });
  const [command, dir, ...rest] = positionals;
  if ((command !== 'publish' && command !== 'restore') || dir === undefined || rest.length > 0) {
    throw new UsageError('expected "publish <dir>" or "restore <dir>"');
  }
  if (values.session === undefined) throw new UsageError('--session <id> is required');
  const baseUrl = env['CAIRN_URL'];
  const token = env['CAIRN_KEY'];
  if (!baseUrl) throw new UsageError('set CAIRN_URL to the service URL');
  if (!token) throw new UsageError('set CAIRN_KEY to an API key or access token');
  const concurrency = values.concurrency === undefined ? undefined : Number(values.concurrency);
  if (concurrency !== undefined && (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 64)) {
    throw new UsageError('--concurrency must be a whole number from 1 to 64');
  }
  const archive = new ArchiveClient({
    url: baseUrl,
    token,
    ...(concurrency === undefined ? {} : { concurrency }),
  });
  const checkpointId = values.checkpoint === undefined ? {} : { checkpointId: values.checkpoint };
  if (command === 'restore') return archive.restoreCheckpoint(values.session, dir, checkpointId);
  let data: Record<string, unknown> | undefined;
  if (values.data !== undefined) {
    try {
      data = JSON.parse(values.data) as Record<string, unknown>;
    } catch {
      throw new UsageError('--data must be a JSON object');
    }
  }
  return archive.publishCheckpoint(dir, values.session, {
    ...checkpointId,
    ...(data === undefined ? {} : { data }),
  });
}

if (require.main === module) {
  const [group, ...rest] = process.argv.slice(2);
  const run =
    group === 'checkpoint'
      ? runCheckpointCommand(rest, process)
      : Promise.resolve(process.stderr.write(`${CHECKPOINT_USAGE}\n`)).then(() => 2);
  void run.then((code) => process.exit(code));
}
