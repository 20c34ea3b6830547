import { z } from 'zod';

import { route } from './spec.js';
import { TAGS } from './tags.js';

/** The routes of the service itself: health, readiness, this document, and every other path. */

/** The longest readiness check in milliseconds (the storage timeout when shorter). */
export const MAX_READINESS_MS = 3_000;

const outcome = z.enum(['ok', 'failed', 'timeout']);

export const ReadinessChecks = z
  .object({
    backend: outcome,
    sessionIndex: outcome.optional(),
    memory: outcome.optional(),
    audit: outcome.optional(),
    emailWindowQueue: outcome.optional(),
  })
  .meta({
    id: 'ReadinessChecks',
    description:
      'Each configured store by name and whether it answered: `backend` (the Blob container or the local data folder) always; `sessionIndex`, `memory` and `audit` (their tables) and `emailWindowQueue` when configured. Names only: no endpoint, account, path or error text.',
  });

export const Health = z.object({
  status: z.literal('ok'),
  backend: z.enum(['local', 'blob']),
  version: z.string().min(1),
});

export const Readiness = z.object({ status: z.literal('ready'), checks: ReadinessChecks });

export const healthRoute = route({
  name: 'health',
  route: 'health',
  operations: {
    GET: {
      operationId: 'getHealth',
      summary: 'Liveness',
      description:
        'The process answers; touches no storage (`GET /api/health/ready` checks it). Reveals no endpoint, container, path or secret.',
      tag: TAGS.service,
      auth: 'none',
      answers: { 200: { description: 'The service is up.', body: Health } },
    },
  },
});

export const healthReadyRoute = route({
  name: 'healthReady',
  route: 'health/ready',
  operations: {
    GET: {
      operationId: 'getReadiness',
      summary: 'Readiness: every configured store answers',
      description: `One cheap request per configured store, all at once, answered within ${MAX_READINESS_MS / 1000} seconds (or the storage timeout, when shorter); concurrent probes share one check, reused for a second. What a load balancer probes; \`GET /api/health\` is liveness and touches no storage.`,
      tag: TAGS.service,
      auth: 'none',
      answers: { 200: { description: 'Every configured store answered.', body: Readiness } },
      errors: [{ status: 503, response: 'NotReady' }],
    },
  },
});

export const openApiRoute = route({
  name: 'openapi',
  route: 'openapi.json',
  operations: {
    GET: {
      operationId: 'getOpenApiDocument',
      summary: 'This document',
      tag: TAGS.service,
      auth: 'none',
      answers: {
        200: {
          description: 'The OpenAPI 3.1 document of the API.',
          body: z.looseObject({
            openapi: z.string().regex(/^3\.1\.\d+$/),
            info: z.looseObject({}),
            paths: z.looseObject({}),
          }),
        },
      },
    },
  },
});

const noRoute = (method: string) =>
  ({
    operationId: `noRoute${method[0] ?? ''}${method.slice(1).toLowerCase()}`,
    summary: 'Any other path: 404',
    tag: TAGS.service,
    auth: 'none',
    answers: {},
    errors: [404],
  }) as const;

/** Every path no other operation serves answers 404 with the error JSON, whatever the method. */
export const notFoundRoute = route({
  name: 'notFound',
  route: '{*path}',
  params: z.object({ path: z.string().describe('Any path that no other operation serves.') }),
  operations: {
    GET: noRoute('GET'),
    HEAD: noRoute('HEAD'),
    PUT: noRoute('PUT'),
    POST: noRoute('POST'),
    PATCH: noRoute('PATCH'),
    DELETE: noRoute('DELETE'),
    OPTIONS: noRoute('OPTIONS'),
  },
});
