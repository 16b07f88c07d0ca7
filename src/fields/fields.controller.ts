import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Put, Query, Res } from '@nestjs/common';
import { ApiExtraModels, ApiOperation, ApiParam, ApiResponse, ApiTags, getSchemaPath } from '@nestjs/swagger';
import type { Response } from 'express';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import { RequirePermission } from '../auth/permissions.js';
import { IdPipe } from '../common/id.pipe.js';
import { ApiEnvelope, ApiErrors } from '../common/openapi.js';
import { ApiListQuery, ApiListSearch } from '../lists/list.openapi.js';
import { ListSearchDto, searchQuery } from '../lists/list-search.dto.js';
import type { Principal } from '../common/request.js';
import { FieldCollectionBodyDto, FieldInObjectBodyDto, FieldPropertiesDto, FieldRecordDto, UpdateFieldDto } from './field.dto.js';
import { FieldObjectPipe } from './field-object.pipe.js';
import type { FieldObject } from './field-rules.js';
import { FieldsService, FIELD_COLLECTION_LIST_SPEC, FIELD_LIST_SPEC } from './fields.service.js';

const LIST_DOC = 'List parameters: search (label, alias, description), page, limit, orderBy, orderByDir; filters isPublished (boolean) and type.';
const DELETE_DOC = 'Deletes the field and, for a contact field, removes its value from every contact (in the same transaction). Answers the field as it was.';
const PUT_DOC =
  'Full replace (200): omitted optional properties reset to their defaults, except `alias`, which the field keeps when omitted. ' +
  'When the id does not exist, a new field is created with a new id (201); under /api/fields/<object>/..., a field of the other object counts as not existing.';
const PATCH_DOC = 'Changes only the supplied properties; 404 when the id does not exist. A new alias renames the key of every contact value.';
const objectParam = ApiParam({ name: 'object', enum: ['contact', 'company'], description: 'Which object uses the field; any other value is a 404' });

@ApiTags('fields')
@ApiExtraModels(FieldPropertiesDto)
@Controller('api/fields')
export class FieldsController {
  constructor(private readonly fields: FieldsService) {}

  @Get()
  @RequirePermission('fields:read')
  @ApiOperation({ summary: 'List the fields of both objects', description: `${LIST_DOC} Also filter object (contact or company).` })
  @ApiEnvelope('fields', FieldRecordDto, { list: true })
  @ApiListQuery(FIELD_COLLECTION_LIST_SPEC)
  listAll(@Query() query: Record<string, unknown>) {
    return this.fields.list(query);
  }

  @Post('search')
  @HttpCode(200)
  @RequirePermission('fields:read')
  @ApiOperation({
    summary: 'Search the fields of both objects: the list with its parameters as a JSON body (filter in its JSON form)',
    description: 'Answers what the GET list answers.',
  })
  @ApiListSearch('fields', FieldRecordDto, FIELD_COLLECTION_LIST_SPEC)
  search(@Body() body: ListSearchDto) {
    return this.fields.list(searchQuery(body));
  }

  @ApiErrors({ status: 409, description: 'The alias is taken for the object' })
  @Post()
  @HttpCode(201)
  @RequirePermission('fields:write')
  @ApiOperation({ summary: 'Create a field (collection style; `object` required in the body)', description: '409 when a given alias is taken for the object.' })
  @ApiEnvelope('field', FieldRecordDto, { status: 201 })
  async createInCollection(@Body() dto: FieldCollectionBodyDto, @CurrentPrincipal() who: Principal) {
    return { field: await this.fields.create(dto, who) };
  }

  @Get(':segment')
  @RequirePermission('fields:read')
  @ApiParam({
    name: 'segment',
    description: '`contact` or `company` (the list of that object), or a field id (that field); anything else is a 404',
    schema: {
      oneOf: [
        { type: 'string', enum: ['contact', 'company'] },
        { type: 'integer', format: 'int32', minimum: 1, maximum: 2147483647 },
      ],
    },
  })
  @ApiOperation({
    summary: 'List the fields of an object (/api/fields/contact, /api/fields/company), or get one field by id (/api/fields/{id})',
    description: `For an object: ${LIST_DOC} Answers { total, fields }. For an id: answers { field }. Anything else is a 404.`,
  })
  @ApiExtraModels(FieldRecordDto)
  @ApiResponse({
    status: 200,
    description: '{ total, fields } for an object, { field } for an id',
    schema: {
      oneOf: [
        {
          type: 'object',
          required: ['total', 'fields'],
          properties: { total: { type: 'integer' }, fields: { type: 'array', items: { $ref: getSchemaPath(FieldRecordDto) } } },
        },
        { type: 'object', required: ['field'], properties: { field: { $ref: getSchemaPath(FieldRecordDto) } } },
      ],
    },
  })
  @ApiListQuery(FIELD_LIST_SPEC)
  listOrGet(@Param('segment') segment: string, @Query() query: Record<string, unknown>) {
    return this.fields.listOrGet(segment, query);
  }

  @ApiErrors({
    status: 409,
    description: 'The alias is taken, the type cannot change while contacts hold values, or contacts share a value of a field made unique',
  })
  @Patch(':id')
  @RequirePermission('fields:write')
  @ApiOperation({ summary: 'Edit a field (collection style)', description: `${PATCH_DOC} \`object\`, when given, must be the field's object.` })
  @ApiEnvelope('field', FieldRecordDto)
  async patchInCollection(@Param('id', IdPipe) id: number, @Body() dto: UpdateFieldDto, @CurrentPrincipal() who: Principal) {
    return { field: await this.fields.patch(id, dto, who) };
  }

  @ApiErrors({
    status: 409,
    description: 'The alias is taken, the type cannot change while contacts hold values, or contacts share a value of a field made unique',
  })
  @Put(':id')
  @RequirePermission('fields:write')
  @ApiOperation({ summary: 'Replace a field, or create one when the id does not exist (collection style; `object` required)', description: PUT_DOC })
  @ApiEnvelope('field', FieldRecordDto)
  @ApiEnvelope('field', FieldRecordDto, { status: 201 })
  async putInCollection(
    @Param('id', IdPipe) id: number,
    @Body() dto: FieldCollectionBodyDto,
    @CurrentPrincipal() who: Principal,
    @Res({ passthrough: true }) res: Response,
  ) {
    const { created, field } = await this.fields.put(id, dto, who);
    res.status(created ? 201 : 200);
    return { field };
  }

  @Delete(':id')
  @RequirePermission('fields:delete')
  @ApiOperation({ summary: 'Delete a field (collection style)', description: DELETE_DOC })
  @ApiEnvelope('field', FieldRecordDto)
  async removeInCollection(@Param('id', IdPipe) id: number) {
    return { field: await this.fields.remove(id) };
  }

  @ApiErrors({ status: 409, description: 'The alias is taken for the object' })
  @Post(':object/new')
  @HttpCode(201)
  @RequirePermission('fields:write')
  @objectParam
  @ApiOperation({
    summary: 'Create a field of an object',
    description: '`object` in the body, when given, must match the path (400). 409 when a given alias is taken.',
  })
  @ApiEnvelope('field', FieldRecordDto, { status: 201 })
  async create(@Param('object', FieldObjectPipe) object: FieldObject, @Body() dto: FieldInObjectBodyDto, @CurrentPrincipal() who: Principal) {
    return { field: await this.fields.create(dto, who, object) };
  }

  @Get(':object/:id')
  @RequirePermission('fields:read')
  @objectParam
  @ApiOperation({ summary: 'Get a field of an object', description: '404 when the id does not exist or belongs to the other object.' })
  @ApiEnvelope('field', FieldRecordDto)
  async get(@Param('object', FieldObjectPipe) object: FieldObject, @Param('id', IdPipe) id: number) {
    return { field: await this.fields.get(id, object) };
  }

  @ApiErrors({
    status: 409,
    description: 'The alias is taken, the type cannot change while contacts hold values, or contacts share a value of a field made unique',
  })
  @Patch(':object/:id/edit')
  @RequirePermission('fields:write')
  @objectParam
  @ApiOperation({ summary: 'Edit a field of an object', description: `${PATCH_DOC} \`object\` in the body must match the path.` })
  @ApiEnvelope('field', FieldRecordDto)
  async patch(
    @Param('object', FieldObjectPipe) object: FieldObject,
    @Param('id', IdPipe) id: number,
    @Body() dto: UpdateFieldDto,
    @CurrentPrincipal() who: Principal,
  ) {
    return { field: await this.fields.patch(id, dto, who, object) };
  }

  @ApiErrors({
    status: 409,
    description: 'The alias is taken, the type cannot change while contacts hold values, or contacts share a value of a field made unique',
  })
  @Put(':object/:id/edit')
  @RequirePermission('fields:write')
  @objectParam
  @ApiOperation({ summary: 'Replace a field of an object, or create one when the id does not exist', description: PUT_DOC })
  @ApiEnvelope('field', FieldRecordDto)
  @ApiEnvelope('field', FieldRecordDto, { status: 201 })
  async put(
    @Param('object', FieldObjectPipe) object: FieldObject,
    @Param('id', IdPipe) id: number,
    @Body() dto: FieldInObjectBodyDto,
    @CurrentPrincipal() who: Principal,
    @Res({ passthrough: true }) res: Response,
  ) {
    const { created, field } = await this.fields.put(id, dto, who, object);
    res.status(created ? 201 : 200);
    return { field };
  }

  @Delete(':object/:id/delete')
  @RequirePermission('fields:delete')
  @objectParam
  @ApiOperation({ summary: 'Delete a field of an object', description: DELETE_DOC })
  @ApiEnvelope('field', FieldRecordDto)
  async remove(@Param('object', FieldObjectPipe) object: FieldObject, @Param('id', IdPipe) id: number) {
    return { field: await this.fields.remove(id, object) };
  }
}
