import { logInteraction, readInteractionDay } from '#shared/coordination/interactionLog';
import { interactionDayRoute, interactionsRoute } from '#shared/protocol/coordination';

import { json } from '../http/request';
import { registerRoute, specHandler } from '../http/route';
import { storeOf } from './common';

/** The interaction log: one entry appended to the UTC day's log; a day read back. */

export const interactions = specHandler(interactionsRoute, {
  POST: async ({ body }, _request, call) => json(201, await logInteraction(storeOf(call), body)),
});

export const interactionDay = specHandler(interactionDayRoute, {
  GET: async ({ params: { day } }, _request, call) =>
    json(200, { entries: await readInteractionDay(storeOf(call), day) }),
});

registerRoute(interactions);
registerRoute(interactionDay);
