import { createHash } from 'node:crypto';

import { InvalidArgumentError } from '../protocol/errors';
/**
 * Names and ids of the thread store, their rules, and how they become key segments. Every rule is
 * checked before any I/O; every user-provided string that may hold characters a key cannot is
 * encoded, so that key validation always passes and the stored keys sort as the store needs.
 */
import { isName, NAME_RULE } from '../protocol/fields';
import { isPlainText, MAX_NAMESPACE_LENGTH, namespaceRule, ThreadCheckpointId } from '../protocol/threads';

// Thread names, checkpoint ids and run ids: the session-id alphabet, rules of the protocol, as
// are the lengths and characters of namespaces, channels and task ids.
export { isName, NAME_RULE } from '../protocol/fields';
export {
  channelRule,
  isCheckpointId,
  isPlainText,
  MAX_CHANNEL_LENGTH,
  MAX_NAMESPACE_LENGTH,
  MAX_TASK_ID_LENGTH,
  MAX_TASK_PATH_LENGTH,
  namespaceRule,
} from '../protocol/threads';

/** Throws InvalidArgumentError (naming `field`) unless `value` is a thread name. */
export function checkThreadId(value: string, field = 'threadId'): void {
  if (!isName(value)) throw new InvalidArgumentError(field, NAME_RULE);
}

/**
 * Checkpoint ids: the protocol's one rule (the name alphabet, and not `latest`, which the HTTP API
 * reads as "the head"). LangGraph's ids (uuid6) fit.
 */
export function checkCheckpointId(value: string, field = 'checkpointId'): void {
  const parsed = ThreadCheckpointId.safeParse(value);
  if (!parsed.success) {
    throw new InvalidArgumentError(field, parsed.error.issues[0]?.message ?? NAME_RULE);
  }
}

export function checkRunId(value: string, field = 'runId'): void {
  if (!isName(value)) throw new InvalidArgumentError(field, NAME_RULE);
}

export function checkNamespace(value: string, field = 'ns'): void {
  if (!isPlainText(value, MAX_NAMESPACE_LENGTH, true)) throw new InvalidArgumentError(field, namespaceRule);
}

/**
 * The alphabet of names in ascending code order. {@link invertedId} maps it onto itself reversed.
 */
const ALPHABET = '-.0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz';
const INVERTED = new Map([...ALPHABET].map((char, index) => [char, ALPHABET[ALPHABET.length - 1 - index]]));
/** Sorts after every character of the alphabet: a shorter id (a prefix) comes after its extensions. */
const INVERTED_END = '~';

/**
 * An order-inverting encoding of a checkpoint id: ascending order of the encodings is descending
 * order of the ids (by code unit, which for this alphabet is byte order and JavaScript's `<`), also
 * when one id is a prefix of another (`a` < `ab`, so `ab` must come first: `~` ends every encoding
 * and sorts after every mapped character). Never `.` or `..`, never empty.
 */
export function invertedId(checkpointId: string): string {
  let out = '';
  for (const char of checkpointId) {
    const mapped = INVERTED.get(char);
    if (mapped === undefined) throw new InvalidArgumentError('checkpointId', NAME_RULE);
    out += mapped;
  }
  return out + INVERTED_END;
}

/** The checkpoint id of an {@link invertedId}, or null when `segment` is not one. */
export function idOfInverted(segment: string): string | null {
  if (!segment.endsWith(INVERTED_END)) return null;
  let out = '';
  for (const char of segment.slice(0, -1)) {
    const mapped = INVERTED.get(char);
    if (mapped === undefined) return null;
    out += mapped;
  }
  return out;
}

/** Longer encodings are replaced by a hash, to stay within a path segment's 255 bytes. */
const MAX_ENCODED_SEGMENT = 200;

function segmentOf(tag: string, text: string): string {
  const encoded = tag + Buffer.from(text, 'utf8').toString('base64url');
  if (encoded.length <= MAX_ENCODED_SEGMENT) return encoded;
  return 'h' + createHash('sha256').update(`${tag}\n${text}`, 'utf8').digest('hex');
}

/**
 * A namespace as one key segment: `n` + base64url of its UTF-8 (so the root, "", is `n`), or `h` +
 * SHA-256 hex when that is longer than 200 characters. Deterministic, so equality of namespaces is
 * equality of segments; the record keeps the namespace itself.
 */
export function namespaceSegment(ns: string): string {
  return segmentOf('n', ns);
}

/** A channel name as one key segment, as {@link namespaceSegment} does (`c` + base64url). */
export function channelSegment(channel: string): string {
  return segmentOf('c', channel);
}
