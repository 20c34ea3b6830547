import { randomBytes, timingSafeEqual } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import type http from 'node:http';
import path from 'node:path';

/**
 * Who may call the local runtime's own endpoints, as the Functions host decides it for its own:
 * the durable webhooks (`/runtime/webhooks/durabletask/...`) and `POST /admin/functions/<name>`
 * need the host's master key, in the `x-functions-key` header or the `code` query parameter; and
 * only requests whose `Host` names a loopback address are served at all (a page in a browser whose
 * name resolves to 127.0.0.1 cannot reach the runtime under its own name).
 */

/** The master key's file in the development state folder (`.cairn/`). */
export const HOST_KEY_FILE = 'host-key';

/**
 * The development host's master key, kept in `<stateDir>/host-key` (mode 600): read when it is
 * there, else made. Two processes starting at once both end up with the one key written first.
 */
export function loadOrCreateHostKey(stateDir: string): { key: string; created: boolean } {
  const file = path.join(stateDir, HOST_KEY_FILE);
  const existing = readKey(file);
  if (existing !== undefined) return { key: existing, created: false };
  mkdirSync(stateDir, { recursive: true });
  const key = `cairn_host_${randomBytes(32).toString('base64url')}`;
  try {
    writeFileSync(file, key + '\n', { mode: 0o600, flag: 'wx' });
    return { key, created: true };
  } catch (error) {
    const raced = (error as NodeJS.ErrnoException).code === 'EEXIST' ? readKey(file) : undefined;
    if (raced === undefined) throw error;
    return { key: raced, created: false };
  }
}

function readKey(file: string): string | undefined {
  try {
    const key = readFileSync(file, 'utf8').trim();
    return key === '' ? undefined : key;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

/** True when the request carries `hostKey` (header `x-functions-key`, else query `code`). */
export function hasHostKey(req: http.IncomingMessage, hostKey: string): boolean {
  const header = req.headers['x-functions-key'];
  const offered =
    typeof header === 'string'
      ? header
      : new URL(req.url ?? '/', 'http://localhost').searchParams.get('code');
  if (offered === null || offered === '') return false;
  const a = Buffer.from(offered);
  const b = Buffer.from(hostKey);
  return a.length === b.length && timingSafeEqual(a, b);
}

const LOOPBACK_NAMES = new Set(['localhost', '127.0.0.1', '[::1]']);

/**
 * True when the `Host` header names a loopback address (or `listenHost`, the address the runtime
 * listens on), with any port. A request without `Host` (HTTP/1.0) is not served either.
 */
export function isServedHost(req: http.IncomingMessage, listenHost: string): boolean {
  const host = req.headers.host;
  if (host === undefined) return false;
  const name = /^(\[[^\]]*\]|[^:]*)(?::\d{1,5})?$/.exec(host.trim().toLowerCase())?.[1];
  if (name === undefined) return false;
  return LOOPBACK_NAMES.has(name) || name.endsWith('.localhost') || name === listenHost.toLowerCase();
}
