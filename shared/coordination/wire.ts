import { z } from 'zod';

import { hasControlCharacter } from '../controlCharacters';
import { chatIdProblem } from './chatIds';
import { isRfc3339 } from './timestamps';

/**
 * The field rules of the fleet-coordination routes (shape only; shared/coordination checks the
 * rest). The HTTP routes and the MCP tools validate with these same schemas.
 */

export const timestamp = z
  .string({ error: 'must be an RFC 3339 timestamp' })
  .refine(isRfc3339, 'must be an RFC 3339 timestamp (e.g. 2026-11-29T21:16:51.123Z)');
export const chatId = z.string({ error: 'must be a string' }).superRefine((id, context) => {
  const problem = chatIdProblem(id);
  if (problem !== null) context.addIssue({ code: 'custom', message: problem });
});
export const text = (max: number) =>
  z.string({ error: 'must be a string' }).max(max, `must be at most ${max} characters`);

export const MAX_CLAIM_CANDIDATES = 500;

export const chatClaimsBody = z.strictObject({
  candidateIds: z
    .array(
      text(256)
        .min(1, 'must not be empty')
        .refine((candidate) => !hasControlCharacter(candidate), 'must not contain control characters'),
      { error: 'must be an array of message ids' },
    )
    .max(MAX_CLAIM_CANDIDATES, `must have at most ${MAX_CLAIM_CANDIDATES} ids`),
  lastTs: timestamp.nullable().optional(),
});

export const promiseBody = z.strictObject({
  chatId: text(1024),
  description: text(4000),
  dueBy: timestamp.nullable().optional(),
});

export const promisesQuery = z.object({
  status: z.enum(['open', 'all'], { error: 'must be "open" or "all"' }).default('open'),
});
