import { CairnClient } from '@cairn-state/client';

import { auditCommand } from './auditCommand.js';
import { checkpointCommand } from './checkpointCommand.js';
import {
  asksForHelp,
  type Command,
  type CommandIo,
  EXIT_FAILURE,
  EXIT_SUCCESS,
  EXIT_USAGE,
  isUsageError,
  UsageError,
} from './command.js';
import { keygenCommand } from './keygenCommand.js';
import { migrateCommand } from './migrateCommand.js';
import { personaCommand } from './personaCommand.js';
import { rewrapCommand } from './rewrapCommand.js';
import { snapshotCommand } from './snapshotCommand.js';
import { verifyCommand } from './verifyCommand.js';

/**
 * The `cairn` command: tools that call a Cairn service over HTTP (and `keygen`, which makes a
 * snapshot signing key pair and calls nothing). This is the one place that reads
 * the service's URL and the credential from the environment, and the one place that turns an
 * outcome into an exit code.
 */

const COMMANDS: Readonly<Record<string, Command>> = {
  audit: auditCommand,
  checkpoint: checkpointCommand,
  keygen: keygenCommand,
  migrate: migrateCommand,
  persona: personaCommand,
  rewrap: rewrapCommand,
  snapshot: snapshotCommand,
  verify: verifyCommand,
};

export const USAGE = `usage:
${Object.values(COMMANDS)
  .map((command) => command.usage)
  .join('\n')}
  cairn help

environment:
  CAIRN_URL  the service's base URL, e.g. http://127.0.0.1:7071 (with or without /api)
  CAIRN_KEY  an API key or an Entra ID access token

exit codes:
  0  success
  1  failure, or problems found (a report with errors; for migrate: the migration failed or its report has errors;
     for snapshot verify: the snapshot is damaged; for rewrap: values remain sealed with a key other than the first;
     for audit verify: the trail or a signed head does not verify, or no head is signed by the key;
     for verify: a finding, an orphan prune would delete, or a broken audit chain)
  2  usage error, nothing sent: a bad or missing argument or setting, or a local file or folder named
     on the command line that cannot be used (missing, not a key, exists where one is created,
     not empty where one is filled)`;

interface Streams {
  readonly stdout: CommandIo['stdout'];
  readonly stderr: CommandIo['stderr'];
}

/** Runs `cairn <argv...>`; resolves with the exit code. */
export async function runCairn(argv: string[], env: NodeJS.ProcessEnv, streams: Streams): Promise<number> {
  const [name, ...args] = argv;
  if (name === 'help' || name === '--help' || name === '-h') {
    streams.stdout.write(`${USAGE}\n`);
    return EXIT_SUCCESS;
  }
  const command = name === undefined ? undefined : COMMANDS[name];
  if (command === undefined) {
    streams.stderr.write(`cairn: ${name === undefined ? 'no command given' : `unknown command "${name}"`}\n`);
    streams.stderr.write(`${USAGE}\n`);
    return EXIT_USAGE;
  }
  if (asksForHelp(args)) {
    streams.stdout.write(`usage:\n${command.usage}\n(cairn help: settings and exit codes)\n`);
    return EXIT_SUCCESS;
  }
  try {
    return await command.run(args, { ...streams, connect: (options) => connect(env, options) });
  } catch (error) {
    streams.stderr.write(`cairn ${name}: ${error instanceof Error ? error.message : String(error)}\n`);
    if (!isUsageError(error)) return EXIT_FAILURE;
    streams.stderr.write(`${command.usage}\n(cairn help: settings and exit codes)\n`);
    return EXIT_USAGE;
  }
}

function connect(env: NodeJS.ProcessEnv, options: Parameters<CommandIo['connect']>[0] = {}): CairnClient {
  const url = env['CAIRN_URL'];
  const token = env['CAIRN_KEY'];
  if (!url) throw new UsageError('set CAIRN_URL to the service URL (e.g. http://127.0.0.1:7071)');
  if (!token) throw new UsageError('set CAIRN_KEY to an API key or access token');
  try {
    return new CairnClient({ ...options, url, token });
  } catch {
    throw new UsageError(`CAIRN_URL is not a URL: ${url}`);
  }
}
