import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Put, Query } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import { RequirePermission } from '../common/route-access.js';
import { IdPipe } from '../common/id.pipe.js';
import { ApiEnvelope, ApiErrors } from '../common/openapi.js';
import { ApiListQuery, ApiListSearch } from '../lists/list.openapi.js';
import { ListSearchDto, searchQuery } from '../lists/list-search.dto.js';
import { CreateOrReplace, putOutcome } from '../server/put-status.js';
import type { Principal } from '../common/request.js';
import { BroadcastRecordDto, CreateBroadcastDto, UpdateBroadcastDto } from './broadcast.dto.js';
import { BroadcastsService } from './broadcasts.service.js';
import { BROADCAST_LIST_SPEC } from './broadcasts.repository.js';
import { CONTACT_MERGE_COLUMNS } from './merge-fields.js';

const CONTENT_RULES =
  `content may carry merge fields rendered per recipient: ${[...CONTACT_MERGE_COLUMNS.keys()].map((p) => `{{contact.${p}}}`).join(', ')}, ` +
  '{{contact.fields.<alias>}} (a published contact field), each with an optional default: {{contact.name | "there"}}; an unknown field or malformed braces is a 400 naming it. ' +
  'audience: exactly one of { campaignId } (the members when sent) or { contactIds: [1..10,000 ids] }. With scheduledFor the broadcast is `scheduled` and sent then.';

/**
 * Broadcasts, under /api/text-messages/broadcasts. Registered before TextMessagesController so that
 * `broadcasts` is never read as a text message id.
 */
@ApiTags('text messages')
@Controller(['api/text-messages/broadcasts', 'api/text_messages/broadcasts'])
export class BroadcastsController {
  constructor(private readonly broadcasts: BroadcastsService) {}

  @Get()
  @RequirePermission('textMessages:read')
  @ApiOperation({
    summary: 'List text message broadcasts',
    description:
      'List parameters: search (name, content), page, limit, orderBy, orderByDir, filter, fields, after, count; filter status. Each with its live message counts.',
  })
  @ApiEnvelope('broadcasts', BroadcastRecordDto, { list: true })
  @ApiListQuery(BROADCAST_LIST_SPEC)
  list(@Query() query: Record<string, unknown>) {
    return this.broadcasts.list(query);
  }

  @Post('search')
  @HttpCode(200)
  @RequirePermission('textMessages:read')
  @ApiOperation({
    summary: 'Search broadcasts: the list with its parameters as a JSON body (filter in its JSON form)',
    description: 'Answers what the GET list answers.',
  })
  @ApiListSearch('broadcasts', BroadcastRecordDto, BROADCAST_LIST_SPEC)
  search(@Body() body: ListSearchDto) {
    return this.broadcasts.list(searchQuery(body));
  }

  @ApiErrors({ status: 503, description: 'The job queue is unreachable (with scheduledFor); nothing was created', codes: ['unavailable'] })
  @Post(['new', '/'])
  @HttpCode(201)
  @RequirePermission('textMessages:write')
  @ApiOperation({ summary: 'Create a broadcast (draft, or scheduled with scheduledFor)', description: CONTENT_RULES })
  @ApiEnvelope('broadcast', BroadcastRecordDto, { status: 201 })
  async create(@Body() dto: CreateBroadcastDto, @CurrentPrincipal() who: Principal) {
    return { broadcast: await this.broadcasts.create(dto, who) };
  }

  @Get(':id')
  @RequirePermission('textMessages:read')
  @ApiOperation({
    summary: 'A broadcast with its status and live counts',
    description:
      'counts: its messages by status (queued, sent, delivered, failed, canceled), read live; skipped: audience contacts that got no message, by reason.',
  })
  @ApiEnvelope('broadcast', BroadcastRecordDto)
  async get(@Param('id', IdPipe) id: number) {
    return { broadcast: await this.broadcasts.get(id) };
  }

  @ApiErrors(
    { status: 409, description: 'Only draft or scheduled broadcasts can be edited' },
    { status: 503, description: 'The job queue is unreachable (with scheduledFor); nothing changed', codes: ['unavailable'] },
  )
  @Patch([':id/edit', ':id'])
  @RequirePermission('textMessages:write')
  @ApiOperation({ summary: 'Edit a draft or scheduled broadcast: changes only the supplied properties', description: CONTENT_RULES })
  @ApiEnvelope('broadcast', BroadcastRecordDto)
  async patch(@Param('id', IdPipe) id: number, @Body() dto: UpdateBroadcastDto, @CurrentPrincipal() who: Principal) {
    return { broadcast: await this.broadcasts.patch(id, dto, who) };
  }

  @ApiErrors(
    { status: 409, description: 'Only draft or scheduled broadcasts can be replaced' },
    { status: 503, description: 'The job queue is unreachable (with scheduledFor); nothing changed', codes: ['unavailable'] },
  )
  @Put([':id/edit', ':id'])
  @CreateOrReplace()
  @RequirePermission('textMessages:write')
  @ApiOperation({
    summary: 'Replace a draft or scheduled broadcast (200), or create one with a new id when the id does not exist (201)',
    description: CONTENT_RULES,
  })
  @ApiEnvelope('broadcast', BroadcastRecordDto)
  @ApiEnvelope('broadcast', BroadcastRecordDto, { status: 201 })
  async put(@Param('id', IdPipe) id: number, @Body() dto: CreateBroadcastDto, @CurrentPrincipal() who: Principal) {
    const { created, broadcast } = await this.broadcasts.put(id, dto, who);
    return putOutcome(created, { broadcast });
  }

  @ApiErrors({ status: 409, description: 'The broadcast is sending (cancel it first)' })
  @Delete([':id/delete', ':id'])
  @RequirePermission('textMessages:delete')
  @ApiOperation({ summary: 'Delete a broadcast that is not sending; its messages stay (broadcastId becomes null)' })
  @ApiEnvelope('broadcast', BroadcastRecordDto)
  async remove(@Param('id', IdPipe) id: number) {
    return { broadcast: await this.broadcasts.remove(id) };
  }

  @ApiErrors(
    { status: 409, description: 'Only draft or scheduled broadcasts can be sent (a second concurrent send gets this)' },
    { status: 503, description: 'The job queue is unreachable; nothing was sent', codes: ['unavailable'] },
  )
  @Post(':id/send')
  @HttpCode(202)
  @RequirePermission('textMessages:write')
  @ApiOperation({
    summary: 'Send a broadcast now',
    description:
      'Resolves the audience at this moment and creates one queued text message per recipient (broadcastId set), rendering the merge fields per contact; ' +
      'skips, counted by reason in `skipped`: contact_not_found, no_phone (none, or not a valid E.164 number), opted_out (a contact with the number has an sms do-not-contact entry), ' +
      'duplicate_phone (another audience contact, the lowest id, has the number), content_empty and content_too_long (rendered text over 1600 characters). ' +
      'Answers 202 with the broadcast `sending` (or `completed` when nobody is left); workers then hand the messages to the provider, each exactly once. ' +
      'Of concurrent sends one gets 202 and the others 409.',
  })
  @ApiEnvelope('broadcast', BroadcastRecordDto, { status: 202 })
  async send(@Param('id', IdPipe) id: number, @CurrentPrincipal() who: Principal) {
    return { broadcast: await this.broadcasts.send(id, who) };
  }

  @ApiErrors({ status: 409, description: 'The broadcast is completed or already canceled' })
  @Post(':id/cancel')
  @HttpCode(200)
  @RequirePermission('textMessages:write')
  @ApiOperation({
    summary: 'Cancel a draft, scheduled or sending broadcast',
    description:
      'Its queued messages that no worker has claimed yet end `canceled` (failureCode canceled) and are never handed to the provider; ' +
      'messages a worker is handing to the provider at that moment (at most one batch per lane) finish normally.',
  })
  @ApiEnvelope('broadcast', BroadcastRecordDto)
  async cancel(@Param('id', IdPipe) id: number, @CurrentPrincipal() who: Principal) {
    return { broadcast: await this.broadcasts.cancel(id, who) };
  }
}
