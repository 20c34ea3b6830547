import type { CairnClient, CairnClientOptions } from '../cairnClient';

/**
 * What every `cairn` command shares: its input and output, the one way it reaches the service, and
 * the one exit-code rule (0 success; 1 failure or problems found; 2 usage error).
 */

export const EXIT_SUCCESS = 0;
/** The command failed, or it ran and found problems (a report with errors). */
export const EXIT_FAILURE = 1;
/** Bad or missing arguments or settings: nothing was attempted. */
export const EXIT_USAGE = 2;

/** A bad or missing argument or setting: the command prints its usage and exits 2. */
export class UsageError extends Error {}

export interface CommandIo {
  readonly stdout: NodeJS.WritableStream & { isTTY?: boolean };
  readonly stderr: NodeJS.WritableStream & { isTTY?: boolean; columns?: number };
  /** A client of the service named by CAIRN_URL with the credential CAIRN_KEY; UsageError without them. */
  connect(options?: Partial<Omit<CairnClientOptions, 'url' | 'token'>>): CairnClient;
}

export interface Command {
  /** One line per form of the command, each starting with `cairn <name>`. */
  readonly usage: string;
  /** Runs the arguments after the command's name; resolves with EXIT_SUCCESS or EXIT_FAILURE. */
  run(args: string[], io: CommandIo): Promise<number>;
}

/** Whether `error` is a usage error: ours, or node's parseArgs refusing an option. */
export function isUsageError(error: unknown): boolean {
  return (
    error instanceof UsageError ||
    String((error as { code?: unknown } | null)?.code).startsWith('ERR_PARSE_ARGS')
  );
}
