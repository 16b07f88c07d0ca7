import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Put, Query, Res } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import type { Response } from 'express';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import { RequirePermission } from '../auth/permissions.js';
import { IdPipe } from '../common/id.pipe.js';
import type { Principal } from '../common/request.js';
import { ContactRecordDto, CreateContactDto, SetDoNotContactDto, UpdateContactDto } from './contact.dto.js';
import { ApiEnvelope, ApiErrors } from '../common/openapi.js';
import { ApiBatchAnswers } from '../batch/batch.openapi.js';
import { ApiListQuery, ApiListSearch } from '../lists/list.openapi.js';
import { ListSearchDto, searchQuery } from '../lists/list-search.dto.js';
import { BatchWriteDto } from '../batch/batch.dto.js';
import { ContactsService } from './contacts.service.js';
import { CONTACT_LIST_SPEC } from './contact.columns.js';
import { LargeJsonBody } from '../server/large-json-body.decorator.js';

@ApiTags('contacts')
@Controller('api/contacts')
export class ContactsController {
  constructor(private readonly contacts: ContactsService) {}

  @Get()
  @RequirePermission('contacts:read')
  @ApiOperation({
    summary: 'List contacts',
    description:
      'List parameters: search, page, limit, orderBy, orderByDir, filter, after, count, fields; filter dncSms (true: opted out of text messages, false: not).',
  })
  @ApiEnvelope('contacts', ContactRecordDto, { list: true })
  @ApiListQuery(CONTACT_LIST_SPEC)
  list(@Query() query: Record<string, unknown>) {
    return this.contacts.list(query);
  }

  @Post('search')
  @HttpCode(200)
  @RequirePermission('contacts:read')
  @ApiOperation({
    summary: 'Search contacts: the list with its parameters as a JSON body, the filter in its JSON form',
    description: 'Answers what GET /api/contacts answers.',
  })
  @ApiListSearch('contacts', ContactRecordDto, CONTACT_LIST_SPEC)
  search(@Body() body: ListSearchDto) {
    return this.contacts.list(searchQuery(body));
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

  @LargeJsonBody()
  @Post('batch')
  @HttpCode(200)
  @RequirePermission('contacts:write')
  @ApiOperation({
    summary: 'Create, update, upsert or delete up to 500 contacts in one request (one request against the plan limit)',
    description:
      'Each item is written exactly as its single-record route would write it (same validation, same events, same errors: 400 with details, 404, ' +
      '409 with the existing id) in its own savepoint; results come back in input order. `idProperty` names the record of an update, upsert or ' +
      'delete item: `id` (default for update and delete), `email` (default for upsert) or the alias of a published unique-identifier custom field ' +
      "(the value in the item's `fields`). An upsert updates the contact it names (PATCH: only the supplied properties) or creates it. Mode delete " +
      'needs `contacts:delete`. Two items naming one contact (or one email on create): the later fails 409, `details[0].index` naming the first. ' +
      'With `atomic: true` any failure rolls the whole batch back (422 `batch_failed`).',
  })
  @ApiBatchAnswers()
  batch(@Body() dto: BatchWriteDto, @CurrentPrincipal() who: Principal) {
    return this.contacts.batch(dto, who);
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

  @Post(':id/dnc/sms')
  @HttpCode(200)
  @RequirePermission('contacts:write')
  @ApiOperation({
    summary: 'Mark a contact do-not-contact for text messages',
    description:
      "Body `{ reason: unsubscribed|bounced|manual, comment? }`. Single sends to the contact's phone number are then refused (409) and broadcasts skip it; " +
      'a message already queued is canceled by the worker (status `canceled`, failureCode `opted_out`). An existing entry takes the new reason and comment and keeps its `since`. ' +
      'Writes contact.updated when something changed.',
  })
  @ApiEnvelope('contact', ContactRecordDto)
  async setSmsDnc(@Param('id', IdPipe) id: number, @Body() dto: SetDoNotContactDto, @CurrentPrincipal() who: Principal) {
    return { contact: await this.contacts.setDoNotContact(id, dto, who) };
  }

  @ApiErrors({ status: 404, description: 'No contact with this id, or the contact has no sms do-not-contact entry' })
  @Delete(':id/dnc/sms')
  @RequirePermission('contacts:write')
  @ApiOperation({
    summary: 'Remove the sms do-not-contact entry of a contact',
    description: 'Answers the contact; 404 when it has no entry (of concurrent removals exactly one succeeds). Writes contact.updated.',
  })
  @ApiEnvelope('contact', ContactRecordDto)
  async clearSmsDnc(@Param('id', IdPipe) id: number, @CurrentPrincipal() who: Principal) {
    return { contact: await this.contacts.clearDoNotContact(id, who) };
  }
}
