import { describe, expect, it } from '@jest/globals';
import { Body, Controller, Get, Param, Post, Query } from '@nestjs/common';
import { SkipThrottle } from '@nestjs/throttler';
import { IsIn, IsInt, IsNotEmpty, IsOptional, IsString, Matches, Max, Min } from 'class-validator';
import type { OpenAPIObject } from '@nestjs/swagger';
import { Public, RequirePermission } from '../auth/permissions.js';
import { IdPipe } from '../common/id.pipe.js';
import { parseListQuery } from '../lists/list-query.js';
import type { ListSpec } from '../lists/list-spec.js';
import { NotBlank, References, Rule } from '../common/documented-rules.js';
import { ApiErrors } from '../common/openapi.js';
import { ApiListQuery, listQueryParameters } from '../lists/list.openapi.js';
import { completeOpenApi } from './openapi-document.js';
import type { RouteInfo } from './route-table.js';
import { IsIsoDateTime, IsPhone, NoNul } from '../common/validation.js';

const SLUG = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;

const SPEC: ListSpec = {
  name: 'widgets',
  sortable: { id: 'w.id', name: 'w.name' },
  searchExpression: 'w.name',
  filters: { colour: { type: 'string', column: 'w.colour', values: ['red', 'blue'] }, ownerId: { type: 'int', column: 'w.owner_id' } },
};

class CreateWidgetDto {
  @IsString()
  @IsNotEmpty()
  name: string;

  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(10)
  size?: number;

  @IsOptional()
  @IsIsoDateTime()
  due?: string;

  @IsOptional()
  @IsString()
  @Matches(SLUG)
  slug?: string;

  @IsOptional()
  @IsString()
  @NoNul()
  @NotBlank()
  title?: string;

  @IsOptional()
  @IsString()
  @NoNul()
  note?: string;

  @IsOptional()
  @IsPhone()
  phone?: string;

  @IsOptional()
  @IsIn(['a', 'b'])
  kind?: string;

  @IsOptional()
  @IsInt()
  @References('contact')
  contactId?: number;

  @IsOptional()
  @IsIsoDateTime()
  @Rule('must be later than due')
  until?: string;
}

@Controller('api/widgets')
class WidgetsController {
  @Get()
  @RequirePermission('contacts:read')
  @ApiListQuery(SPEC)
  list(@Query() query: Record<string, unknown>) {
    return query;
  }

  @Post()
  @RequirePermission('contacts:write')
  @ApiErrors({ status: 409, description: 'The name is taken' })
  create(@Body() dto: CreateWidgetDto) {
    return dto;
  }

  @Get(':id')
  @Public()
  @SkipThrottle()
  get(@Param('id', IdPipe) id: number) {
    return id;
  }
}

const route = (method: string, path: string, permission: string, handlerName: string): RouteInfo => ({
  method,
  path,
  permission,
  alsoRequires: [],
  credential: permission === 'public' ? 'none' : 'token',
  handlerName,
  controller: WidgetsController,
  pattern: /^$/,
});

function documentFor(): OpenAPIObject {
  const prop = (type: string) => ({ type });
  return {
    openapi: '3.0.0',
    info: { title: 't', version: '1' },
    paths: {
      '/api/widgets': {
        get: { responses: { 200: { description: '' } } },
        post: {
          requestBody: { content: { 'application/json': { schema: { $ref: '#/components/schemas/CreateWidgetDto' } } } },
          responses: { 201: { description: '' } },
        },
      },
      '/api/widgets/{id}': {
        get: { parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'number' } }], responses: { 200: { description: '' } } },
      },
    },
    components: {
      schemas: {
        CreateWidgetDto: {
          type: 'object',
          properties: Object.fromEntries(
            Object.entries({
              name: 'string',
              size: 'number',
              due: 'string',
              slug: 'string',
              title: 'string',
              note: 'string',
              phone: 'string',
              kind: 'string',
              contactId: 'number',
              until: 'string',
            }).map(([k, t]) => [k, prop(t)]),
          ),
        },
      },
    },
  } as unknown as OpenAPIObject;
}

describe('completeOpenApi', () => {
  const doc = documentFor();
  completeOpenApi(doc, [
    route('GET', '/api/widgets', 'contacts:read', 'list'),
    route('POST', '/api/widgets', 'contacts:write', 'create'),
    route('GET', '/api/widgets/:id', 'public', 'get'),
  ]);
  const op = (path: string, method: string) =>
    (doc.paths[path] as Record<string, { responses: Record<string, unknown>; parameters?: { name: string; schema: unknown }[] }>)[method];

  it('lists the error answers the route metadata implies', () => {
    expect(Object.keys(op('/api/widgets', 'get').responses).sort()).toEqual(['200', '400', '401', '403', '429', '503']);
    // A token write also takes Idempotency-Key: 409 while its first request runs, 422 when reused with another request.
    expect(Object.keys(op('/api/widgets', 'post').responses).sort()).toEqual(['201', '400', '401', '403', '409', '413', '415', '422', '429', '503']);
    expect(op('/api/widgets', 'post').parameters).toEqual(
      expect.arrayContaining([expect.objectContaining({ name: 'Idempotency-Key', in: 'header', required: false })]),
    );
    expect((op('/api/widgets', 'get').parameters ?? []).some((p: { name: string }) => p.name === 'Idempotency-Key')).toBe(false);
    // Public and not throttled: no 401, 403 or 429; a path id: 404.
    expect(Object.keys(op('/api/widgets/{id}', 'get').responses).sort()).toEqual(['200', '404', '503']);
  });

  it('answers errors with the error schema, its code narrowed to the status', () => {
    const conflict = op('/api/widgets', 'post').responses['409'] as { description: string; content: Record<string, { schema: { allOf: object[] } }> };
    expect(conflict.description).toBe('The name is taken');
    expect(conflict.content['application/json'].schema.allOf[0]).toEqual({ $ref: '#/components/schemas/ApiErrorBody' });
    expect(JSON.stringify(conflict.content['application/json'].schema.allOf[1])).toContain('"enum":["conflict"]');
    expect(op('/api/widgets/{id}', 'get').responses['404']).toEqual({ $ref: '#/components/responses/NotFound' });
  });

  it('makes IdPipe path ids 32-bit positive integers', () => {
    expect(op('/api/widgets/{id}', 'get').parameters![0].schema).toEqual({ type: 'integer', format: 'int32', minimum: 1, maximum: 2147483647 });
  });

  it('declares the list parameters of the ListSpec', () => {
    const params = op('/api/widgets', 'get').parameters!;
    expect(params.map((p) => p.name)).toEqual(['search', 'page', 'limit', 'orderBy', 'orderByDir', 'colour', 'ownerId']);
    expect(params.find((p) => p.name === 'orderBy')!.schema).toMatchObject({ enum: ['id', 'name'] });
    expect(params.find((p) => p.name === 'colour')!.schema).toMatchObject({ enum: ['red', 'blue'] });
  });

  it('writes the validation rules into the body schema', () => {
    const schema = (doc.components!.schemas as Record<string, { additionalProperties?: boolean; properties: Record<string, Record<string, unknown>> }>)
      .CreateWidgetDto;
    expect(schema.additionalProperties).toBe(false);
    expect(schema.properties.name.minLength).toBe(1);
    expect(schema.properties.size.type).toBe('integer');
    expect(schema.properties.due).toMatchObject({ format: 'date-time' });
    expect(new RegExp(schema.properties.due.pattern as string).test('2026-11-21T10:15:00+01:00')).toBe(true);
    expect(new RegExp(schema.properties.due.pattern as string).test('2026-11-21T10:15:00')).toBe(false);
  });
});

describe('completeOpenApi, the rules of a body', () => {
  const doc = documentFor();
  completeOpenApi(doc, [route('POST', '/api/widgets', 'contacts:write', 'create')]);
  const props = (doc.components!.schemas as Record<string, { properties: Record<string, Record<string, unknown>> }>).CreateWidgetDto.properties;

  it('declares patterns, formats and enums from the class-validator rules', () => {
    expect(props.slug.pattern).toBe(SLUG.source);
    expect(props.phone.format).toBe('phone');
    expect(props.kind.enum).toEqual(['a', 'b']);
    // NoNul: a pattern without NUL; with NotBlank also a character other than white space.
    const note = new RegExp(props.note.pattern as string);
    expect([note.test('a b'), note.test('a\u0000b')]).toEqual([true, false]);
    const title = new RegExp(props.title.pattern as string);
    expect([title.test(' x '), title.test(' \t '), title.test('x\u0000')]).toEqual([true, false, false]);
  });

  it('describes references and cross-field rules on the property and in the 400 of the operation', () => {
    expect(props.contactId['x-references']).toBe('contact');
    expect(props.until['x-rules']).toEqual(['must be later than due']);
    expect(props.until.description).toContain('must be later than due');
    const post = (doc.paths['/api/widgets'] as Record<string, { responses: Record<string, { description?: string }> }>).post;
    expect(post.responses['400'].description).toContain('`contactId` names a contact that does not exist ("contact <id> does not exist")');
    expect(post.responses['400'].description).toContain('`until`: must be later than due');
  });
});

describe('listQueryParameters', () => {
  it('documents exactly the parameters parseListQuery accepts, each documented value accepted', () => {
    const params = listQueryParameters(SPEC);
    for (const p of params) {
      const values = (p.schema.enum as string[] | undefined) ?? [p.schema.type === 'integer' ? String(p.schema.minimum ?? 1) : 'x'];
      for (const v of values) expect(() => parseListQuery({ [p.name]: v }, SPEC)).not.toThrow();
    }
    expect(() => parseListQuery({ undocumented: '1' }, SPEC)).toThrow();
    const noSearch = listQueryParameters({ name: 'w', sortable: { id: 'w.id' } }).map((p) => p.name);
    expect(noSearch).toEqual(['page', 'limit', 'orderBy', 'orderByDir']);
  });
});
