import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Put, Query } from '@nestjs/common';
import { ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import { LargeJsonBody } from '../server/large-json-body.decorator.js';
import { RequirePermission } from '../auth/permissions.js';
import { IdPipe } from '../common/id.pipe.js';
import { ListSearchDto, searchQuery } from '../lists/list-search.dto.js';
import { ApiEnvelope, ApiErrors } from '../common/openapi.js';
import { ApiListQuery, ApiListSearch } from '../lists/list.openapi.js';
import { CreateOrReplace, putOutcome } from '../server/put-status.js';
import type { Principal } from '../common/request.js';
import { ContactRecordDto } from '../contacts/contact.dto.js';
import { CONTACT_LIST_SPEC } from '../contacts/contact.columns.js';
import {
  ContactSegmentsDto,
  CreateSegmentDto,
  SegmentCountDto,
  SegmentMembersBatchDto,
  SegmentMembersBatchResultDto,
  SegmentPreviewDto,
  SegmentPreviewRecordDto,
  SegmentRecordDto,
  UpdateSegmentDto,
} from './segment.dto.js';
import { SegmentsService } from './segments.service.js';
import { SEGMENT_LIST_SPEC } from './segments.repository.js';

const RULES =
  'type dynamic takes a filter over contacts (required; the filter language of GET /api/contacts, every field but segment.id; a 400 names what is wrong) and its ' +
  'members are the contacts it matches: built in the background after the segment is created or its filter changes (membership.status building, then ready), ' +
  'then kept fresh as contacts change (within seconds). type static takes no filter; its members are added with POST /api/segments/{id}/contacts/batch.';

@ApiTags('segments')
@Controller('api/segments')
export class SegmentsController {
  constructor(private readonly segments: SegmentsService) {}

  @Get()
  @RequirePermission('segments:read')
  @ApiOperation({
    summary: 'List segments (each with its membership status and member count)',
    description: 'List parameters: search (name, description), page, limit, orderBy, orderByDir, modifiedSince; filter type; filter, after, count, fields.',
  })
  @ApiEnvelope('segments', SegmentRecordDto, { list: true })
  @ApiListQuery(SEGMENT_LIST_SPEC)
  list(@Query() query: Record<string, unknown>) {
    return this.segments.list(query);
  }

  @Post('search')
  @HttpCode(200)
  @RequirePermission('segments:read')
  @ApiOperation({ summary: 'Search segments: the list with its parameters as a JSON body', description: 'Answers what the GET list answers.' })
  @ApiListSearch('segments', SegmentRecordDto, SEGMENT_LIST_SPEC)
  search(@Body() body: ListSearchDto) {
    return this.segments.list(searchQuery(body));
  }

  @Post('preview')
  @HttpCode(200)
  @RequirePermission('segments:read', 'contacts:read')
  @ApiOperation({
    summary: 'Preview a segment: how many contacts a filter matches now, and the first ten (by id)',
    description:
      "Nothing is saved. The filter takes what a segment's filter takes (the `filter` of GET /api/contacts without segment.id; a 400 names the allowed fields or operators).",
  })
  @ApiResponse({ status: 200, type: SegmentPreviewRecordDto, description: '{ count, sample }' })
  preview(@Body() dto: SegmentPreviewDto) {
    return this.segments.preview(dto.filter);
  }

  @Post(['new', '/'])
  @HttpCode(201)
  @RequirePermission('segments:write')
  @ApiOperation({ summary: 'Create a segment (name and type required; a dynamic one starts building its members)', description: RULES })
  @ApiEnvelope('segment', SegmentRecordDto, { status: 201 })
  async create(@Body() dto: CreateSegmentDto, @CurrentPrincipal() who: Principal) {
    return { segment: await this.segments.create(dto, who) };
  }

  @Get(':id')
  @RequirePermission('segments:read')
  @ApiEnvelope('segment', SegmentRecordDto)
  async get(@Param('id', IdPipe) id: number) {
    return { segment: await this.segments.get(id) };
  }

  @Patch([':id/edit', ':id'])
  @RequirePermission('segments:write')
  @ApiOperation({
    summary: 'Edit a segment: changes only the supplied properties; a changed filter rebuilds the members',
    description: `${RULES} Making a static segment dynamic needs a filter; making a dynamic segment static keeps its current members and drops the filter.`,
  })
  @ApiEnvelope('segment', SegmentRecordDto)
  async patch(@Param('id', IdPipe) id: number, @Body() dto: UpdateSegmentDto, @CurrentPrincipal() who: Principal) {
    return { segment: await this.segments.patch(id, dto, who) };
  }

  @Put([':id/edit', ':id'])
  @CreateOrReplace()
  @RequirePermission('segments:write')
  @ApiOperation({
    summary: 'Replace a segment (200), or create one with a new id when the id does not exist (201)',
    description: `Omitted optional properties are cleared. ${RULES}`,
  })
  @ApiEnvelope('segment', SegmentRecordDto)
  @ApiEnvelope('segment', SegmentRecordDto, { status: 201 })
  async put(@Param('id', IdPipe) id: number, @Body() dto: CreateSegmentDto, @CurrentPrincipal() who: Principal) {
    const { created, segment } = await this.segments.put(id, dto, who);
    return putOutcome(created, { segment });
  }

  @Delete([':id/delete', ':id'])
  @RequirePermission('segments:delete')
  @ApiOperation({
    summary: 'Delete a segment; answers the segment as it was',
    description:
      'Its memberships go with it (the contacts stay). Campaigns that mirrored it are detached (segmentId null, campaign.updated) and keep their members.',
  })
  @ApiEnvelope('segment', SegmentRecordDto)
  async remove(@Param('id', IdPipe) id: number, @CurrentPrincipal() who: Principal) {
    return { segment: await this.segments.remove(id, who) };
  }

  @Post(':id/rebuild')
  @HttpCode(202)
  @RequirePermission('segments:write')
  @ApiOperation({
    summary: "Rebuild a dynamic segment's members from its filter (202 with the segment, building)",
    description:
      'Members are kept fresh without it; a rebuild re-reads every contact, e.g. for a filter on relative times (createdAt[gte]:now-7d), which is ' +
      're-evaluated only for contacts that change, or after a failed build. 409 for a static segment.',
  })
  @ApiErrors({ status: 409, description: 'The segment is static' })
  @ApiEnvelope('segment', SegmentRecordDto, { status: 202 })
  async rebuild(@Param('id', IdPipe) id: number) {
    return { segment: await this.segments.requestRebuild(id) };
  }

  @Get(':id/count')
  @RequirePermission('segments:read')
  @ApiOperation({ summary: "The segment's member count now, with its membership status" })
  @ApiResponse({ status: 200, type: SegmentCountDto })
  count(@Param('id', IdPipe) id: number) {
    return this.segments.count(id);
  }

  @Post(':id/contacts/batch')
  @LargeJsonBody()
  @HttpCode(200)
  @RequirePermission('segments:write')
  @ApiOperation({
    summary: 'Add and remove up to 10,000 contacts each to a static segment: { added, alreadyMember, removed, notMember, notFound }',
    description:
      'One set-based statement. Contacts already members (add) or not members (remove) are counted, unknown contact ids listed in `notFound`. ' +
      'An id in both lists is a 400; more than 10,000 ids in a list is a 413; a dynamic segment answers 409 (its members follow its filter). ' +
      '404 when the segment does not exist. Campaigns that mirror the segment follow.',
  })
  @ApiResponse({ status: 200, type: SegmentMembersBatchResultDto })
  @ApiErrors(
    { status: 409, description: 'The segment is dynamic: its members follow its filter' },
    { status: 413, description: 'More than 10,000 ids in add or in remove, or a body over BATCH_BODY_LIMIT_BYTES' },
  )
  batchContacts(@Param('id', IdPipe) id: number, @Body() dto: SegmentMembersBatchDto) {
    return this.segments.batchContacts(id, dto);
  }

  @Post(':id/contacts/search')
  @HttpCode(200)
  @RequirePermission('segments:read', 'contacts:read')
  @ApiOperation({
    summary: "Search the segment's member contacts (the list parameters as a JSON body)",
    description: 'Answers what GET /api/segments/{id}/contacts answers. 404 when the segment does not exist.',
  })
  @ApiListSearch('contacts', ContactRecordDto, CONTACT_LIST_SPEC)
  searchContacts(@Param('id', IdPipe) id: number, @Body() body: ListSearchDto) {
    return this.segments.listContacts(id, searchQuery(body));
  }

  @Get(':id/contacts')
  @RequirePermission('segments:read', 'contacts:read')
  @ApiOperation({
    summary: "The segment's member contacts",
    description:
      'Same parameters and envelope as GET /api/contacts: search, page, limit, orderBy, orderByDir, modifiedSince (a member counts as changed when it joined), ' +
      'filter, after, count, fields. 404 when the segment does not exist.',
  })
  @ApiEnvelope('contacts', ContactRecordDto, { list: true })
  @ApiListQuery(CONTACT_LIST_SPEC)
  listContacts(@Param('id', IdPipe) id: number, @Query() query: Record<string, unknown>) {
    return this.segments.listContacts(id, query);
  }
}

@ApiTags('segments')
@Controller('api/contacts')
export class ContactSegmentsController {
  constructor(private readonly segments: SegmentsService) {}

  @Get(':id/segments')
  @RequirePermission('segments:read')
  @ApiOperation({
    summary: 'The segments a contact belongs to (by segment id), with when it joined each',
    description: 'Takes no query parameters (400 otherwise). 404 when the contact does not exist.',
  })
  @ApiResponse({ status: 200, type: ContactSegmentsDto })
  contactSegments(@Param('id', IdPipe) id: number, @Query() query: Record<string, unknown>) {
    return this.segments.contactSegments(id, query);
  }
}
