import { Body, Controller, Get, Inject, Param, Post, Query, Req, Res, UseFilters, UseGuards } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { Response } from 'express';
import { ApiTokensService } from '../auth/api-tokens.service.js';
import { Consumes } from '../server/content-type.guard.js';
import { AppError, fieldError } from '../common/errors.js';
import { IdPipe } from '../common/id.pipe.js';
import { Clock } from '../common/clock.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { NotificationsService } from '../notifications/notifications.service.js';
import { chromeOf, clearSessionCookie, field, fields, FORM, seeOther, sendPage, sessionCookieOf } from './console-http.js';
import { ConsoleUsageService } from './console-usage.service.js';
import { ConsoleService } from './console.service.js';
import { newTokenPage, notificationsPage, overviewPage, pageParam, revokePage, secretPage, tokensPage } from './console.views.js';
import { usagePage } from './console-usage.views.js';
import { ConsoleExceptionFilter } from './console.filter.js';
import { ConsoleGuard, type ConsoleRequest, SignedIn, signedIn } from './console.guard.js';
import { tokenRequestFromForm } from './token-form.js';

/**
 * The signed-in pages. Tokens and notifications go through the same services as
 * /api/account/tokens and /api/notifications, so their rules (no escalation, immediate
 * revocation on every instance, own records only) are the same code.
 */
@ApiExcludeController()
@Controller('account')
@SignedIn()
@UseGuards(ConsoleGuard)
@UseFilters(ConsoleExceptionFilter)
export class ConsolePagesController {
  constructor(
    private readonly account: ConsoleService,
    private readonly usage: ConsoleUsageService,
    private readonly tokens: ApiTokensService,
    private readonly notifications: NotificationsService,
    private readonly clock: Clock,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  @Get()
  async overview(@Req() req: ConsoleRequest, @Res() res: Response): Promise<void> {
    const s = signedIn(req);
    const [usage, tokens, unread] = await Promise.all([
      this.usage.usage(s),
      this.tokens.list({ limit: '1' }, s.principal),
      this.notifications.list({ limit: '1', isRead: 'false' }, s.principal),
    ]);
    sendPage(res, 200, overviewPage(chromeOf(req), { user: s.user, usage, unread: unread.total, tokens: tokens.total }));
  }

  /** Requests per hour per token over the last 24 h (default) or 7 days, against the plan's limit. */
  @Get('usage')
  async usageCharts(@Req() req: ConsoleRequest, @Query('range') range: unknown, @Query('page') page: unknown, @Res() res: Response): Promise<void> {
    const r = range === undefined || range === '' ? '24h' : range;
    if (r !== '24h' && r !== '7d') throw fieldError('range', 'must be 24h or 7d');
    sendPage(res, 200, usagePage(chromeOf(req), await this.usage.page(signedIn(req), r, pageParam(page))));
  }

  @Get('tokens')
  async tokenList(@Req() req: ConsoleRequest, @Res() res: Response): Promise<void> {
    const { tokens } = await this.tokens.list({ limit: '200', orderBy: 'id', orderByDir: 'desc' }, signedIn(req).principal);
    sendPage(res, 200, tokensPage(chromeOf(req), { tokens }));
  }

  @Get('tokens/new')
  newToken(@Req() req: ConsoleRequest, @Res() res: Response): void {
    const p = signedIn(req).principal.permissions;
    sendPage(res, 200, newTokenPage(chromeOf(req), { mayGrantAll: p.has('*'), granted: p, nowMs: this.clock.nowMs() }));
  }

  /** Creates the token and answers the page with its secret: the only time it is ever shown (never in a URL). */
  @Post('tokens')
  @Consumes(FORM)
  async createToken(@Req() req: ConsoleRequest, @Body() body: unknown, @Res() res: Response): Promise<void> {
    const principal = signedIn(req).principal;
    const values = { name: field(body, 'name'), permissions: fields(body, 'permissions'), expires: field(body, 'expires') };
    try {
      const dto = await tokenRequestFromForm(values);
      const token = await this.tokens.create(dto, principal);
      sendPage(res, 201, secretPage(chromeOf(req), token));
    } catch (e) {
      if (!(e instanceof AppError) || e.status >= 500) throw e;
      sendPage(
        res,
        e.status,
        newTokenPage(chromeOf(req), {
          mayGrantAll: principal.permissions.has('*'),
          granted: principal.permissions,
          nowMs: this.clock.nowMs(),
          values,
          error: e.message,
        }),
      );
    }
  }

  @Get('tokens/:id/revoke')
  async confirmRevoke(@Req() req: ConsoleRequest, @Param('id', IdPipe) id: number, @Res() res: Response): Promise<void> {
    sendPage(res, 200, revokePage(chromeOf(req), await this.tokens.get(id, signedIn(req).principal)));
  }

  @Post('tokens/:id/revoke')
  @Consumes(FORM)
  async revoke(@Req() req: ConsoleRequest, @Param('id', IdPipe) id: number, @Res() res: Response): Promise<void> {
    await this.tokens.revoke(id, signedIn(req).principal);
    seeOther(res, '/account/tokens');
  }

  @Get('notifications')
  async notificationList(@Req() req: ConsoleRequest, @Res() res: Response): Promise<void> {
    const { total, notifications } = await this.notifications.list({ limit: '100', orderBy: 'createdAt', orderByDir: 'desc' }, signedIn(req).principal);
    sendPage(res, 200, notificationsPage(chromeOf(req), { total, notifications }));
  }

  @Post('notifications/read-all')
  @Consumes(FORM)
  async markAllRead(@Req() req: ConsoleRequest, @Res() res: Response): Promise<void> {
    await this.notifications.markAllRead(signedIn(req).principal);
    seeOther(res, '/account/notifications');
  }

  @Post('notifications/:id/read')
  @Consumes(FORM)
  async markRead(@Req() req: ConsoleRequest, @Param('id', IdPipe) id: number, @Res() res: Response): Promise<void> {
    await this.notifications.markRead(id, signedIn(req).principal);
    seeOther(res, '/account/notifications');
  }

  @Post('logout')
  @Consumes(FORM)
  async logout(@Req() req: ConsoleRequest, @Res() res: Response): Promise<void> {
    await this.account.signOut(sessionCookieOf(req));
    clearSessionCookie(res, this.config);
    seeOther(res, '/account/login');
  }

  @Post('sessions/revoke-all')
  @Consumes(FORM)
  async signOutEverywhere(@Req() req: ConsoleRequest, @Res() res: Response): Promise<void> {
    await this.account.signOutEverywhere(signedIn(req).user.id);
    clearSessionCookie(res, this.config);
    seeOther(res, '/account/login');
  }
}
