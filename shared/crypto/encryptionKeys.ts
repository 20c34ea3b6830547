import { ConfigurationError } from '../protocol/errors';

/**
 * The application encryption keys (`CAIRN_ENCRYPTION_KEYS`): comma-separated `<id>:<64 hex>`
 * entries, each a 32-byte AES-256 key with an id of 1-32 characters of `[A-Za-z0-9._-]`. The first
 * entry seals every new value; every entry opens the values sealed with it. Unreadable text stops
 * the app at start-up, naming the setting and the entry (never the key material).
 */

export interface EncryptionKey {
  /** Stored with every sealed value, so that it can be opened by the right key after a rotation. */
  readonly id: string;
  /** 32 bytes. Never logged, never returned. */
  readonly key: Buffer;
}

export const KEY_ID_PATTERN = /^[A-Za-z0-9._-]{1,32}$/;
const KEY_HEX = /^[0-9a-fA-F]{64}$/;
const SETTING = 'CAIRN_ENCRYPTION_KEYS';

/** The keys of `value` in order (first seals); `[]` for a blank value (encryption off). */
export function parseEncryptionKeys(value: string | undefined): EncryptionKey[] {
  if (value === undefined || value.trim() === '') return [];
  const keys: EncryptionKey[] = [];
  const entries = value.split(',').map((entry) => entry.trim());
  for (const [index, entry] of entries.entries()) {
    const where = `entry ${index + 1}`;
    if (entry === '') throw new ConfigurationError(SETTING, `${where} is empty (expected <id>:<64 hex>)`);
    const colon = entry.indexOf(':');
    const id = colon < 0 ? entry : entry.slice(0, colon);
    const hex = colon < 0 ? '' : entry.slice(colon + 1);
    if (colon < 0 || !KEY_HEX.test(hex)) {
      throw new ConfigurationError(SETTING, `${where}: expected <id>:<64 hex digits> (a 32-byte key)`);
    }
    if (!KEY_ID_PATTERN.test(id)) {
      throw new ConfigurationError(SETTING, `${where}: the key id must be 1-32 characters of [A-Za-z0-9._-]`);
    }
    if (keys.some((key) => key.id === id)) {
      throw new ConfigurationError(SETTING, `${where}: the key id ${id} is listed twice`);
    }
    const key = Buffer.from(hex, 'hex');
    if (keys.some((other) => other.key.equals(key))) {
      throw new ConfigurationError(SETTING, `${where}: the same key is listed under two ids`);
    }
    keys.push({ id, key });
  }
  return keys;
}
