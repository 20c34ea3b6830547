import { parseArgs } from 'node:util';

import { validateId } from '@cairn-state/protocol/archive/identifiers';

import {
  checked,
  type Command,
  emptyOrAbsentFolder,
  existingFolder,
  EXIT_SUCCESS,
  UsageError,
} from './command.js';
import { mb, progressLine } from './progress.js';

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
    const session = checked('--session', values.session, validateId);
    if (values.checkpoint !== undefined) checked('--checkpoint', values.checkpoint, validateId);
    const concurrency = values.concurrency === undefined ? undefined : Number(values.concurrency);
    if (
      concurrency !== undefined &&
      (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 64)
    ) {
      throw new UsageError('--concurrency must be a whole number from 1 to 64');
    }
    const data = values.data === undefined ? undefined : jsonObject(values.data);
    if (action === 'publish') await existingFolder('<dir>', dir);
    else await emptyOrAbsentFolder('<dir>', dir);
    const archive = io.connect(concurrency === undefined ? {} : { concurrency }).sessions;
    const checkpointId = values.checkpoint === undefined ? {} : { checkpointId: values.checkpoint };
    const progress = progressLine(io.stderr);
    let report;
    try {
      report =
        action === 'restore'
          ? await archive.restoreCheckpoint(session, dir, {
              ...checkpointId,
              onProgress: (p) =>
                progress(
                  `restoring: file ${p.filesStarted}/${p.files}, ${mb(p.bytesStarted)} of ${mb(p.bytes)}`,
                ),
            })
          : await archive.publishCheckpoint(dir, session, {
              ...checkpointId,
              ...(data === undefined ? {} : { data }),
              onProgress: (p) =>
                progress(
                  `publishing: ${p.files} files, ${p.objectsUploaded} objects uploaded (${mb(p.bytesUploaded)})`,
                ),
            });
    } finally {
      // A failure's message must not land on a progress line it interrupted.
      progress.end();
    }
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
