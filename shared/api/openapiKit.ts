/**
 * The few types and helpers of the shared parts of Cairn's OpenAPI 3.1 document
 * (./components.ts). Every path is generated from the route specs (shared/protocol/openapi.ts);
 * what is built here is plain JSON data, served as it is.
 */

export type Json = null | boolean | number | string | readonly Json[] | JsonObject;
export interface JsonObject {
  readonly [key: string]: Json;
}

/** A JSON Schema (2020-12, the dialect of OpenAPI 3.1). */
export type Schema = JsonObject;

export { OPERATION_METHODS } from '../protocol/openapi';

export const ref = (pointer: string): JsonObject => ({ $ref: pointer });
export const schemaRef = (name: string): JsonObject => ref(`#/components/schemas/${name}`);
const headerRef = (name: string): JsonObject => ref(`#/components/headers/${name}`);

/** The answer to any request carries its request id. */
export const REQUEST_ID_HEADER = { 'x-request-id': headerRef('RequestId') };

/** A response header: `required` unless `optional`. */
export function header(description: string, schema: Schema, optional = false): JsonObject {
  return { description, required: !optional, schema };
}
