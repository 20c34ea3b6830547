/**
 * The request schemas of the key/value routes that take more than a key: the route specs own them
 * (shared/protocol/kv.ts); the MCP tools validate with these same schemas.
 */
export { keysQuery } from '../protocol/kv';
