import { Body, Controller, Delete, Get, Headers, HttpCode, Param, Patch, Post, Put, Query, Req, Res } from '@nestjs/common';
import { ApiBody, ApiOperation, ApiTags, ApiOkResponse } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import { RequirePermission, SignedBySmsGateway } from '../common/route-access.js';
import { IdPipe } from '../common/id.pipe.js';
import { ApiEnvelope, ApiErrors } from '../common/openapi.js';
import { ApiListQuery, ApiListSearch } from '../lists/list.openapi.js';
import { ListSearchDto, searchQuery } from '../lists/list-search.dto.js';
import type { Principal } from '../common/request.js';
import { SIGNATURE_HEADER } from '../sms/signature.js';
import {
  CreateTextMessageDto,
  DeliveryReportDto,
  InboundMessageDto,
  InboundResultDto,
  TextMessageRecordDto,
  UpdateTextMessageDto,
} from './text-message.dto.js';
import { InboundMessagesService } from './inbound-messages.service.js';
import { TextMessagesService, TEXT_MESSAGE_LIST_SPEC } from './text-messages.service.js';

@ApiTags('text messages')
@Controller(['api/text-messages', 'api/text_messages'])
export class TextMessagesController {
  constructor(
    private readonly messages: TextMessagesService,
    private readonly replies: InboundMessagesService,
  ) {}

  @Get()
  @RequirePermission('textMessages:read')
  @ApiOperation({
    summary: 'List text messages',
    description: 'List parameters: search (content, recipient), page, limit, orderBy, orderByDir; filters status, campaignId, broadcastId.',
  })
  @ApiEnvelope('textMessages', TextMessageRecordDto, { list: true })
  @ApiListQuery(TEXT_MESSAGE_LIST_SPEC)
  list(@Query() query: Record<string, unknown>) {
    return this.messages.list(query);
  }

  @Post('search')
  @HttpCode(200)
  @RequirePermission('textMessages:read')
  @ApiOperation({
    summary: 'Search text messages: the list with its parameters as a JSON body (filter in its JSON form)',
    description: 'Answers what the GET list answers.',
  })
  @ApiListSearch('textMessages', TextMessageRecordDto, TEXT_MESSAGE_LIST_SPEC)
  search(@Body() body: ListSearchDto) {
    return this.messages.list(searchQuery(body));
  }

  @Post(['new', '/'])
  @HttpCode(201)
  @RequirePermission('textMessages:write')
  @ApiOperation({
    summary: 'Create a text message',
    description:
      "Created as `draft`; with `scheduledFor` it is `queued` at once and sent at that time (503 `unavailable`, and nothing created, when the job queue is unreachable). `campaignId` must name an existing campaign; deleting the campaign later sets the message's campaign to null (ON DELETE SET NULL).",
  })
  @ApiEnvelope('textMessage', TextMessageRecordDto, { status: 201 })
  async create(@Body() dto: CreateTextMessageDto, @CurrentPrincipal() who: Principal) {
    return { textMessage: await this.messages.create(dto, who) };
  }

  @ApiErrors({ status: 401, description: 'Missing, wrong or expired X-Signature', codes: ['unauthorized'] })
  @Post('delivery-reports')
  @HttpCode(200)
  @SignedBySmsGateway()
  @ApiOperation({
    summary: 'Delivery report callback of the HTTP SMS gateway (public, signed)',
    description:
      'Body: `{ reference, id?, status: "delivered"|"failed"|"undelivered", error?, timestamp? }` where `reference` is the Idempotency-Key the service sent (`textmessage-<id>-<sendCount>`). ' +
      'Header `X-Signature: t=<unix seconds>,sha256=<hex HMAC-SHA256 of "<t>.<raw body>" with SMS_WEBHOOK_SECRET>` (the timestamp is signed with the body; one more than 5 minutes from the server\'s time is refused, so a captured request cannot be replayed), ' +
      "checked by the guard chain before the body is read; a missing, wrong or expired signature is a 401 (and counts against the sender address's anonymous rate limit; signed reports are not rate limited). " +
      'Moves a sent message to delivered or failed (failed leaves an `sms_failed` notification for the creator); reports for an earlier send, or that would move a message backwards, are acknowledged with `accepted: false`.',
  })
  @ApiBody({ type: DeliveryReportDto })
  @ApiOkResponse({
    description: 'Whether the report changed the message, and its status after it.',
    schema: { type: 'object', required: ['accepted', 'status'], properties: { accepted: { type: 'boolean' }, status: { type: 'string', nullable: true } } },
  })
  deliveryReport(@Req() req: Request & { rawBody?: Buffer }, @Headers(SIGNATURE_HEADER) signature: string | undefined) {
    return this.messages.deliveryReport(req.rawBody, signature, req.body);
  }

  @ApiErrors(
    { status: 401, description: 'Missing, wrong or expired X-Signature', codes: ['unauthorized'] },
    { status: 400, description: 'from is not a phone number, body missing or too long, receivedAt not a date-time' },
  )
  @Post('inbound')
  @HttpCode(200)
  @SignedBySmsGateway()
  @ApiOperation({
    summary: 'Inbound text message (a reply) from the HTTP SMS gateway (public, signed)',
    description:
      'Body: `{ from, to?, body, messageId?, receivedAt? }`, signed like delivery reports (`X-Signature: t=<unix seconds>,sha256=<hex HMAC-SHA256 of "<t>.<raw body>" with SMS_WEBHOOK_SECRET>`, the timestamp within 5 minutes of the server\'s time; 401 otherwise, so a captured STOP or START cannot be replayed). ' +
      'Every message is stored. A body of STOP, UNSUBSCRIBE, CANCEL, END or QUIT (trimmed, any case) sets the sms do-not-contact entry `unsubscribed` on every contact whose phone is `from` (E.164-normalised; existing entries keep their reason); ' +
      'START or UNSTOP removes entries `unsubscribed` and `bounced` (a `manual` entry stays). Other bodies are stored and change nothing. Each changed contact gets a contact.updated event. ' +
      'A repeated `messageId` is acknowledged with `accepted: false` and not acted on again.',
  })
  @ApiBody({ type: InboundMessageDto })
  @ApiOkResponse({ type: InboundResultDto, description: 'What the message did.' })
  inbound(@Req() req: Request & { rawBody?: Buffer }, @Headers(SIGNATURE_HEADER) signature: string | undefined) {
    return this.replies.receive(req.rawBody, signature, req.body);
  }

  @Get(':id')
  @RequirePermission('textMessages:read')
  @ApiEnvelope('textMessage', TextMessageRecordDto)
  async get(@Param('id', IdPipe) id: number) {
    return { textMessage: await this.messages.get(id) };
  }

  @ApiErrors({ status: 409, description: 'Only draft or failed messages can be edited' })
  @Patch([':id/edit', ':id'])
  @RequirePermission('textMessages:write')
  @ApiOperation({
    summary: 'Edit a text message: changes only the supplied properties; 404 when the id does not exist',
    description: 'Only draft and failed messages can be edited (409 `conflict` otherwise). Setting `scheduledFor` queues the message for that time.',
  })
  @ApiEnvelope('textMessage', TextMessageRecordDto)
  async patch(@Param('id', IdPipe) id: number, @Body() dto: UpdateTextMessageDto, @CurrentPrincipal() who: Principal) {
    return { textMessage: await this.messages.patch(id, dto, who) };
  }

  @ApiErrors({ status: 409, description: 'Only draft or failed messages can be edited' })
  @Put([':id/edit', ':id'])
  @RequirePermission('textMessages:write')
  @ApiOperation({ summary: 'Replace a text message (200; draft or failed only, else 409), or create one with a new id when the id does not exist (201)' })
  @ApiEnvelope('textMessage', TextMessageRecordDto)
  @ApiEnvelope('textMessage', TextMessageRecordDto, { status: 201 })
  async put(@Param('id', IdPipe) id: number, @Body() dto: CreateTextMessageDto, @CurrentPrincipal() who: Principal, @Res({ passthrough: true }) res: Response) {
    const { created, textMessage } = await this.messages.put(id, dto, who);
    res.status(created ? 201 : 200);
    return { textMessage };
  }

  @Delete([':id/delete', ':id'])
  @RequirePermission('textMessages:delete')
  @ApiOperation({
    summary: 'Delete a text message in any state; a queued one is then not sent (unless a worker was handing it to the provider at that moment)',
  })
  @ApiEnvelope('textMessage', TextMessageRecordDto)
  async remove(@Param('id', IdPipe) id: number) {
    return { textMessage: await this.messages.remove(id) };
  }

  @ApiErrors({ status: 409, description: 'Only draft or failed messages can be sent' })
  @Post(':id/send')
  @HttpCode(202)
  @RequirePermission('textMessages:write')
  @ApiOperation({
    summary: 'Send a text message now',
    description:
      'Allowed from draft or failed (409 `conflict` otherwise); answers 202 with the message `queued`. A worker hands it to the SMS provider: `sent` (sentAt) when accepted, then `delivered` or `failed` from the delivery report. ' +
      'Gateway 429/5xx answers are retried with backoff; when the attempts run out, or the gateway refuses it, the message is `failed` and its creator gets an `sms_failed` notification. ' +
      'A message is never handed to the provider twice, even when a worker crashes mid-send (its outcome is then `failed` with failureCode `outcome_unknown`). 503 `unavailable` (message unchanged) when the job queue is unreachable.',
  })
  @ApiEnvelope('textMessage', TextMessageRecordDto, { status: 202 })
  async send(@Param('id', IdPipe) id: number, @CurrentPrincipal() who: Principal) {
    return { textMessage: await this.messages.send(id, who) };
  }
}
