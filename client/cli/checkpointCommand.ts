import { parseArgs } from 'node:util';

import { type Command, EXIT_SUCCESS, UsageError } from './command';

/**
 * `cairn checkpoint publish|restore`: the archive client on the command line. Prints one JSON
 * report on stdout.
 */
export const checkpointCommand: Command = {
  usage: `  cairn checkpoint publish <dir> --session <id> [--data <json>] [--checkpoint <id>] [--concurrency <n>]
  cairn checkpoint restore --session <id> <dir> [--checkpoint <id>]`,

  async run(args, io) {
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
    const [action, dir, ...rest] = positionals;
    if ((action !== 'publish' && action !== 'restore') || dir === undefined || rest.length > 0) {
      throw new UsageError('expected "publish <dir>" or "restore <dir>"');
    }
    if (values.session === undefined) throw new UsageError('--session <id> is required');
    const concurrency = values.concurrency === undefined ? undefined : Number(values.concurrency);
    if (
      concurrency !== undefined &&
      (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 64)
    ) {
      throw new UsageError('--concurrency must be a whole number from 1 to 64');
    }
    const data = values.data === undefined ? undefined : jsonObject(values.data);
    const archive = io.connect(concurrency === undefined ? {} : { concurrency }).sessions;
    const checkpointId = values.checkpoint === undefined ? {} : { checkpointId: values.checkpoint };
    const report =
      action === 'restore'
        ? await archive.restoreCheckpoint(values.session, dir, checkpointId)
        : await archive.publishCheckpoint(dir, values.session, {
            ...checkpointId,
            ...(data === undefined ? {} : { data }),
          });
    io.stdout.write(`${JSON.stringify(report)}\n`);
    return EXIT_SUCCESS;
  },
};

function jsonObject(text: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new UsageError('--data must be a JSON object');
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new UsageError('--data must be a JSON object');
  }
  return value as Record<string, unknown>;
}
