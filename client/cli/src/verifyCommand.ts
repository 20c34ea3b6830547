import { parseArgs } from 'node:util';

import type { TenantVerifyReport } from '@cairn-state/client';

import { type Command, EXIT_FAILURE, EXIT_SUCCESS } from './command.js';
import { checkTenant } from './migrateCommand.js';

/**
 * `cairn verify`: checks what the service keeps (admin), for one tenant or every tenant of the
 * directory, one tenant per request so that a progress line can follow on a terminal (stderr).
 * Prints a summary and each finding (or the whole report as JSON with `--json`) on stdout. Exit 0
 * when everything is clean, 1 when anything was found (a finding, an orphan prune would delete, a
 * broken audit chain) or the check failed, 2 for a usage error.
 */
export const verifyCommand: Command = {
  usage: '  cairn verify [--tenant <t>] [--read-data] [--json]',

  async run(args, io) {
    const { values } = parseArgs({
      args,
      options: {
        tenant: { type: 'string' },
        'read-data': { type: 'boolean', default: false },
        json: { type: 'boolean', default: false },
      },
      strict: true,
      allowPositionals: false,
    });
    if (values.tenant !== undefined) checkTenant(values.tenant);
    const retention = io.connect().retention;
    const known = (await retention.tenants()).map((entry) => entry.tenant);
    const tenants = values.tenant === undefined ? known : [values.tenant];
    const tty = io.stderr.isTTY === true;
    const reports: TenantVerifyReport[] = [];
    for (const [index, tenant] of tenants.entries()) {
      if (tty) io.stderr.write(`\r\u001b[2Kverifying ${index + 1}/${tenants.length}: ${tenant}`);
      const report = await retention.verify({ tenant, readData: values['read-data'] });
      reports.push(...report.tenants);
    }
    if (tty && tenants.length > 0) io.stderr.write('\r\u001b[2K');
    const named = values.tenant;
    if (named !== undefined && !known.includes(named) && reports.every(holdsNothing)) {
      // A named tenant that the directory does not list and that stores nothing is most likely a
      // mistyped name: it must not pass for a clean tenant.
      const message = `no such tenant has data: ${named} (the service's tenant directory does not list it and nothing is stored under it)`;
      if (values.json) {
        io.stdout.write(
          JSON.stringify({ ok: false, tenants: reports, unknownTenant: named, message }, null, 2) + '\n',
        );
      } else {
        io.stdout.write(`${message}\n`);
      }
      return EXIT_FAILURE;
    }
    const ok = reports.every((report) => report.ok);
    if (values.json) {
      io.stdout.write(JSON.stringify({ ok, tenants: reports }, null, 2) + '\n');
    } else {
      for (const report of reports) io.stdout.write(summary(report));
      io.stdout.write(
        `${ok ? 'clean' : 'problems found'}: ${reports.length} tenant${reports.length === 1 ? '' : 's'} verified\n`,
      );
    }
    return ok ? EXIT_SUCCESS : EXIT_FAILURE;
  },
};

function holdsNothing(report: TenantVerifyReport): boolean {
  return (
    Object.values(report.checked).every((count) => count === 0) &&
    report.findingCount === 0 &&
    report.orphanCount === 0
  );
}

function summary(report: TenantVerifyReport): string {
  const checked = Object.entries(report.checked)
    .filter(([, count]) => count > 0)
    .map(([name, count]) => `${count} ${name}`)
    .join(', ');
  const lines = [
    `${report.tenant}: ${report.ok ? 'ok' : 'PROBLEMS'} (${report.findingCount} findings, ${report.orphanCount} orphans of which ${report.collectableOrphans} collectable)`,
    `  checked: ${checked || 'nothing stored'}`,
    `  content: ${report.sampling}`,
    `  audit: ${report.audit.status === 'not_checked' ? `not checked (${report.audit.reason ?? ''})` : report.audit.status}`,
    ...report.findings.map(
      (finding) => `  ${finding.kind} ${finding.key} (${finding.where}): ${finding.detail}`,
    ),
    ...report.orphans.map(
      (orphan) =>
        `  orphan ${orphan.domain} ${orphan.key}, ${orphan.size} bytes, stored ${orphan.storedAt}${orphan.collectable ? '' : ' (younger than the grace)'}`,
    ),
  ];
  return lines.join('\n') + '\n';
}
