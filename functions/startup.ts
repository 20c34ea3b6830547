import { processLogger } from '#shared/logging';
import { getServices } from '#shared/services';

/**
 * What the app checks at start-up against its storage, as the app-start hook (the Functions host
 * runs it when the worker starts; the local runtime before it listens, and refuses to start when it
 * throws): the encryption key check (docs/encryption.md), whose refusal names CAIRN_ENCRYPTION_KEYS.
 * Should a host serve requests anyway, every authenticated route runs the same check first and
 * fails closed. Also says once, in the log, what the audit trail will not do.
 */
export async function startupChecks(): Promise<void> {
  const services = getServices();
  const log = processLogger(services.config.logLevel).child({ component: 'startup' });
  await services.encryption.check();
  const { audit } = services.config;
  if (audit.enabled && audit.signingKey === undefined) {
    log.info('CAIRN_AUDIT_SIGNING_KEY is not set: audit heads are not signed');
  }
  log.info(
    {
      encryption: services.encryption.enabled ? 'on' : 'off',
      audit: audit.enabled ? 'on' : 'off',
      heapGrowingPercent: services.config.heapGrowingPercent,
    },
    'start-up checks passed',
  );
}
