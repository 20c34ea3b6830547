import { z } from 'zod';

/**
 * The request schemas of the key/value routes that take more than a key (the store validates keys
 * and values itself). The HTTP routes and the MCP tools validate with these same schemas.
 * Built once: a zod schema costs about 0.1 ms to build, 1 µs to apply.
 */

const LIMIT_RULE = 'must be a whole number from 1 to 5000';
export const keysQuery = z.object({
  prefix: z.string().optional(),
  limit: z.coerce
    .number({ error: LIMIT_RULE })
    .int(LIMIT_RULE)
    .min(1, LIMIT_RULE)
    .max(5000, LIMIT_RULE)
    .default(1000),
  cursor: z.string().min(1, 'must not be empty').optional(),
});
