import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { RequirePermission } from '../auth/permissions.js';
import { IdPipe } from '../common/id.pipe.js';
import { ApiEnvelope, ApiErrors } from '../common/openapi.js';
import { ApiListQuery, ApiListSearch } from '../lists/list.openapi.js';
import { ListSearchDto, searchQuery } from '../lists/list-search.dto.js';
import { LargeJsonBody } from '../server/large-json-body.decorator.js';
import { EnrollmentsService } from './enrollments.service.js';
import { ENROLLMENT_LIST_SPEC } from './enrollments.repository.js';
import { ContactWorkflowsDto, EnrolContactsDto, EnrolResultDto, EnrollmentDetailDto, EnrollmentRecordDto } from './workflow.dto.js';

@ApiTags('workflows')
@Controller('api/workflows')
export class EnrollmentsController {
  constructor(private readonly enrollments: EnrollmentsService) {}

  @Post(':id/enrollments')
  @LargeJsonBody()
  @HttpCode(200)
  @RequirePermission('workflows:write')
  @ApiOperation({
    summary: 'Enrol up to 10,000 contacts by hand in an active workflow',
    description:
      'One set-based statement. The reenrollment setting decides who enters: never (once per contact), afterExit (again once the previous enrollment ended), ' +
      'always (a running enrollment exits and a new one starts). Contacts refused are listed in `refused` with their enrollment; when every existing ' +
      'contact asked for is refused the answer is a 409 naming the enrollments. Unknown ids are listed in `notFound`. 409 when the workflow is not active.',
  })
  @ApiResponse({ status: 200, type: EnrolResultDto })
  @ApiErrors(
    { status: 409, description: 'The workflow is not active, or the reenrollment setting refuses every contact (details name their enrollments)' },
    { status: 413, description: 'More than 10,000 contact ids' },
  )
  enrol(@Param('id', IdPipe) id: number, @Body() dto: EnrolContactsDto) {
    return this.enrollments.enrolByHand(id, dto.contactIds);
  }

  @Get(':id/enrollments')
  @RequirePermission('workflows:read')
  @ApiOperation({
    summary: "The workflow's enrollments",
    description:
      'List parameters: page, limit, orderBy, orderByDir; filters status, contactId, stepKey; filter, after (cursors), count, fields. 404 when the workflow does not exist.',
  })
  @ApiEnvelope('enrollments', EnrollmentRecordDto, { list: true })
  @ApiListQuery(ENROLLMENT_LIST_SPEC)
  list(@Param('id', IdPipe) id: number, @Query() query: Record<string, unknown>) {
    return this.enrollments.list(id, query);
  }

  @Post(':id/enrollments/search')
  @HttpCode(200)
  @RequirePermission('workflows:read')
  @ApiOperation({
    summary: "Search a workflow's enrollments: the list with its parameters as a JSON body (filter in its JSON form)",
    description: 'Answers what the GET enrollments list answers. 404 when the workflow does not exist.',
  })
  @ApiListSearch('enrollments', EnrollmentRecordDto, ENROLLMENT_LIST_SPEC)
  search(@Param('id', IdPipe) id: number, @Body() body: ListSearchDto) {
    return this.enrollments.list(id, searchQuery(body));
  }

  @Get(':id/enrollments/:eid')
  @RequirePermission('workflows:read')
  @ApiOperation({ summary: 'One enrollment with its step history' })
  @ApiEnvelope('enrollment', EnrollmentDetailDto)
  async get(@Param('id', IdPipe) id: number, @Param('eid', IdPipe) eid: number) {
    return { enrollment: await this.enrollments.get(id, eid) };
  }

  @Delete(':id/enrollments/:eid')
  @RequirePermission('workflows:write')
  @ApiOperation({ summary: 'Exit one running enrollment (workflow.exited); answers it', description: '409 when it already ended.' })
  @ApiErrors({ status: 409, description: 'The enrollment already ended' })
  @ApiEnvelope('enrollment', EnrollmentRecordDto)
  async exit(@Param('id', IdPipe) id: number, @Param('eid', IdPipe) eid: number) {
    return { enrollment: await this.enrollments.exit(id, eid) };
  }
}

@ApiTags('workflows')
@Controller('api/contacts')
export class ContactWorkflowsController {
  constructor(private readonly enrollments: EnrollmentsService) {}

  @Get(':id/workflows')
  @RequirePermission('workflows:read', 'contacts:read')
  @ApiOperation({
    summary: "The contact's enrollments in every workflow, with each workflow's name",
    description: 'Takes no query parameters (400 otherwise). 404 when the contact does not exist.',
  })
  @ApiResponse({ status: 200, type: ContactWorkflowsDto })
  ofContact(@Param('id', IdPipe) id: number, @Query() query: Record<string, unknown>) {
    return this.enrollments.ofContact(id, query);
  }
}
