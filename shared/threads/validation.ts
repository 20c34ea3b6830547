import { checkJsonDepth } from '../json';
import { InvalidArgumentError } from '../protocol/errors';
import {
  channelValueLimit,
  MAX_CHANNELS,
  MAX_CHECKPOINT_BYTES,
  MAX_LEASE_MS,
  MAX_METADATA_BYTES,
  MAX_VERSION_LENGTH,
  MAX_WRITES_PER_CALL,
  MIN_LEASE_MS,
} from '../protocol/threads';
import {
  channelRule,
  checkCheckpointId,
  checkNamespace,
  checkRunId,
  isPlainText,
  MAX_CHANNEL_LENGTH,
  MAX_TASK_ID_LENGTH,
  MAX_TASK_PATH_LENGTH,
} from './identifiers';
import type { ChannelVersion, TypedBytes } from './records';

/**
 * The limits of the thread store and the checks of its inputs that need no I/O: every one runs
 * before the first storage request, and names the field at fault.
 */

// The limits are the protocol's (shared/protocol/threads.ts), written once there.
export {
  DEFAULT_BUSY_TIMEOUT_MS,
  DEFAULT_LEASE_MS,
  MAX_BUSY_TIMEOUT_MS,
  MAX_CHANNELS,
  MAX_CHECKPOINT_BYTES,
  MAX_FILTER_KEYS,
  MAX_LEASE_MS,
  MAX_METADATA_BYTES,
  MAX_VERSION_LENGTH,
  MAX_WRITES_PER_CALL,
  MIN_LEASE_MS,
} from '../protocol/threads';

/** A checkpoint as the thread store takes it (the checks below refuse what it may not be). */
export interface CheckpointPut {
  readonly checkpointId: string;
  readonly ns: string;
  /** The checkpoint this one follows (any stored checkpoint of the namespace), or null for the first. */
  readonly parent: string | null;
  /** The run that sends it; without one, no live run may hold the thread. */
  readonly runId?: string;
  /** The client's checkpoint format version (LangGraph's `v`, 4 today). */
  readonly v: number;
  /** The serialised checkpoint without its channel values, opaque to Cairn. */
  readonly checkpoint: TypedBytes;
  /** JSON object, at most 16 KiB; its top-level keys can filter the history. */
  readonly metadata: Record<string, unknown>;
  /** Every channel of the checkpoint and its version. */
  readonly channelVersions: Readonly<Record<string, ChannelVersion>>;
  /**
   * The channels whose version is new in this checkpoint (LangGraph's `newVersions`): the value,
   * or null when the channel has none. Every other channel must have its parent's version, and
   * keeps the parent's value.
   */
  readonly values: Readonly<Record<string, TypedBytes | null>>;
}

export interface WritesPut {
  readonly ns: string;
  readonly checkpointId: string;
  readonly taskId: string;
  /** LangGraph's task path; orders writes ("" for writes without one). */
  readonly taskPath: string;
  readonly runId?: string;
  /** `idx` ≥ 0: a regular write (first stored wins); below 0: a special write (replaces). */
  readonly writes: readonly { readonly channel: string; readonly idx: number; readonly value: TypedBytes }[];
}

/** The rules of a put that need no I/O (the HTTP layer checks the JSON shape before). */
export function checkPut(put: CheckpointPut, maxValueBytes: number): void {
  checkCheckpointId(put.checkpointId);
  checkNamespace(put.ns);
  if (put.parent !== null) checkCheckpointId(put.parent, 'parent');
  if (put.runId !== undefined) checkRunId(put.runId);
  if (!Number.isSafeInteger(put.v) || put.v < 0) {
    throw new InvalidArgumentError('v', 'must be a whole number of at least 0');
  }
  checkTypeTag(put.checkpoint.type, 'checkpoint.type');
  if (put.checkpoint.data.length > MAX_CHECKPOINT_BYTES) {
    throw new InvalidArgumentError('checkpoint.data', `must be at most ${MAX_CHECKPOINT_BYTES} bytes`);
  }
  checkJsonDepth(put.metadata, 'metadata');
  if (Buffer.byteLength(JSON.stringify(put.metadata)) > MAX_METADATA_BYTES) {
    throw new InvalidArgumentError('metadata', `must be at most ${MAX_METADATA_BYTES} bytes of JSON`);
  }
  const channels = Object.entries(put.channelVersions);
  if (channels.length > MAX_CHANNELS) {
    throw new InvalidArgumentError('channelVersions', `must have at most ${MAX_CHANNELS} channels`);
  }
  for (const [channel, version] of channels) {
    checkChannel(channel, `channelVersions.${channel}`);
    const valid =
      typeof version === 'number'
        ? Number.isFinite(version)
        : typeof version === 'string' && version.length >= 1 && version.length <= MAX_VERSION_LENGTH;
    if (!valid) {
      throw new InvalidArgumentError(
        `channelVersions.${channel}`,
        `must be a finite number or a string of 1-${MAX_VERSION_LENGTH} characters`,
      );
    }
  }
  for (const [channel, value] of Object.entries(put.values)) {
    if (!Object.hasOwn(put.channelVersions, channel)) {
      throw new InvalidArgumentError(`values.${channel}`, 'names a channel that is not in channelVersions');
    }
    if (value === null) continue;
    checkTypeTag(value.type, `values.${channel}.type`);
    const limit = channelValueLimit(maxValueBytes, value.type);
    if (value.data.length > limit) {
      throw new InvalidArgumentError(`values.${channel}.data`, `must be at most ${limit} bytes`);
    }
  }
}

/** The rules of a pending-writes put that need no I/O. */
export function checkWrites(put: WritesPut): void {
  checkNamespace(put.ns);
  checkCheckpointId(put.checkpointId);
  if (put.runId !== undefined) checkRunId(put.runId);
  if (!isPlainText(put.taskId, MAX_TASK_ID_LENGTH, false)) {
    throw new InvalidArgumentError(
      'taskId',
      `must be 1-${MAX_TASK_ID_LENGTH} characters without control characters or Unicode noncharacters`,
    );
  }
  if (!isPlainText(put.taskPath, MAX_TASK_PATH_LENGTH, true)) {
    throw new InvalidArgumentError(
      'taskPath',
      `must be at most ${MAX_TASK_PATH_LENGTH} characters without control characters or Unicode noncharacters`,
    );
  }
  if (put.writes.length === 0 || put.writes.length > MAX_WRITES_PER_CALL) {
    throw new InvalidArgumentError('writes', `must hold 1-${MAX_WRITES_PER_CALL} writes`);
  }
  put.writes.forEach((write, index) => {
    checkChannel(write.channel, `writes.${index}.channel`);
    if (!Number.isSafeInteger(write.idx)) {
      throw new InvalidArgumentError(`writes.${index}.idx`, 'must be a whole number');
    }
    checkTypeTag(write.value.type, `writes.${index}.type`);
  });
}

export function checkLease(leaseMs: number): void {
  if (!(leaseMs >= MIN_LEASE_MS && leaseMs <= MAX_LEASE_MS)) {
    throw new InvalidArgumentError(
      'leaseSeconds',
      `must be from ${MIN_LEASE_MS / 1000} to ${MAX_LEASE_MS / 1000} seconds`,
    );
  }
}

function checkChannel(channel: string, field: string): void {
  if (!isPlainText(channel, MAX_CHANNEL_LENGTH, false) || channel === '__proto__') {
    throw new InvalidArgumentError(field, `${channelRule}, not "__proto__"`);
  }
}

const TYPE_TAG = /^[\x21-\x7e]{1,64}$/;

function checkTypeTag(type: string, field: string): void {
  if (!TYPE_TAG.test(type)) {
    throw new InvalidArgumentError(field, 'must be 1-64 printable ASCII characters without spaces');
  }
}
