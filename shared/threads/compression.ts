import { deflateRawSync, inflateRawSync } from 'node:zlib';

import { IntegrityError } from '../protocol/errors';

/**
 * Compression of what the thread store writes (docs/threads.md, "Storage layout and cost"):
 * checkpoint records and lines of pending writes are deflated (raw DEFLATE, node:zlib) before they
 * are stored, and sealed after, when values are sealed. Each is a few hundred bytes to a few KiB,
 * too small for DEFLATE to find much in itself, so it starts from a preset dictionary: text that
 * such objects commonly hold (the field names of the store's own JSON, and the skeleton LangChain
 * and LangGraph serialise messages, checkpoints and tasks with). The dictionary only changes how
 * small the bytes get, never what they mean: any bytes compress and read back exactly.
 *
 * The dictionary is part of the stored format: {@link DICTIONARY_1} must never change. Stored
 * bytes start with a marker byte naming the format (see records.ts and pendingWrites.ts); another
 * dictionary would need a marker of its own, and readers keep reading the older ones.
 */

export const DICTIONARY_1 = Buffer.from(
  [
    '{"lc":1,"type":"constructor","id":["langchain_core","messages","ToolMessage"],"kwargs":{"content":"","tool_call_id":"","name":"","status":"success","artifact":null}}',
    '{"lc":1,"type":"constructor","id":["langchain_core","messages","SystemMessage"]}',
    '{"lc":1,"type":"constructor","id":["langchain_core","messages","HumanMessage"],"kwargs":{"content":"","additional_kwargs":{},"response_metadata":{},"id":""}}',
    '[{"lc":1,"type":"constructor","id":["langchain_core","messages","AIMessage"],"kwargs":{"content":"","tool_calls":[],"invalid_tool_calls":[],"usage_metadata":{"input_tokens":0,"output_tokens":0,"total_tokens":0},"additional_kwargs":{},"response_metadata":{},"id":""}}]',
    '{"taskId":"","taskPath":"~__pregel_pull, __start__","writes":[{"channel":"messages","idx":0,"type":"json"},{"channel":"branch:to:","idx":0,"type":"json"}]}',
    '{"v":4,"id":"","ts":"2026-01-01T00:00:00.000Z","versions_seen":{"__input__":{},"__start__":{"__start__":1}},"pending_sends":[]}',
    '{"source":"loop","step":1,"parents":{},"writes":null}{"source":"input","step":-1,"parents":{}}',
    '{"__start__":1,"messages":1,"branch:to:":1}',
    '{"id":"","ns":"","parent":"","createdAt":"2026-01-01T00:00:00.000Z","v":4,"type":"json","metadata":{"source":"loop","step":1,"parents":{}},',
    '"channelVersions":{"__start__":1,"messages":1,"branch:to:":1},"valueSources":{"messages":"/*","__start__":"/~","branch:to:":"/~"},',
    '"pieces":{"messages":[["",0,0,0]]},"inlined":[["__start__",0],["branch:to:",0]],"packed":0,"body":0}',
  ].join('\n'),
);

/** What a stored object may inflate to at most (records and lines are bounded by the value limit). */
const MAX_INFLATED_BYTES = 512 * 1024 * 1024;

/** `bytes` deflated from {@link DICTIONARY_1}. */
export function deflate(bytes: Buffer): Buffer {
  return deflateRawSync(bytes, { level: 6, dictionary: DICTIONARY_1 });
}

/** The bytes {@link deflate} made; damage is an IntegrityError naming `what` (never the bytes). */
export function inflate(bytes: Buffer, what: string): Buffer {
  try {
    return inflateRawSync(bytes, { dictionary: DICTIONARY_1, maxOutputLength: MAX_INFLATED_BYTES });
  } catch {
    throw new IntegrityError(`${what} does not decompress`);
  }
}
