import { Body, Controller, Get, Inject, Post, Req, Res, UseFilters, UseGuards } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { Response } from 'express';
import { Consumes } from '../server/content-type.guard.js';
import { AppError } from '../common/errors.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { anonymousCsrf, clientMeta, field, FORM, seeOther, sendPage, sessionCookieOf, setSessionCookie } from './console-http.js';
import { ACCOUNT_CSS, ACCOUNT_JS } from './console.assets.js';
import { ConsoleService } from './console.service.js';
import { invitationPage, loginPage } from './console.views.js';
import { ConsoleExceptionFilter } from './console.filter.js';
import { AnonymousForm, ConsoleGuard, type ConsoleRequest, OpenPage } from './console.guard.js';

/** The console's doors: sign-in, invitations, and its stylesheet and script. */
@ApiExcludeController()
@Controller('account')
@UseGuards(ConsoleGuard)
@UseFilters(ConsoleExceptionFilter)
export class ConsoleSignInController {
  constructor(
    private readonly account: ConsoleService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  @Get('login')
  @OpenPage()
  loginForm(@Req() req: ConsoleRequest, @Res() res: Response): void {
    sendPage(res, 200, loginPage({ csrf: anonymousCsrf(req, res, this.config) }));
  }

  /** Same answer (401) for an unknown email and a wrong password; 429 while the attempts are slowed. */
  @Post('login')
  @AnonymousForm()
  @Consumes(FORM)
  async login(@Req() req: ConsoleRequest, @Body() body: unknown, @Res() res: Response): Promise<void> {
    const email = field(body, 'email');
    try {
      const session = await this.account.signIn(email, field(body, 'password'), { ...clientMeta(req), previousToken: sessionCookieOf(req) });
      setSessionCookie(res, this.config, session.token);
      seeOther(res, '/account/tokens');
    } catch (e) {
      if (!(e instanceof AppError) || (e.status !== 401 && e.status !== 429)) throw e;
      for (const [k, v] of Object.entries(e.headers ?? {})) res.setHeader(k, v);
      sendPage(res, e.status, loginPage({ csrf: anonymousCsrf(req, res, this.config), email, error: e.message }));
    }
  }

  @Get('invitation')
  @OpenPage()
  invitationForm(@Req() req: ConsoleRequest, @Res() res: Response): void {
    sendPage(res, 200, invitationPage({ csrf: anonymousCsrf(req, res, this.config) }));
  }

  @Post('invitation')
  @AnonymousForm()
  @Consumes(FORM)
  async acceptInvitation(@Req() req: ConsoleRequest, @Body() body: unknown, @Res() res: Response): Promise<void> {
    const token = field(body, 'token');
    try {
      const session = await this.account.acceptInvitation(token, field(body, 'password'), field(body, 'confirm'), clientMeta(req));
      setSessionCookie(res, this.config, session.token);
      seeOther(res, '/account/tokens');
    } catch (e) {
      if (!(e instanceof AppError) || e.status >= 500) throw e;
      const usable = e.status === 400 && (await this.account.invitationUsable(token));
      sendPage(res, e.status, invitationPage({ csrf: anonymousCsrf(req, res, this.config), token: usable ? token : '', error: e.message }));
    }
  }

  @Get('assets/account.css')
  @OpenPage()
  stylesheet(@Res() res: Response): void {
    res.type('text/css').setHeader('Cache-Control', 'public, max-age=3600');
    res.send(ACCOUNT_CSS);
  }

  @Get('assets/account.js')
  @OpenPage()
  script(@Res() res: Response): void {
    res.type('text/javascript').setHeader('Cache-Control', 'public, max-age=3600');
    res.send(ACCOUNT_JS);
  }
}
