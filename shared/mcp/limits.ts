/**
 * The largest MCP request body: a key/value value of CAIRN_MAX_VALUE_BYTES as base64 (4/3 of it),
 * plus room for the JSON-RPC envelope. Larger bodies are 413 before anything is parsed.
 */
export function mcpBodyLimit(maxValueBytes: number): number {
  return Math.ceil(maxValueBytes / 3) * 4 + 64 * 1024;
}
