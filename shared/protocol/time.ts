import { z } from 'zod';

/**
 * RFC 3339 date-times as the routes take them: UTC is what Cairn writes
 * (`2026-11-29T21:16:51.123Z`); a time with an offset or more than millisecond precision is
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

/** True for `YYYY-MM-DD` naming a real calendar day. */
export function isUtcDay(value: string): boolean {
  return /^\d{4}-\d{2}-\d{2}$/.test(value) && isRfc3339(`${value}T00:00:00Z`);
}

export const RFC_3339_RULE = 'must be an RFC 3339 timestamp (e.g. 2026-11-29T21:16:51.123Z)';

/** An RFC 3339 date-time in a request, checked; no component (the MCP tools list it inline). */
export const rfc3339 = z.string({ error: 'must be an RFC 3339 timestamp' }).refine(isRfc3339, RFC_3339_RULE);

/** The same, as the document's `#/components/schemas/Timestamp`. */
export const RequestTimestamp = rfc3339.meta({
  id: 'Timestamp',
  format: 'date-time',
  description: 'RFC 3339 date-time; Cairn writes UTC with milliseconds, e.g. 2026-11-29T21:16:51.123Z.',
});

export const UtcDay = z
  .string({ error: 'must be a UTC day, YYYY-MM-DD' })
  .refine(isUtcDay, 'must be a UTC day, YYYY-MM-DD')
  .meta({ format: 'date', pattern: String.raw`^\d{4}-\d{2}-\d{2}$` });
