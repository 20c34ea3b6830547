import { describe, expect, it } from 'vitest';
import { z } from 'zod';

import { openApiDocument } from '../../shared/api/openapi';
import { Key } from '../../shared/protocol/fields';
import { ROUTE_SPECS } from '../../shared/protocol/index';
import { generateOpenApi, openApiPath } from '../../shared/protocol/openapi';
import { route } from '../../shared/protocol/spec';

/**
 * The OpenAPI generator of the route specs (shared/protocol/openapi.ts): what it writes for a spec,
 * and that the served document carries every spec's path as generated.
 */

const Widget = z
  .object({ name: z.string().describe('Its name.'), size: z.number().int().default(1) })
  .meta({ id: 'Widget' });
const widgetSpec = route({
  name: 'widget',
  route: 'widgets/{*path}',
  params: z.object({ path: Key.describe('The rest of the path.') }),
  operations: {
    PUT: {
      operationId: 'putWidget',
      summary: 'Put a widget',
      tag: 'widgets',
      auth: 'admin',
      query: z.object({ dryRun: z.enum(['true', 'false']).optional().describe('Only check.') }),
      body: { kind: 'json', description: 'The widget.', schema: Widget, limit: 100 },
      answers: { 200: { description: 'Stored.', body: Widget } },
      errors: [404, { status: 409, response: 'ThreadBusy' }],
    },
  },
});

describe('the OpenAPI generator of the route specs', () => {
  const { paths, components } = generateOpenApi([widgetSpec]);
  const schemas = components['schemas'] as Record<string, unknown>;
  const item = paths['/api/widgets/{path}'] as Record<string, Record<string, unknown>>;
  const put = item['put'] as Record<string, unknown>;

  it('marks the catch-all path parameter and documents it with its schema', () => {
    expect(openApiPath('widgets/{*path}', 'api')).toEqual({
      path: '/api/widgets/{path}',
      restOfPath: 'path',
    });
    expect(item['parameters']).toEqual([
      {
        name: 'path',
        in: 'path',
        required: true,
        description: 'The rest of the path.',
        schema: { $ref: '#/components/schemas/Key' },
        'x-cairn-rest-of-path': true,
      },
    ]);
    expect(schemas['Key']).toMatchObject({ type: 'string', minLength: 1, maxLength: 1024 });
  });

  it('adds the errors every operation of its kind answers, and the admin note', () => {
    expect(Object.keys(put['responses'] as object)).toEqual([
      '200',
      '400',
      '401',
      '403',
      '404',
      '409',
      '413',
      '500',
      '503',
    ]);
    expect((put['responses'] as Record<string, unknown>)['409']).toEqual({
      $ref: '#/components/responses/ThreadBusy',
    });
    expect(put['description']).toBe('Admin only: a credential without the admin role gets 403.');
    expect(put['parameters']).toEqual([
      {
        name: 'dryRun',
        in: 'query',
        required: false,
        description: 'Only check.',
        schema: { type: 'string', enum: ['true', 'false'] },
      },
      { $ref: '#/components/parameters/RequestId' },
    ]);
  });

  it('writes a request as zod takes it and an answer as zod gives it, as two components when they differ', () => {
    expect(put['requestBody']).toEqual({
      description: 'The widget. At most 100 bytes (else 413, nothing written).',
      required: true,
      content: { 'application/json': { schema: { $ref: '#/components/schemas/WidgetInput' } } },
    });
    // The answer always has `size` and nothing else; the request may leave it out.
    expect(schemas['Widget']).toMatchObject({ required: ['name', 'size'], additionalProperties: false });
    expect(schemas['WidgetInput']).toMatchObject({ required: ['name'] });
    expect(schemas['WidgetInput']).not.toHaveProperty('additionalProperties');
  });

  it('refuses two specs of one path and an error status listed twice', () => {
    expect(() => generateOpenApi([widgetSpec, widgetSpec])).toThrow(
      'two route specs for /api/widgets/{path}',
    );
    const twice = route({
      ...widgetSpec,
      operations: { PUT: { ...widgetSpec.operations.PUT, errors: [404, 404] } },
    });
    expect(() => generateOpenApi([twice])).toThrow('putWidget: status 404 is listed twice');
  });

  it('is what the served document holds for every spec, components included', () => {
    const generated = generateOpenApi(ROUTE_SPECS);
    const document = openApiDocument as unknown as {
      paths: Record<string, unknown>;
      components: { schemas: Record<string, unknown> };
    };
    for (const [path, pathItem] of Object.entries(generated.paths))
      expect(document.paths[path]).toEqual(pathItem);
    for (const [name, schema] of Object.entries(generated.components['schemas'] ?? {})) {
      expect(document.components.schemas[name]).toEqual(schema);
    }
    expect(Object.keys(generated.paths)).toEqual(
      expect.arrayContaining(['/api/health', '/api/kv/{key}', '/api/keys', '/api/{path}']),
    );
  });
});
