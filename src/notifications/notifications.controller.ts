import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import { RequirePermission } from '../auth/permissions.js';
import { IdPipe } from '../common/id.pipe.js';
import { ApiEnvelope } from '../common/openapi.js';
import { ApiListQuery, ApiListSearch } from '../lists/list.openapi.js';
import { ListSearchDto, searchQuery } from '../lists/list-search.dto.js';
import type { Principal } from '../common/request.js';
import { NotificationRecordDto, ReadAllResultDto } from './notification.dto.js';
import { NotificationsService } from './notifications.service.js';
import { NOTIFICATION_LIST_SPEC } from './notifications.repository.js';

const OWN = "Only the caller's own notifications are visible: another user's notification id is a 404.";

/** Notifications are created by the service itself (lead_assigned, report_ready, sms_failed); there is no create endpoint. */
@ApiTags('notifications')
@Controller('api/notifications')
export class NotificationsController {
  constructor(private readonly notifications: NotificationsService) {}

  @Get()
  @RequirePermission('notifications:read')
  @ApiOperation({
    summary: "List the caller's notifications",
    description: `List parameters: search (message), page, limit, orderBy, orderByDir; filters isRead (true/false/1/0) and type. ${OWN}`,
  })
  @ApiEnvelope('notifications', NotificationRecordDto, { list: true })
  @ApiListQuery(NOTIFICATION_LIST_SPEC)
  list(@Query() query: Record<string, unknown>, @CurrentPrincipal() who: Principal) {
    return this.notifications.list(query, who);
  }

  @Post('search')
  @HttpCode(200)
  @RequirePermission('notifications:read')
  @ApiOperation({
    summary: "Search the caller's notifications: the list with its parameters as a JSON body (filter in its JSON form)",
    description: 'Answers what the GET list answers.',
  })
  @ApiListSearch('notifications', NotificationRecordDto, NOTIFICATION_LIST_SPEC)
  search(@Body() body: ListSearchDto, @CurrentPrincipal() who: Principal) {
    return this.notifications.list(searchQuery(body), who);
  }

  @Post('read-all')
  @HttpCode(200)
  @RequirePermission('notifications:write')
  @ApiOperation({
    summary: "Mark all of the caller's notifications read",
    description: "Answers { success: true, updated: <number of notifications that were unread> }. Other users' notifications are untouched.",
  })
  @ApiOkResponse({ type: ReadAllResultDto })
  markAllRead(@CurrentPrincipal() who: Principal) {
    return this.notifications.markAllRead(who);
  }

  @Get(':id')
  @RequirePermission('notifications:read')
  @ApiOperation({ summary: 'Get a notification', description: OWN })
  @ApiEnvelope('notification', NotificationRecordDto)
  async get(@Param('id', IdPipe) id: number, @CurrentPrincipal() who: Principal) {
    return { notification: await this.notifications.get(id, who) };
  }

  @Post(':id/read')
  @HttpCode(200)
  @RequirePermission('notifications:write')
  @ApiOperation({ summary: 'Mark a notification read', description: `Answers the notification; marking a read one again changes nothing. ${OWN}` })
  @ApiEnvelope('notification', NotificationRecordDto)
  async markRead(@Param('id', IdPipe) id: number, @CurrentPrincipal() who: Principal) {
    return { notification: await this.notifications.markRead(id, who) };
  }

  @Delete([':id/delete', ':id'])
  @RequirePermission('notifications:delete')
  @ApiOperation({ summary: 'Delete a notification; answers it as it was', description: OWN })
  @ApiEnvelope('notification', NotificationRecordDto)
  async remove(@Param('id', IdPipe) id: number, @CurrentPrincipal() who: Principal) {
    return { notification: await this.notifications.remove(id, who) };
  }
}
