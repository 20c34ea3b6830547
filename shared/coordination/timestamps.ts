/**
 * RFC 3339 timestamps as the coordination state stores them (UTC, `2026-11-29T21:16:51.123Z`).
 * Stored values written by others may carry an offset or more than millisecond precision; they are
 * accepted and compared exactly, never rounded.
 */

const RFC_3339 =
  /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:[Zz]|([+-])(\d{2}):(\d{2}))$/;

/** Nanoseconds since the epoch, or null when `value` is not an RFC 3339 date-time with a zone. */
export function parseRfc3339(value: string): bigint | null {
  const match = RFC_3339.exec(value);
  if (match === null) return null;
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  if (month < 1 || month > 12 || hour > 23 || minute > 59 || second > 59) return null;
  const epochMs = Date.UTC(year, month - 1, day, hour, minute, second);
  // Date.UTC rolls 02-30 over to 03-02: a day that does not exist in its month is refused.
  if (new Date(epochMs).getUTCDate() !== day) return null;
  let offsetMinutes = 0;
  if (match[8] !== undefined) {
    const offsetHours = Number(match[9]);
    const offsetMins = Number(match[10]);
    if (offsetHours > 23 || offsetMins > 59) return null;
    offsetMinutes = (match[8] === '-' ? -1 : 1) * (offsetHours * 60 + offsetMins);
  }
  const fractionNs = BigInt((match[7] ?? '').padEnd(9, '0'));
  return (BigInt(epochMs) - BigInt(offsetMinutes) * 60_000n) * 1_000_000n + fractionNs;
}

export function isRfc3339(value: string): boolean {
  return parseRfc3339(value) !== null;
}

/** Milliseconds since the epoch (fractions below a millisecond dropped); null when not RFC 3339. */
export function rfc3339Millis(value: string): number | null {
  const ns = parseRfc3339(value);
  return ns === null ? null : Number(ns / 1_000_000n);
}

/**
 * Orders two timestamps by the instant they name (so `…15Z` < `…15.261Z`, and offsets count).
 * When either does not parse, falls back to plain string order (values written by older agents).
 */
export function compareTimestamps(a: string, b: string): number {
  const left = parseRfc3339(a);
  const right = parseRfc3339(b);
  if (left === null || right === null) return a < b ? -1 : a > b ? 1 : 0;
  return left < right ? -1 : left > right ? 1 : 0;
}

/** The later of two optional timestamps (null ignored); `a` when they name the same instant. */
export function laterTimestamp(a: string | null, b: string | null): string | null {
  if (a === null) return b;
  if (b === null) return a;
  return compareTimestamps(b, a) > 0 ? b : a;
}

/** `date` as Cairn writes times: UTC, milliseconds, `Z`. */
export function formatTimestamp(date: Date): string {
  return date.toISOString();
}

/** The UTC day of `date`, `YYYY-MM-DD`. */
export function utcDay(date: Date): string {
  return date.toISOString().slice(0, 10);
}

/** True for `YYYY-MM-DD` naming a real calendar day. */
export function isUtcDay(value: string): boolean {
  return /^\d{4}-\d{2}-\d{2}$/.test(value) && isRfc3339(`${value}T00:00:00Z`);
}
