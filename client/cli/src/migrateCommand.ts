import { parseArgs } from 'node:util';

import type { MigrationReport, MigrationStatus } from '@cairn-state/client';
import { validateKey } from '@cairn-state/protocol/keys';
import { isValidTenantId } from '@cairn-state/protocol/tenants/tenantIds';

import { checked, type Command, EXIT_FAILURE, EXIT_SUCCESS, UsageError } from './command.js';

/**
 * `cairn migrate`: starts a migration of folders on the service's host into a tenant's key/value
 * space, shows its progress on stderr (a bar on a terminal, plain lines otherwise) and prints the
 * report on stdout. Exit 1 when the migration failed or its report has errors.
 */
export const migrateCommand: Command = {
  usage: '  cairn migrate --tenant <t> --from <dir>[:<prefix>] [--from ...] [--dry-run]',

  async run(args, io) {
    const { values } = parseArgs({
      args,
      options: {
        tenant: { type: 'string' },
        from: { type: 'string', multiple: true },
        'dry-run': { type: 'boolean', default: false },
      },
      strict: true,
    });
    if (values.tenant === undefined) throw new UsageError('--tenant <t> is required');
    if (values.from === undefined || values.from.length === 0) {
      throw new UsageError('--from <dir>[:<prefix>] is required (once per folder)');
    }
    checkTenant(values.tenant);
    const sources = values.from.map(parseSource);
    for (const source of sources) {
      if (source.root === '') throw new UsageError('--from: the folder must not be empty');
      if (source.prefix !== '')
        checked('--from', source.prefix, (prefix) => validateKey(prefix, '--from <prefix>'));
    }
    const migrations = io.connect().migrations;
    const dryRun = values['dry-run'];
    const { id } = await migrations.start({
      tenant: values.tenant,
      sources,
      dryRun,
    });
    io.stderr.write(`migration ${id} started\n`);
    const tty = io.stderr.isTTY === true;
    let last = '';
    const status = await migrations.wait(id, {
      onProgress: ({ progress }) => {
        const width = Math.max(10, Math.min(50, (io.stderr.columns ?? 80) - 30));
        const line = tty
          ? bar(progress.done, progress.total, width)
          : `progress ${progress.done}/${progress.total}`;
        if (line === last) return;
        io.stderr.write(tty ? `\r${line}` : `${line}\n`);
        last = line;
      },
    });
    if (tty) io.stderr.write('\n');
    return finish(status, dryRun, io);
  },
};

/** The tenant rule of the service (a usage error naming the option, before any request). */
export function checkTenant(tenant: string): void {
  if (!isValidTenantId(tenant)) {
    throw new UsageError('--tenant: must be 1-64 characters of [A-Za-z0-9._-], not "." or ".."');
  }
}

/** A dry run copied nothing: its counts are named as what it would do. */
function dryRunReport(report: MigrationReport) {
  return {
    wouldCopy: report.copied,
    skipped: report.skipped,
    bytesWouldCopy: report.bytesCopied,
    keysWouldCopy: report.keysCopied,
    errors: report.errors,
  };
}

function finish(status: MigrationStatus, dryRun: boolean, io: Parameters<Command['run']>[1]): number {
  if (status.status === 'failed' || status.report === null) {
    io.stderr.write(`migration ${status.id} failed: ${status.error ?? 'unknown error'}\n`);
    return EXIT_FAILURE;
  }
  const report = dryRun ? dryRunReport(status.report) : status.report;
  io.stdout.write(JSON.stringify(report, null, 2) + '\n');
  return status.report.errors.length > 0 ? EXIT_FAILURE : EXIT_SUCCESS;
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
