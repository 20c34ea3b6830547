#!/usr/bin/env node
/**
 * The `cairn` command: tools that call a Cairn service over HTTP (CAIRN_URL, CAIRN_KEY).
 *   cairn migrate --tenant <t> --from <dir>[:<prefix>] ... [--dry-run]
 *   cairn persona push|pull --dir <folder> [--prefix claude_memory]
 *   cairn checkpoint publish <dir> --session <id> | restore --session <id> <dir>   (shared/client/cli.ts)
 *   cairn snapshot save|load|verify|list|delete ...   cairn keygen <name>   (docs/snapshots.md)
 */
import { runCheckpointCommand } from './checkpointCommand';
import { runKeygenCommand } from './keygenCommand';
import { runMigrateCommand } from './migrateCommand';
import { runPersonaCommand } from './personaCommand';
import { runSnapshotCommand } from './snapshotCommand';

const COMMANDS: Record<string, typeof runMigrateCommand> = {
  checkpoint: runCheckpointCommand,
  keygen: runKeygenCommand,
  migrate: runMigrateCommand,
  persona: runPersonaCommand,
  snapshot: runSnapshotCommand,
};

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  const command = name === undefined ? undefined : COMMANDS[name];
  if (command === undefined) {
    process.stderr.write(`usage: cairn <${Object.keys(COMMANDS).join('|')}> ...\n`);
    return 1;
  }
  return command(rest, { env: process.env, stdout: process.stdout, stderr: process.stderr });
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`cairn: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  },
);
