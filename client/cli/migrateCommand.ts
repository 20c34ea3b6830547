import { parseArgs } from 'node:util';

import type { MigrationReport } from '../../shared/migration/migration';
import { apiSettingsFrom, callApi, expectStatus } from './apiClient';

/**
 * `cairn migrate --tenant <t> --from <dir>[:<prefix>] ... [--dry-run]`: starts a migration through
 * the HTTP API, shows progress (a bar on a terminal, plain lines otherwise), prints the report and
 * exits 0 when every file is accounted for, 2 when the report has errors, 1 when the migration
 * failed or could not run.
 */

export interface CommandIo {
  readonly env: NodeJS.ProcessEnv;
  readonly stdout: NodeJS.WritableStream & { isTTY?: boolean };
  readonly stderr: NodeJS.WritableStream & { isTTY?: boolean; columns?: number };
  readonly sleep?: (ms: number) => Promise<void>;
}

interface Status {
  status: 'pending' | 'running' | 'completed' | 'failed';
  progress: { total: number; done: number };
  report: MigrationReport | null;
  error?: string;
}

/** `dir:prefix`, where a Windows drive letter (`C:\\x`) is part of the folder. */
export function parseSource(value: string): { root: string; prefix: string } {
  const colon = value.lastIndexOf(':');
  if (colon <= 1) return { root: value, prefix: '' };
  return { root: value.slice(0, colon), prefix: value.slice(colon + 1) };
}

function bar(done: number, total: number, width: number): string {
  const share = total === 0 ? 1 : done / total;
  const filled = Math.round(share * width);
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total}`;
}

export async function runMigrateCommand(args: string[], io: CommandIo): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      tenant: { type: 'string' },
      from: { type: 'string', multiple: true },
      'dry-run': { type: 'boolean', default: false },
    },
    strict: true,
  });
  if (values.tenant === undefined || values.from === undefined || values.from.length === 0) {
    io.stderr.write('usage: cairn migrate --tenant <t> --from <dir>[:<prefix>] [--from ...] [--dry-run]\n');
    return 1;
  }
  const settings = apiSettingsFrom(io.env);
  const sleep = io.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const started = await expectStatus(
    await callApi(settings, '/api/migrations', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        tenant: values.tenant,
        sources: values.from.map(parseSource),
        dryRun: values['dry-run'],
      }),
    }),
    202,
  );
  const { id } = (await started.json()) as { id: string };
  const tty = io.stderr.isTTY === true;
  io.stderr.write(`migration ${id} started\n`);
  let last = '';
  for (;;) {
    const status = (await (
      await expectStatus(await callApi(settings, `/api/migrations/${id}`), 200)
    ).json()) as Status;
    const line = tty
      ? bar(
          status.progress.done,
          status.progress.total,
          Math.max(10, Math.min(50, (io.stderr.columns ?? 80) - 30)),
        )
      : `progress ${status.progress.done}/${status.progress.total}`;
    if (line !== last) {
      io.stderr.write(tty ? `\r${line}` : `${line}\n`);
      last = line;
    }
    if (status.status === 'failed') {
      io.stderr.write(`${tty ? '\n' : ''}migration ${id} failed: ${status.error ?? 'unknown error'}\n`);
      return 1;
    }
    if (status.status === 'completed' && status.report !== null) {
      if (tty) io.stderr.write('\n');
      io.stdout.write(JSON.stringify(status.report, null, 2) + '\n');
      return status.report.errors.length > 0 ? 2 : 0;
    }
    await sleep(500);
  }
}
