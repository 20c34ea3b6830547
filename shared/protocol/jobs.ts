import { z } from 'zod';

/** What the admin jobs' routes (migrations, rewraps) share: the start's answer, a job's state. */

export const JobStarted = z.object({ id: z.string().min(1), statusUri: z.url() });

export const JobState = z.enum(['pending', 'running', 'completed', 'failed']);

export const statusUriHeader = { Location: { description: 'The status URI.', schema: z.url() } };

/** The path parameter of a job's status: any text (an id of other characters names no job: 404). */
export const jobIdParams = (what: string) =>
  z.object({
    id: z.string().meta({
      description: `The ${what} id, as the start answered it. An id of other characters names no ${what} (404).`,
      pattern: '^[A-Za-z0-9_-]{1,128}$',
    }),
  });
