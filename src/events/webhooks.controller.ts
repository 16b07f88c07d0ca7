import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Put, Query } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import { RequirePermission } from '../auth/permissions.js';
import { IdPipe } from '../common/id.pipe.js';
import { AnswersSecret } from '../idempotency/idempotency.decorators.js';
import { CreateOrReplace, putOutcome } from '../server/put-status.js';
import { ApiEnvelope, ApiErrors } from '../common/openapi.js';
import { ApiListQuery, ApiListSearch } from '../lists/list.openapi.js';
import { ListSearchDto, searchQuery } from '../lists/list-search.dto.js';
import type { Principal } from '../common/request.js';
import { CreateWebhookDto, UpdateWebhookDto, WebhookDeliveryDto, WebhookRecordDto, WebhookTestResultDto } from './webhook.dto.js';
import { WEBHOOK_DELIVERY_LIST_SPEC } from './webhook-deliveries.repository.js';
import { WebhooksService } from './webhooks.service.js';
import { WEBHOOK_LIST_SPEC } from './webhooks.repository.js';

const SUBSCRIBE_RULE =
  "A webhook's events carry their records, so subscribing to a resource's events needs that resource's read permission (contact.* needs contacts:read, " +
  '"*" every resource\'s read permission): 403 `forbidden` naming each one missing.';

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
  @AnswersSecret('webhook.secret')
  @ApiOperation({
    summary: 'Create a webhook; the answer holds its signing secret, shown only this once (sent with Cache-Control: no-store)',
    description:
      'url: https (http only with WEBHOOK_ALLOW_HTTP=true), not resolving to a loopback, link-local or private address (unless WEBHOOK_ALLOW_PRIVATE=true). events: types from the catalogue, or ["*"]. 400 names the allowed types. ' +
      `${SUBSCRIBE_RULE} A retry with the same Idempotency-Key (by the same token) answers the webhook without \`secret\`, with a \`notice\` saying it was shown only once.`,
  })
  @ApiEnvelope('webhook', WebhookRecordDto, { status: 201, secretNotice: true })
  @ApiErrors({ status: 403, description: "The token lacks webhooks:write, or the read permission of a subscribed event's resource" })
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
    description: `isActive: true on a disabled webhook re-enables it; with requeueDead: true its dead deliveries are queued again. ${SUBSCRIBE_RULE}`,
  })
  @ApiEnvelope('webhook', WebhookRecordDto)
  @ApiErrors({ status: 403, description: "The token lacks webhooks:write, or the read permission of a subscribed event's resource" })
  async patch(@Param('id', IdPipe) id: number, @Body() dto: UpdateWebhookDto, @CurrentPrincipal() who: Principal) {
    return { webhook: await this.webhooks.patch(id, dto, who) };
  }

  @Put([':id/edit', ':id'])
  @CreateOrReplace()
  @RequirePermission('webhooks:write')
  @AnswersSecret('webhook.secret')
  @ApiOperation({
    summary: 'Replace a webhook (200), or create one when the id does not exist (201, with a new id and its secret, shown this once)',
    description:
      'Full replace: url and events are required; omitted description becomes null and omitted isActive true. The signing secret is kept on a replace. Activating a disabled webhook restarts its failure clock. ' +
      `Sent with Cache-Control: no-store. ${SUBSCRIBE_RULE}`,
  })
  @ApiEnvelope('webhook', WebhookRecordDto)
  @ApiEnvelope('webhook', WebhookRecordDto, { status: 201, secretNotice: true })
  @ApiErrors({ status: 403, description: "The token lacks webhooks:write, or the read permission of a subscribed event's resource" })
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
  @AnswersSecret('webhook.secret')
  @ApiOperation({
    summary: 'Give a webhook a new signing secret (answered once); the previous one keeps signing beside it for 24 h',
    description:
      'While both sign, Webhook-Signature holds both signatures, space-separated. Sent with Cache-Control: no-store; a retry with the same ' +
      'Idempotency-Key (by the same token) answers the webhook without `secret`, with a `notice` saying it was shown only once.',
  })
  @ApiEnvelope('webhook', WebhookRecordDto, { secretNotice: true })
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
    summary: "A webhook's deliveries, newest first by default, with their attempts",
    description:
      'List parameters: search (event type, event id, last error), page, limit, orderBy, orderByDir (default desc), filter, fields, after, count; filter status. ' +
      "A cursor (after) is tied to this webhook's list: one from another webhook's deliveries is a 400.",
  })
  @ApiEnvelope('deliveries', WebhookDeliveryDto, { list: true })
  @ApiListQuery(WEBHOOK_DELIVERY_LIST_SPEC)
  listDeliveries(@Param('id', IdPipe) id: number, @Query() query: Record<string, unknown>) {
    return this.webhooks.listDeliveries(id, query);
  }

  @Post(':id/deliveries/search')
  @HttpCode(200)
  @RequirePermission('webhooks:read')
  @ApiOperation({
    summary: "Search a webhook's deliveries: the list with its parameters as a JSON body (filter in its JSON form)",
    description: 'Answers what the GET deliveries list answers (newest first by default).',
  })
  @ApiListSearch('deliveries', WebhookDeliveryDto, WEBHOOK_DELIVERY_LIST_SPEC)
  searchDeliveries(@Param('id', IdPipe) id: number, @Body() body: ListSearchDto) {
    return this.webhooks.listDeliveries(id, searchQuery(body));
  }

  @Post(':id/deliveries/:deliveryId/retry')
  @HttpCode(200)
  @RequirePermission('webhooks:write')
  @ApiOperation({ summary: 'Queue a delivery again now, whatever its status, with a fresh 72 h retry window' })
  @ApiEnvelope('delivery', WebhookDeliveryDto)
  async retry(@Param('id', IdPipe) id: number, @Param('deliveryId', IdPipe) deliveryId: number) {
    return { delivery: await this.webhooks.retryDelivery(id, deliveryId) };
  }
}
