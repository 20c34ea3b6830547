import { z } from 'zod';

import { logInteraction, readInteractionDay } from '#shared/coordination/interactionLog';
import { isUtcDay } from '#shared/coordination/timestamps';
import { InvalidArgumentError } from '#shared/errors';

import { httpHandler, registerHttp } from '../http/pipeline';
import { json } from '../http/request';
import { readJsonBody } from '../jsonBody';
import { BODY_LIMITS, storeOf, text } from './common';

/** The interaction log: one entry appended to the UTC day's log; a day read back. */

const interactionBody = z.strictObject({
  channel: text(64),
  direction: z.enum(['inbound', 'outbound'], { error: 'must be "inbound" or "outbound"' }),
  sender: text(512),
  summary: text(8000),
  recipient: text(512).optional(),
  action: text(256).optional(),
  contentRef: text(2048).optional(),
  metadata: z.record(z.string(), z.unknown(), { error: 'must be a JSON object' }).optional(),
});

export const interactions = httpHandler('interactions', {
  POST: async (request, call) => {
    const body = await readJsonBody(request, BODY_LIMITS.interaction, interactionBody);
    return json(201, await logInteraction(storeOf(call), body));
  },
});

export const interactionDay = httpHandler('interactionDay', {
  GET: async (request, call) => {
    const day = request.params['day'] ?? '';
    if (!isUtcDay(day)) throw new InvalidArgumentError('day', 'must be a UTC day, YYYY-MM-DD');
    return json(200, { entries: await readInteractionDay(storeOf(call), day) });
  },
});

registerHttp('interactions', 'interactions', interactions);
registerHttp('interactionDay', 'interactions/{day}', interactionDay);
