import { parseArgs } from 'node:util';

import { type Command, EXIT_FAILURE, EXIT_SUCCESS } from './command.js';

/**
 * `cairn rewrap`: starts the rewrap job (admin), shows its progress on stderr and prints the report
 * on stdout. Exit 1 when the job failed, or when values are left sealed with a key other than the
 * first (the report's `remaining`) or could not be re-sealed: that key must not be removed yet.
 */
export const rewrapCommand: Command = {
  usage: '  cairn rewrap',

  async run(args, io) {
    parseArgs({ args, options: {}, strict: true });
    const encryption = io.connect().encryption;
    const { id } = await encryption.startRewrap();
    io.stderr.write(`rewrap ${id} started\n`);
    let last = '';
    const status = await encryption.waitRewrap(id, {
      onProgress: ({ progress }) => {
        const line = `tenants ${progress.tenants}, values ${progress.examined}, re-sealed ${progress.resealed}`;
        if (line !== last) io.stderr.write(`${line}\n`);
        last = line;
      },
    });
    if (status.status === 'failed' || status.report === null) {
      io.stderr.write(`rewrap ${status.id} failed: ${status.error ?? 'unknown error'}\n`);
      return EXIT_FAILURE;
    }
    io.stdout.write(JSON.stringify(status.report, null, 2) + '\n');
    const left = Object.values(status.report.remaining).some((count) => count > 0);
    return left || status.report.errors.length > 0 ? EXIT_FAILURE : EXIT_SUCCESS;
  },
};
