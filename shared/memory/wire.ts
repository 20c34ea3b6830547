import { z } from 'zod';

/**
 * The request schemas of the memory routes (shape only; the memory facts check names, sizes and
 * time to live before any I/O and name the field at fault). The HTTP routes and the MCP tools
 * validate with these same schemas, so a field rule is written once.
 */

const required = z.string({ error: 'is required' });
const wholeNumber = (rule: string) => z.coerce.number({ error: rule }).int(rule);

export const factQuery = z.object({ namespace: required, key: required });

export const rememberBody = z.strictObject({
  value: z.unknown(),
  ttl: z
    .number({ error: 'must be a whole number of seconds' })
    .int('must be a whole number of seconds')
    .optional(),
});

export const searchBody = z.strictObject({
  namespace: z.string({ error: 'is required ("" searches every namespace)' }),
  text: z.string().optional(),
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
