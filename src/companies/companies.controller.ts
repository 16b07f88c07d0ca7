import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Put, Query } from '@nestjs/common';
import { ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import { RequirePermission } from '../auth/permissions.js';
import { IdPipe } from '../common/id.pipe.js';
import { ApiEnvelope, ApiErrors } from '../common/openapi.js';
import { ApiListQuery, ApiListSearch } from '../lists/list.openapi.js';
import { ListSearchDto, searchQuery } from '../lists/list-search.dto.js';
import { CreateOrReplace, putOutcome } from '../server/put-status.js';
import type { Principal } from '../common/request.js';
import { ContactRecordDto } from '../contacts/contact.dto.js';
import { CONTACT_LIST_SPEC } from '../contacts/contact.columns.js';
import { SuccessDto } from '../campaigns/campaign.dto.js';
import { CompanyBackfillDto, CompanyRecordDto, CreateCompanyDto, UpdateCompanyDto } from './company.dto.js';
import { CompaniesService } from './companies.service.js';
import { COMPANY_LIST_SPEC } from './company.columns.js';

const CONFLICT = {
  status: 409,
  description: 'The domain, or the value of a unique-identifier custom field, belongs to another company (`details[0].existingId`)',
};
const RULES =
  'domain is normalised (lower case; scheme, www., port, path and trailing dot dropped) and unique; website gets https:// when it has no scheme; ' +
  'phone is stored in E.164 when it parses; ownerId must be an existing user (400); fields are checked against the published company fields.';

@ApiTags('companies')
@Controller('api/companies')
export class CompaniesController {
  constructor(private readonly companies: CompaniesService) {}

  @Get()
  @RequirePermission('companies:read')
  @ApiOperation({
    summary: 'List companies',
    description:
      'List parameters: search (name, domain, industry), page, limit, orderBy, orderByDir, modifiedSince; filters ownerId, industry, country; ' +
      'filter (the company properties, owner.id and fields.<alias> of the published company fields), after, count, fields.',
  })
  @ApiEnvelope('companies', CompanyRecordDto, { list: true })
  @ApiListQuery(COMPANY_LIST_SPEC)
  list(@Query() query: Record<string, unknown>) {
    return this.companies.list(query);
  }

  @Post('search')
  @HttpCode(200)
  @RequirePermission('companies:read')
  @ApiOperation({
    summary: 'Search companies: the list with its parameters as a JSON body (filter in its JSON form)',
    description: 'Answers what the GET list answers.',
  })
  @ApiListSearch('companies', CompanyRecordDto, COMPANY_LIST_SPEC)
  search(@Body() body: ListSearchDto) {
    return this.companies.list(searchQuery(body));
  }

  @ApiErrors(CONFLICT)
  @Post(['new', '/'])
  @HttpCode(201)
  @RequirePermission('companies:write')
  @ApiOperation({ summary: 'Create a company (name required; 409 when the domain is taken, with the existing id in details)', description: RULES })
  @ApiEnvelope('company', CompanyRecordDto, { status: 201 })
  async create(@Body() dto: CreateCompanyDto, @CurrentPrincipal() who: Principal) {
    return { company: await this.companies.create(dto, who) };
  }

  @Post('backfill')
  @HttpCode(202)
  @RequirePermission('companies:write')
  @ApiOperation({
    summary: "Start a backfill: companies from the contacts' company strings (202 with the run)",
    description:
      'Queues a job that creates a company for every distinct contact `company` string (trimmed, compared case-insensitively; the spelling of the ' +
      'oldest contact is the name) that no company has yet, and links every contact without a company to the company its string names. ' +
      'Idempotent: running it again creates and links nothing new. Follow the run with GET /api/companies/backfill/{runId}. ' +
      'The CLI `companies:backfill` runs the same work in the foreground.',
  })
  @ApiEnvelope('backfill', CompanyBackfillDto, { status: 202, description: '{ backfill }: the queued run' })
  async startBackfill(@CurrentPrincipal() who: Principal) {
    return { backfill: await this.companies.startBackfill(who) };
  }

  @Get('backfill/:runId')
  @RequirePermission('companies:read')
  @ApiOperation({ summary: 'A backfill run: its status (queued, running, completed, failed) and, once completed, what it created and linked' })
  @ApiEnvelope('backfill', CompanyBackfillDto)
  async getBackfill(@Param('runId', IdPipe) runId: number) {
    return { backfill: await this.companies.getBackfill(runId) };
  }

  @Get(':id')
  @RequirePermission('companies:read')
  @ApiEnvelope('company', CompanyRecordDto)
  async get(@Param('id', IdPipe) id: number) {
    return { company: await this.companies.get(id) };
  }

  @ApiErrors(CONFLICT)
  @Patch([':id/edit', ':id'])
  @RequirePermission('companies:write')
  @ApiOperation({ summary: 'Edit a company: changes only the supplied properties; 404 when the id does not exist', description: RULES })
  @ApiEnvelope('company', CompanyRecordDto)
  async patch(@Param('id', IdPipe) id: number, @Body() dto: UpdateCompanyDto, @CurrentPrincipal() who: Principal) {
    return { company: await this.companies.patch(id, dto, who) };
  }

  @ApiErrors(CONFLICT)
  @Put([':id/edit', ':id'])
  @CreateOrReplace()
  @RequirePermission('companies:write')
  @ApiOperation({
    summary: 'Replace a company (200), or create one with a new id when the id does not exist (201)',
    description: `Omitted optional properties are cleared; omitted custom fields take their default. ${RULES}`,
  })
  @ApiEnvelope('company', CompanyRecordDto)
  @ApiEnvelope('company', CompanyRecordDto, { status: 201 })
  async put(@Param('id', IdPipe) id: number, @Body() dto: CreateCompanyDto, @CurrentPrincipal() who: Principal) {
    const { created, company } = await this.companies.put(id, dto, who);
    return putOutcome(created, { company });
  }

  @Delete([':id/delete', ':id'])
  @RequirePermission('companies:delete')
  @ApiOperation({
    summary: 'Delete a company; answers the company as it was',
    description: 'Its contacts and deals are kept and detached (companyId / company_id set to null, modifiedAt updated, each with its update event).',
  })
  @ApiEnvelope('company', CompanyRecordDto)
  async remove(@Param('id', IdPipe) id: number, @CurrentPrincipal() who: Principal) {
    return { company: await this.companies.remove(id, who) };
  }

  @Post(':companyId/contact/:contactId/add')
  @HttpCode(200)
  @RequirePermission('companies:write')
  @ApiOperation({
    summary: "Make a company the contact's primary company: { success: true }",
    description:
      "Sets the contact's companyId (and its company text to the company's name); a contact of another company moves to this one. " +
      'Adding a contact that already belongs to the company is not an error. 404 when the company or the contact does not exist.',
  })
  @ApiResponse({ status: 200, type: SuccessDto, description: '{ "success": true }' })
  addContact(@Param('companyId', IdPipe) companyId: number, @Param('contactId', IdPipe) contactId: number, @CurrentPrincipal() who: Principal) {
    return this.companies.addContact(companyId, contactId, who);
  }

  @Post(':companyId/contact/:contactId/remove')
  @HttpCode(200)
  @RequirePermission('companies:write')
  @ApiOperation({
    summary: 'Remove a contact from a company: { success: true }',
    description:
      "Clears the contact's companyId (its company text is kept). 404 when the company or the contact does not exist, or when the contact does not belong to the company.",
  })
  @ApiResponse({ status: 200, type: SuccessDto, description: '{ "success": true }' })
  removeContact(@Param('companyId', IdPipe) companyId: number, @Param('contactId', IdPipe) contactId: number, @CurrentPrincipal() who: Principal) {
    return this.companies.removeContact(companyId, contactId, who);
  }

  @Post(':id/contacts/search')
  @HttpCode(200)
  @RequirePermission('companies:read', 'contacts:read')
  @ApiOperation({
    summary: "Search the company's contacts (the list parameters as a JSON body)",
    description: 'Answers what GET /api/companies/{id}/contacts answers. 404 when the company does not exist.',
  })
  @ApiListSearch('contacts', ContactRecordDto, CONTACT_LIST_SPEC)
  searchContacts(@Param('id', IdPipe) id: number, @Body() body: ListSearchDto) {
    return this.companies.listContacts(id, searchQuery(body));
  }

  @Get(':id/contacts')
  @RequirePermission('companies:read', 'contacts:read')
  @ApiOperation({
    summary: "The company's contacts (those whose companyId is this company)",
    description:
      'Same parameters and envelope as GET /api/contacts: search, page, limit, orderBy, orderByDir, modifiedSince, filter, after, count, fields. ' +
      '404 when the company does not exist.',
  })
  @ApiEnvelope('contacts', ContactRecordDto, { list: true })
  @ApiListQuery(CONTACT_LIST_SPEC)
  listContacts(@Param('id', IdPipe) id: number, @Query() query: Record<string, unknown>) {
    return this.companies.listContacts(id, query);
  }
}
