import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Put, Query } from '@nestjs/common';
import { ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import { RequirePermission } from '../auth/permissions.js';
import { IdPipe } from '../common/id.pipe.js';
import { CreateOrReplace, putOutcome } from '../server/put-status.js';
import { ApiEnvelope, ApiErrors } from '../common/openapi.js';
import { ApiListQuery, ApiListSearch } from '../lists/list.openapi.js';
import { ListSearchDto, searchQuery } from '../lists/list-search.dto.js';
import type { Principal } from '../common/request.js';
import { ContactRecordDto } from '../contacts/contact.dto.js';
import {
  CampaignMembersBatchDto,
  CampaignMembersBatchResultDto,
  CampaignRecordDto,
  CreateCampaignDto,
  ReplaceCampaignDto,
  SuccessDto,
  UpdateCampaignDto,
} from './campaign.dto.js';
import { CampaignsService } from './campaigns.service.js';
import { CAMPAIGN_LIST_SPEC } from './campaigns.repository.js';
import { CONTACT_LIST_SPEC } from '../contacts/contact.columns.js';
import { LargeJsonBody } from '../server/large-json-body.decorator.js';

@ApiTags('campaigns')
@Controller('api/campaigns')
export class CampaignsController {
  constructor(private readonly campaigns: CampaignsService) {}

  @Get()
  @RequirePermission('campaigns:read')
  @ApiOperation({
    summary: 'List campaigns',
    description: 'List parameters: search (name, description, type), page, limit, orderBy, orderByDir; filter status (active, inactive, completed).',
  })
  @ApiEnvelope('campaigns', CampaignRecordDto, { list: true })
  @ApiListQuery(CAMPAIGN_LIST_SPEC)
  list(@Query() query: Record<string, unknown>) {
    return this.campaigns.list(query);
  }

  @Post('search')
  @HttpCode(200)
  @RequirePermission('campaigns:read')
  @ApiOperation({
    summary: 'Search campaigns: the list with its parameters as a JSON body (filter in its JSON form)',
    description: 'Answers what the GET list answers.',
  })
  @ApiListSearch('campaigns', CampaignRecordDto, CAMPAIGN_LIST_SPEC)
  search(@Body() body: ListSearchDto) {
    return this.campaigns.list(searchQuery(body));
  }

  @Post(['new', '/'])
  @HttpCode(201)
  @RequirePermission('campaigns:write')
  @ApiOperation({ summary: 'Create a campaign (status active or inactive; endDate before startDate is a 400)' })
  @ApiEnvelope('campaign', CampaignRecordDto, { status: 201 })
  async create(@Body() dto: CreateCampaignDto, @CurrentPrincipal() who: Principal) {
    return { campaign: await this.campaigns.create(dto, who) };
  }

  @Get(':id')
  @RequirePermission('campaigns:read')
  @ApiEnvelope('campaign', CampaignRecordDto)
  async get(@Param('id', IdPipe) id: number) {
    return { campaign: await this.campaigns.get(id) };
  }

  @Patch([':id/edit', ':id'])
  @RequirePermission('campaigns:write')
  @ApiOperation({
    summary: 'Edit a campaign: changes only the supplied properties; 404 when the id does not exist',
    description:
      'status may be active, inactive or completed. A date changed alone is checked against the stored other date. ' +
      'A campaign set back to active or inactive while its endDate has passed is completed again by the periodic job.',
  })
  @ApiEnvelope('campaign', CampaignRecordDto)
  async patch(@Param('id', IdPipe) id: number, @Body() dto: UpdateCampaignDto, @CurrentPrincipal() who: Principal) {
    return { campaign: await this.campaigns.patch(id, dto, who) };
  }

  @Put([':id/edit', ':id'])
  @CreateOrReplace()
  @RequirePermission('campaigns:write')
  @ApiOperation({
    summary: 'Replace a campaign (200), or create one with a new id when the id does not exist (201)',
    description: 'Omitted optional properties are reset (status to active). A PUT that creates takes status active or inactive only.',
  })
  @ApiEnvelope('campaign', CampaignRecordDto)
  @ApiEnvelope('campaign', CampaignRecordDto, { status: 201 })
  async put(@Param('id', IdPipe) id: number, @Body() dto: ReplaceCampaignDto, @CurrentPrincipal() who: Principal) {
    const { created, campaign } = await this.campaigns.put(id, dto, who);
    return putOutcome(created, { campaign });
  }

  @Delete([':id/delete', ':id'])
  @RequirePermission('campaigns:delete')
  @ApiOperation({
    summary: 'Delete a campaign, with its contact memberships; answers the campaign as it was',
    description: 'The member contacts themselves are not deleted; only their membership in this campaign is (ON DELETE CASCADE).',
  })
  @ApiEnvelope('campaign', CampaignRecordDto)
  async remove(@Param('id', IdPipe) id: number) {
    return { campaign: await this.campaigns.remove(id) };
  }

  @Post(':campaignId/contact/:contactId/add')
  @HttpCode(200)
  @RequirePermission('campaigns:write')
  @ApiOperation({
    summary: 'Add a contact to a campaign: { success: true }',
    description: 'Adding a contact that is already a member is not an error (idempotent). 404 when the campaign or the contact does not exist.',
  })
  @ApiResponse({ status: 200, type: SuccessDto, description: '{ "success": true }' })
  addContact(@Param('campaignId', IdPipe) campaignId: number, @Param('contactId', IdPipe) contactId: number) {
    return this.campaigns.addContact(campaignId, contactId);
  }

  @Post(':campaignId/contact/:contactId/remove')
  @HttpCode(200)
  @RequirePermission('campaigns:write')
  @ApiOperation({
    summary: 'Remove a contact from a campaign: { success: true }',
    description: '404 when the campaign or the contact does not exist, or when the contact is not a member.',
  })
  @ApiResponse({ status: 200, type: SuccessDto, description: '{ "success": true }' })
  removeContact(@Param('campaignId', IdPipe) campaignId: number, @Param('contactId', IdPipe) contactId: number) {
    return this.campaigns.removeContact(campaignId, contactId);
  }

  @Post(':id/contacts/search')
  @HttpCode(200)
  @RequirePermission('campaigns:read', 'contacts:read')
  @ApiOperation({
    summary: "Search the campaign's member contacts (the list parameters as a JSON body)",
    description: 'Answers what GET /api/campaigns/{id}/contacts answers. 404 when the campaign does not exist.',
  })
  @ApiListSearch('contacts', ContactRecordDto, CONTACT_LIST_SPEC)
  searchContacts(@Param('id', IdPipe) id: number, @Body() body: ListSearchDto) {
    return this.campaigns.listContacts(id, searchQuery(body));
  }

  @LargeJsonBody()
  @Post(':id/contacts/batch')
  @HttpCode(200)
  @RequirePermission('campaigns:write')
  @ApiOperation({
    summary: 'Add and remove up to 10,000 contacts each: { added, alreadyMember, removed, notMember, notFound }',
    description:
      'One set-based statement: each membership created or removed writes its own campaign.contact_added / campaign.contact_removed event; ' +
      'contacts already members (add) or not members (remove) are counted, unknown contact ids listed in `notFound`. An id in both lists is a 400; ' +
      'more than 10,000 ids in a list is a 413. 404 when the campaign does not exist (nothing changes).',
  })
  @ApiResponse({ status: 200, type: CampaignMembersBatchResultDto })
  @ApiErrors({ status: 413, description: 'More than 10,000 ids in add or in remove, or a body over BATCH_BODY_LIMIT_BYTES' })
  batchContacts(@Param('id', IdPipe) id: number, @Body() dto: CampaignMembersBatchDto) {
    return this.campaigns.batchContacts(id, dto);
  }

  @Get(':id/contacts')
  @RequirePermission('campaigns:read', 'contacts:read')
  @ApiOperation({
    summary: "The campaign's member contacts",
    description: 'Same parameters and envelope as GET /api/contacts: search, page, limit, orderBy, orderByDir. 404 when the campaign does not exist.',
  })
  @ApiEnvelope('contacts', ContactRecordDto, { list: true })
  @ApiListQuery(CONTACT_LIST_SPEC)
  listContacts(@Param('id', IdPipe) id: number, @Query() query: Record<string, unknown>) {
    return this.campaigns.listContacts(id, query);
  }
}
