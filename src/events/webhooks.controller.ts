import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Put, Query } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import { RequirePermission } from '../auth/permissions.js';
import { IdPipe } from '../common/id.pipe.js';
import { CreateOrReplace, putOutcome } from '../common/put-status.js';
import { ApiEnvelope, ApiErrors, ApiListQuery, ApiListSearch } from '../common/openapi.js';
import { ListSearchDto, searchQuery } from '../common/list-search.dto.js';
import type { Principal } from '../common/request.js';
import { CreateWebhookDto, UpdateWebhookDto, WebhookDeliveryDto, WebhookRecordDto, WebhookTestResultDto } from './webhook.dto.js';
import { WEBHOOK_LIST_SPEC, WebhooksService } from './webhooks.service.js';

@ApiTags('webhooks')
@Controller('api/webhooks')
export class WebhooksController {
  constructor(private readonly webhooks: WebhooksService) {}

  @Get()
  @RequirePermission('webhooks:read')
  @ApiOperation({ summary: 'List webhooks', description: 'List parameters: search (url, description), page, limit, orderBy, orderByDir; filter isActive.' })
  @ApiEnvelope('webhooks', WebhookRecordDto, { list: true })
  @ApiListQuery(WEBHOOK_LIST_SPEC)
  list(@Query() query: Record<string, unknown>) {
    return this.webhooks.list(query);
  }

  @Post('search')
  @HttpCode(200)
  @RequirePermission('webhooks:read')
  @ApiOperation({
    summary: 'Search webhooks: the list with its parameters as a JSON body (filter in its JSON form)',
    description: 'Answers what the GET list answers.',
  })
  @ApiListSearch('webhooks', WebhookRecordDto, WEBHOOK_LIST_SPEC)
  search(@Body() body: ListSearchDto) {
    return this.webhooks.list(searchQuery(body));
  }

  @Post(['new', '/'])
  @HttpCode(201)
  @RequirePermission('webhooks:write')
  @ApiOperation({
    summary: 'Create a webhook; the answer holds its signing secret, shown only this once',
    description:
      'url: https (http only with WEBHOOK_ALLOW_HTTP=true), not resolving to a loopback, link-local or private address (unless WEBHOOK_ALLOW_PRIVATE=true). events: types from the catalogue, or ["*"]. 400 names the allowed types.',
  })
  @ApiEnvelope('webhook', WebhookRecordDto, { status: 201 })
  async create(@Body() dto: CreateWebhookDto, @CurrentPrincipal() who: Principal) {
    return { webhook: await this.webhooks.create(dto, who) };
  }

  @Get(':id')
  @RequirePermission('webhooks:read')
  @ApiOperation({ summary: 'Get a webhook (without its secret)' })
  @ApiEnvelope('webhook', WebhookRecordDto)
  async get(@Param('id', IdPipe) id: number) {
    return { webhook: await this.webhooks.get(id) };
  }

  @Patch([':id/edit', ':id'])
  @RequirePermission('webhooks:write')
  @ApiOperation({
    summary: 'Edit a webhook: changes only the supplied properties',
    description: 'isActive: true on a disabled webhook re-enables it; with requeueDead: true its dead deliveries are queued again.',
  })
  @ApiEnvelope('webhook', WebhookRecordDto)
  async patch(@Param('id', IdPipe) id: number, @Body() dto: UpdateWebhookDto, @CurrentPrincipal() who: Principal) {
    return { webhook: await this.webhooks.patch(id, dto, who) };
  }

  @Put([':id/edit', ':id'])
  @CreateOrReplace()
  @RequirePermission('webhooks:write')
  @ApiOperation({
    summary: 'Replace a webhook (200), or create one when the id does not exist (201, with a new id and its secret, shown this once)',
    description:
      'Full replace: url and events are required; omitted description becomes null and omitted isActive true. The signing secret is kept on a replace. Activating a disabled webhook restarts its failure clock.',
  })
  @ApiEnvelope('webhook', WebhookRecordDto)
  @ApiEnvelope('webhook', WebhookRecordDto, { status: 201 })
  async replace(@Param('id', IdPipe) id: number, @Body() dto: CreateWebhookDto, @CurrentPrincipal() who: Principal) {
    const { created, webhook } = await this.webhooks.replace(id, dto, who);
    return putOutcome(created, { webhook });
  }

  @Delete([':id/delete', ':id'])
  @RequirePermission('webhooks:delete')
  @ApiOperation({ summary: 'Delete a webhook and its deliveries; answers the webhook as it was' })
  @ApiEnvelope('webhook', WebhookRecordDto)
  async remove(@Param('id', IdPipe) id: number) {
    return { webhook: await this.webhooks.remove(id) };
  }

  @Post(':id/rotate-secret')
  @HttpCode(200)
  @RequirePermission('webhooks:write')
  @ApiOperation({
    summary: 'Give a webhook a new signing secret (answered once); the previous one keeps signing beside it for 24 h',
    description: 'While both sign, Webhook-Signature holds both signatures, space-separated.',
  })
  @ApiEnvelope('webhook', WebhookRecordDto)
  async rotate(@Param('id', IdPipe) id: number, @CurrentPrincipal() who: Principal) {
    return { webhook: await this.webhooks.rotateSecret(id, who) };
  }

  @Post(':id/test')
  @HttpCode(200)
  @RequirePermission('webhooks:write')
  @ApiOperation({ summary: 'Send a signed webhook.test event now; answers the receiver status, duration and the start of its answer' })
  @ApiEnvelope('test', WebhookTestResultDto)
  async test(@Param('id', IdPipe) id: number) {
    return { test: await this.webhooks.test(id) };
  }

  @Get(':id/deliveries')
  @RequirePermission('webhooks:read')
  @ApiOperation({
    summary: "A webhook's deliveries, newest first, with their attempts",
    description: 'Parameters: status (pending, succeeded, failed, dead), page, limit (1..100).',
  })
  @ApiEnvelope('deliveries', WebhookDeliveryDto, { list: true })
  listDeliveries(@Param('id', IdPipe) id: number, @Query() query: Record<string, unknown>) {
    return this.webhooks.listDeliveries(id, query);
  }

  @ApiErrors({ status: 409, description: 'The webhook is not active' })
  @Post(':id/deliveries/:deliveryId/retry')
  @HttpCode(200)
  @RequirePermission('webhooks:write')
  @ApiOperation({ summary: 'Queue a delivery again now, whatever its status, with a fresh 72 h retry window' })
  @ApiEnvelope('delivery', WebhookDeliveryDto)
  async retry(@Param('id', IdPipe) id: number, @Param('deliveryId', IdPipe) deliveryId: number) {
    return { delivery: await this.webhooks.retryDelivery(id, deliveryId) };
  }
}
