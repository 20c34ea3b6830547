import { z } from 'zod';

/**
 * The request schemas of the memory routes (shape only; the memory facts check names, sizes and
 * time to live before any I/O and name the field at fault). The HTTP routes and the MCP tools
 * validate with these same schemas, so a field rule is written once.
 */

/**
 * A fact's value is at most 32 KiB of JSON; the body around it gets room for whitespace, ttl and
 * up to 8 vectors of 4,096 numbers written out in JSON (about 25 characters each at most).
 */
export const MAX_FACT_BODY_BYTES = 1024 * 1024;
/** A search body: namespace, text, a filter of up to 32 fields and a vector of up to 4,096 numbers. */
export const MAX_SEARCH_BODY_BYTES = 256 * 1024;

const required = z.string({ error: 'is required' });
const wholeNumber = (rule: string) => z.coerce.number({ error: rule }).int(rule);

export const factQuery = z.object({ namespace: required, key: required });

export const rememberBody = z.strictObject({
  value: z.unknown(),
  ttl: z
    .number({ error: 'must be a whole number of seconds' })
    .int('must be a whole number of seconds')
    .optional(),
  /** Field path → array of numbers; checked by the memory facts (`vectors.<path>`). */
  vectors: z.unknown().optional(),
});

export const searchBody = z.strictObject({
  namespace: z.string({ error: 'is required ("" searches every namespace)' }),
  text: z.string().optional(),
  /** An array of numbers; checked by the memory facts. */
  vector: z.unknown().optional(),
  distance: z.string({ error: 'must be cosine, dot or l2' }).optional(),
  limit: z.number({ error: 'must be a whole number' }).optional(),
  offset: z.number({ error: 'must be a whole number' }).optional(),
  filter: z.unknown().optional(),
});

const LIMIT_RULE = 'must be a whole number';
export const namespacesQuery = z.object({
  prefix: z.string().optional(),
  suffix: z.string().optional(),
  maxDepth: wholeNumber(LIMIT_RULE).optional(),
  limit: wholeNumber(LIMIT_RULE).optional(),
  offset: wholeNumber(LIMIT_RULE).optional(),
});

export const forgetAllQuery = z.object({
  namespace: required,
  all: z.enum(['true', 'false'], { error: 'must be true or false' }).optional(),
});
