import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Put, Query } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import { RequirePermission } from '../auth/permissions.js';
import { IdPipe } from '../common/id.pipe.js';
import { CreateOrReplace, putOutcome } from '../server/put-status.js';
import { ApiEnvelope, ApiErrors } from '../common/openapi.js';
import { ApiListQuery, ApiListSearch } from '../lists/list.openapi.js';
import { ListSearchDto, searchQuery } from '../lists/list-search.dto.js';
import type { Principal } from '../common/request.js';
import { CategoryRecordDto, CreateCategoryDto, UpdateCategoryDto } from './category.dto.js';
import { CategoriesService } from './categories.service.js';
import { CATEGORY_LIST_SPEC } from './categories.repository.js';

@ApiTags('categories')
@Controller('api/categories')
export class CategoriesController {
  constructor(private readonly categories: CategoriesService) {}

  @Get()
  @RequirePermission('categories:read')
  @ApiOperation({
    summary: 'List categories',
    description: 'List parameters: search (title, alias, description), page, limit, orderBy, orderByDir; filter bundle.',
  })
  @ApiEnvelope('categories', CategoryRecordDto, { list: true })
  @ApiListQuery(CATEGORY_LIST_SPEC)
  list(@Query() query: Record<string, unknown>) {
    return this.categories.list(query);
  }

  @Post('search')
  @HttpCode(200)
  @RequirePermission('categories:read')
  @ApiOperation({
    summary: 'Search categories: the list with its parameters as a JSON body (filter in its JSON form)',
    description: 'Answers what the GET list answers.',
  })
  @ApiListSearch('categories', CategoryRecordDto, CATEGORY_LIST_SPEC)
  search(@Body() body: ListSearchDto) {
    return this.categories.list(searchQuery(body));
  }

  @ApiErrors({ status: 409, description: 'The alias is taken in the bundle (`details[0].existingId`)' })
  @Post(['new', '/'])
  @HttpCode(201)
  @RequirePermission('categories:write')
  @ApiOperation({ summary: 'Create a category', description: 'title and bundle are required. 409 when a given alias is taken in the bundle.' })
  @ApiEnvelope('category', CategoryRecordDto, { status: 201 })
  async create(@Body() dto: CreateCategoryDto, @CurrentPrincipal() who: Principal) {
    return { category: await this.categories.create(dto, who) };
  }

  @Get(':id')
  @RequirePermission('categories:read')
  @ApiOperation({ summary: 'Get a category' })
  @ApiEnvelope('category', CategoryRecordDto)
  async get(@Param('id', IdPipe) id: number) {
    return { category: await this.categories.get(id) };
  }

  @ApiErrors({ status: 409, description: 'The alias is taken in the bundle (`details[0].existingId`)' })
  @Patch([':id/edit', ':id'])
  @RequirePermission('categories:write')
  @ApiOperation({ summary: 'Edit a category: changes only the supplied properties; 404 when the id does not exist' })
  @ApiEnvelope('category', CategoryRecordDto)
  async patch(@Param('id', IdPipe) id: number, @Body() dto: UpdateCategoryDto, @CurrentPrincipal() who: Principal) {
    return { category: await this.categories.patch(id, dto, who) };
  }

  @ApiErrors({ status: 409, description: 'The alias is taken in the bundle (`details[0].existingId`)' })
  @Put([':id/edit', ':id'])
  @CreateOrReplace()
  @RequirePermission('categories:write')
  @ApiOperation({
    summary: 'Replace a category (200), or create one with a new id when the id does not exist (201)',
    description: 'Omitted optional properties reset to their defaults, except alias, which the category keeps when omitted.',
  })
  @ApiEnvelope('category', CategoryRecordDto)
  @ApiEnvelope('category', CategoryRecordDto, { status: 201 })
  async put(@Param('id', IdPipe) id: number, @Body() dto: CreateCategoryDto, @CurrentPrincipal() who: Principal) {
    const { created, category } = await this.categories.put(id, dto, who);
    return putOutcome(created, { category });
  }

  @Delete([':id/delete', ':id'])
  @RequirePermission('categories:delete')
  @ApiOperation({
    summary: 'Delete a category; answers the category as it was',
    description: 'Assets that referenced the category are kept and get `category: null` (the reference is cleared, not cascaded).',
  })
  @ApiEnvelope('category', CategoryRecordDto)
  async remove(@Param('id', IdPipe) id: number) {
    return { category: await this.categories.remove(id) };
  }
}
