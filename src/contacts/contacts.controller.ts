import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Put, Query, Res } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import type { Response } from 'express';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import { RequirePermission } from '../auth/permissions.js';
import { IdPipe } from '../common/id.pipe.js';
import type { Principal } from '../common/request.js';
import { ContactRecordDto, CreateContactDto, UpdateContactDto } from './contact.dto.js';
import { ApiEnvelope, ApiListQuery, ApiErrors } from '../common/openapi.js';
import { ContactsService, CONTACT_LIST_SPEC } from './contacts.service.js';

@ApiTags('contacts')
@Controller('api/contacts')
export class ContactsController {
  constructor(private readonly contacts: ContactsService) {}

  @Get()
  @RequirePermission('contacts:read')
  @ApiOperation({ summary: 'List contacts', description: 'List parameters: search, page, limit, orderBy, orderByDir.' })
  @ApiEnvelope('contacts', ContactRecordDto, { list: true })
  @ApiListQuery(CONTACT_LIST_SPEC)
  list(@Query() query: Record<string, unknown>) {
    return this.contacts.list(query);
  }

  @ApiErrors({ status: 409, description: 'The email, or the value of a unique-identifier custom field, belongs to another contact (`details[0].existingId`)' })
  @Post(['new', '/'])
  @HttpCode(201)
  @RequirePermission('contacts:write')
  @ApiOperation({ summary: 'Create a contact (409 when the email is taken, with the existing id in details)' })
  @ApiEnvelope('contact', ContactRecordDto, { status: 201 })
  async create(@Body() dto: CreateContactDto, @CurrentPrincipal() who: Principal) {
    return { contact: await this.contacts.create(dto, who) };
  }

  @Get(':id')
  @RequirePermission('contacts:read')
  @ApiEnvelope('contact', ContactRecordDto)
  async get(@Param('id', IdPipe) id: number) {
    return { contact: await this.contacts.get(id) };
  }

  @ApiErrors({ status: 409, description: 'The email, or the value of a unique-identifier custom field, belongs to another contact (`details[0].existingId`)' })
  @Patch([':id/edit', ':id'])
  @RequirePermission('contacts:write')
  @ApiOperation({ summary: 'Edit a contact: changes only the supplied properties; 404 when the id does not exist' })
  @ApiEnvelope('contact', ContactRecordDto)
  async patch(@Param('id', IdPipe) id: number, @Body() dto: UpdateContactDto, @CurrentPrincipal() who: Principal) {
    return { contact: await this.contacts.patch(id, dto, who) };
  }

  @ApiErrors({ status: 409, description: 'The email, or the value of a unique-identifier custom field, belongs to another contact (`details[0].existingId`)' })
  @Put([':id/edit', ':id'])
  @RequirePermission('contacts:write')
  @ApiOperation({ summary: 'Replace a contact (200), or create one with a new id when the id does not exist (201)' })
  @ApiEnvelope('contact', ContactRecordDto)
  @ApiEnvelope('contact', ContactRecordDto, { status: 201 })
  async put(@Param('id', IdPipe) id: number, @Body() dto: CreateContactDto, @CurrentPrincipal() who: Principal, @Res({ passthrough: true }) res: Response) {
    const { created, contact } = await this.contacts.put(id, dto, who);
    res.status(created ? 201 : 200);
    return { contact };
  }

  @Delete([':id/delete', ':id'])
  @RequirePermission('contacts:delete')
  @ApiOperation({ summary: 'Delete a contact, with its deals, activities and campaign memberships; answers the contact as it was' })
  @ApiEnvelope('contact', ContactRecordDto)
  async remove(@Param('id', IdPipe) id: number) {
    return { contact: await this.contacts.remove(id) };
  }
}
