import { Body, Controller, Get, Param, Post, Query, Req, Res, UseFilters, UseGuards } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { Response } from 'express';
import { AppError } from '../common/errors.js';
import { IdPipe } from '../common/id.pipe.js';
import { WebhooksService } from '../events/webhooks.service.js';
import { Consumes } from '../server/content-type.guard.js';
import { chromeOf, errorsByField, field, fields, FORM, mayDo, requirePermission, seeOther, sendPage } from './console-http.js';
import { deleteWebhookPage, newWebhookPage, type TestResultView, webhookPage, webhookSecretPage, webhooksPage } from './console-webhooks.views.js';
import { ConsoleExceptionFilter } from './console.filter.js';
import { ConsoleGuard, type ConsoleRequest, SignedIn, signedIn } from './console.guard.js';
import { pageParam } from './console.views.js';
import { webhookRequestFromForm } from './webhook-form.js';

const WEBHOOKS_PER_PAGE = 20;
const DELIVERIES_PER_PAGE = 10;
const done = (v: unknown) => (typeof v === 'string' ? v : undefined);

/**
 * The webhook pages. Every action goes through WebhooksService, as /api/webhooks does, with the
 * permission its API route requires checked on the signed-in user (webhooks:read to look,
 * webhooks:write to create, test, pause, resume, rotate and resend, webhooks:delete to delete), and
 * the service's own rules (the events' read permissions, the URL rules) applying unchanged.
 */
@ApiExcludeController()
@Controller('account/webhooks')
@SignedIn()
@UseGuards(ConsoleGuard)
@UseFilters(ConsoleExceptionFilter)
export class ConsoleWebhooksController {
  constructor(private readonly webhooks: WebhooksService) {}

  @Get()
  async list(@Req() req: ConsoleRequest, @Query() query: Record<string, unknown>, @Res() res: Response): Promise<void> {
    const who = signedIn(req).principal;
    requirePermission(who, 'webhooks:read');
    const page = pageParam(query.page);
    const { total, webhooks } = await this.webhooks.list({ page: String(page), limit: String(WEBHOOKS_PER_PAGE), orderBy: 'id', orderByDir: 'desc' });
    const summaries = await this.webhooks.summaries(webhooks.map((w) => w.id));
    sendPage(
      res,
      200,
      webhooksPage(chromeOf(req), {
        webhooks,
        summaries,
        total,
        page,
        pageSize: WEBHOOKS_PER_PAGE,
        done: done(query.done),
        mayWrite: mayDo(who, 'webhooks:write'),
      }),
    );
  }

  @Get('new')
  newForm(@Req() req: ConsoleRequest, @Res() res: Response): void {
    const who = signedIn(req).principal;
    requirePermission(who, 'webhooks:write');
    sendPage(res, 200, newWebhookPage(chromeOf(req), { types: this.webhooks.subscribableTypes(who) }));
  }

  /** Creates the webhook and answers its signing secret (the only time it is shown); errors go next to their fields. */
  @Post()
  @Consumes(FORM)
  async create(@Req() req: ConsoleRequest, @Body() body: unknown, @Res() res: Response): Promise<void> {
    const who = signedIn(req).principal;
    requirePermission(who, 'webhooks:write');
    const values = { url: field(body, 'url'), events: fields(body, 'events'), description: field(body, 'description') };
    try {
      const created = await this.webhooks.create(await webhookRequestFromForm(values), who);
      sendPage(res, 201, webhookSecretPage(chromeOf(req), created, false));
    } catch (e) {
      if (!(e instanceof AppError) || e.status >= 500) throw e;
      sendPage(res, e.status, newWebhookPage(chromeOf(req), { types: this.webhooks.subscribableTypes(who), values, errors: errorsByField(e) }));
    }
  }

  @Get(':id')
  async show(@Req() req: ConsoleRequest, @Param('id', IdPipe) id: number, @Query() query: Record<string, unknown>, @Res() res: Response): Promise<void> {
    requirePermission(signedIn(req).principal, 'webhooks:read');
    sendPage(res, 200, await this.page(req, id, pageParam(query.page), done(query.done), null));
  }

  /** Sends a signed webhook.test event now and shows what the receiver answered. */
  @Post(':id/test')
  @Consumes(FORM)
  async test(@Req() req: ConsoleRequest, @Param('id', IdPipe) id: number, @Res() res: Response): Promise<void> {
    requirePermission(signedIn(req).principal, 'webhooks:write');
    const result = await this.webhooks.test(id);
    sendPage(res, 200, await this.page(req, id, 1, undefined, result));
  }

  @Post(':id/pause')
  @Consumes(FORM)
  async pause(@Req() req: ConsoleRequest, @Param('id', IdPipe) id: number, @Res() res: Response): Promise<void> {
    const who = signedIn(req).principal;
    requirePermission(who, 'webhooks:write');
    await this.webhooks.patch(id, { isActive: false }, who);
    seeOther(res, `/account/webhooks/${id}?done=paused`);
  }

  @Post(':id/resume')
  @Consumes(FORM)
  async resume(@Req() req: ConsoleRequest, @Param('id', IdPipe) id: number, @Body() body: unknown, @Res() res: Response): Promise<void> {
    const who = signedIn(req).principal;
    requirePermission(who, 'webhooks:write');
    await this.webhooks.patch(id, { isActive: true, requeueDead: field(body, 'requeueDead') === 'true' }, who);
    seeOther(res, `/account/webhooks/${id}?done=resumed`);
  }

  /** A new signing secret, shown on this answer only; the previous one keeps signing for 24 h. */
  @Post(':id/rotate')
  @Consumes(FORM)
  async rotate(@Req() req: ConsoleRequest, @Param('id', IdPipe) id: number, @Res() res: Response): Promise<void> {
    const who = signedIn(req).principal;
    requirePermission(who, 'webhooks:write');
    sendPage(res, 200, webhookSecretPage(chromeOf(req), await this.webhooks.rotateSecret(id, who), true));
  }

  @Post(':id/deliveries/:deliveryId/resend')
  @Consumes(FORM)
  async resend(
    @Req() req: ConsoleRequest,
    @Param('id', IdPipe) id: number,
    @Param('deliveryId', IdPipe) deliveryId: number,
    @Res() res: Response,
  ): Promise<void> {
    requirePermission(signedIn(req).principal, 'webhooks:write');
    await this.webhooks.retryDelivery(id, deliveryId);
    seeOther(res, `/account/webhooks/${id}?done=resent`);
  }

  @Get(':id/delete')
  async confirmDelete(@Req() req: ConsoleRequest, @Param('id', IdPipe) id: number, @Res() res: Response): Promise<void> {
    requirePermission(signedIn(req).principal, 'webhooks:delete');
    sendPage(res, 200, deleteWebhookPage(chromeOf(req), await this.webhooks.get(id)));
  }

  @Post(':id/delete')
  @Consumes(FORM)
  async remove(@Req() req: ConsoleRequest, @Param('id', IdPipe) id: number, @Res() res: Response): Promise<void> {
    requirePermission(signedIn(req).principal, 'webhooks:delete');
    await this.webhooks.remove(id);
    seeOther(res, '/account/webhooks?done=deleted');
  }

  private async page(req: ConsoleRequest, id: number, page: number, notice: string | undefined, test: TestResultView | null): Promise<string> {
    const who = signedIn(req).principal;
    const webhook = await this.webhooks.get(id);
    const { total, deliveries } = await this.webhooks.listDeliveries(id, { page: String(page), limit: String(DELIVERIES_PER_PAGE) });
    return webhookPage(chromeOf(req), {
      webhook,
      deliveries,
      total,
      page,
      pageSize: DELIVERIES_PER_PAGE,
      done: notice,
      test,
      mayWrite: mayDo(who, 'webhooks:write'),
      mayDelete: mayDo(who, 'webhooks:delete'),
    });
  }
}
