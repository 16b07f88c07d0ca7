import { Controller, Get, Query, Req, Res, UseFilters, UseGuards } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { Response } from 'express';
import { AppError, validationError } from '../common/errors.js';
import { EventsService } from '../events/events.service.js';
import { chromeOf, requirePermission, sendPage } from './console-http.js';
import { type EventFilter, eventRows, eventsPage } from './console-events.views.js';
import { ConsoleExceptionFilter } from './console.filter.js';
import { ConsoleGuard, type ConsoleRequest, SignedIn, signedIn } from './console.guard.js';

const EVENTS_PER_PAGE = 50;

function cursor(v: unknown, name: string): number | undefined {
  if (v === undefined || v === '') return undefined;
  if (typeof v !== 'string' || !/^\d{1,15}$/.test(v)) throw validationError(`${name} must be a sequence number`, [{ field: name, message: 'is not a cursor' }]);
  return Number(v);
}

function filterOf(query: Record<string, unknown>): EventFilter {
  const one = (name: string) => {
    const v = query[name];
    if (v === undefined || v === '') return undefined;
    if (typeof v !== 'string') throw validationError(`${name} must be given once`, [{ field: name, message: 'must be given once' }]);
    return v.trim() || undefined;
  };
  return { type: one('type'), record: one('record') };
}

/**
 * The event feed pages, read through EventsService with the API's read rules (events:read, and
 * only the types whose records the user may read). A bad filter is shown next to its field.
 */
@ApiExcludeController()
@Controller('account/events')
@SignedIn()
@UseGuards(ConsoleGuard)
@UseFilters(ConsoleExceptionFilter)
export class ConsoleEventsController {
  constructor(private readonly events: EventsService) {}

  @Get()
  async list(@Req() req: ConsoleRequest, @Query() query: Record<string, unknown>, @Res() res: Response): Promise<void> {
    const who = signedIn(req).principal;
    requirePermission(who, 'events:read');
    const filter = filterOf(query);
    const before = cursor(query.before, 'before');
    const types = this.events.readableTypes(who.permissions);
    try {
      const events = await this.events.recent({ type: filter.type, recordId: filter.record, before, limit: EVENTS_PER_PAGE }, who.permissions);
      sendPage(res, 200, eventsPage(chromeOf(req), { events, filter, types, before, pageSize: EVENTS_PER_PAGE }));
    } catch (e) {
      const detail = e instanceof AppError && e.status < 500 ? e.details?.[0] : undefined;
      if (!(e instanceof AppError) || !detail) throw e;
      sendPage(res, e.status, eventsPage(chromeOf(req), { events: [], filter, types, before, pageSize: EVENTS_PER_PAGE, error: detail }));
    }
  }

  /** The rows of the events after `after`, newest first (the follow script polls it and puts them on top). */
  @Get('rows')
  async rows(@Req() req: ConsoleRequest, @Query() query: Record<string, unknown>, @Res() res: Response): Promise<void> {
    const who = signedIn(req).principal;
    requirePermission(who, 'events:read');
    const filter = filterOf(query);
    const after = cursor(query.after, 'after') ?? 0;
    const events = await this.events.recent({ type: filter.type, recordId: filter.record, after, limit: EVENTS_PER_PAGE }, who.permissions);
    res.status(200).type('html').send(eventRows(events, filter).html);
  }
}
