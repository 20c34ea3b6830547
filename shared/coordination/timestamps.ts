/**
 * RFC 3339 timestamps as the coordination state stores them (UTC, `2026-11-29T21:16:51.123Z`).
 * Stored values written by others may carry an offset or more than millisecond precision; they are
 * accepted and compared exactly, never rounded.
 */

import { isRfc3339, isUtcDay, parseRfc3339 } from '../protocol/time';

export { isRfc3339, isUtcDay, parseRfc3339 };

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
