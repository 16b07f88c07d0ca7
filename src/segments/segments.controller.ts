import { Body, Controller, HttpCode, Post } from '@nestjs/common';
import { ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { RequirePermission } from '../auth/permissions.js';
import { SegmentPreviewDto, SegmentPreviewRecordDto } from './segment.dto.js';
import { SegmentsService } from './segments.service.js';

@ApiTags('segments')
@Controller('api/segments')
export class SegmentsController {
  constructor(private readonly segments: SegmentsService) {}

  @Post('preview')
  @HttpCode(200)
  @RequirePermission('contacts:read')
  @ApiOperation({
    summary: 'Preview a segment: how many contacts a filter matches now, and the first ten (by id)',
    description: 'Nothing is saved. The filter takes exactly what the `filter` of GET /api/contacts takes (a 400 names the allowed fields or operators).',
  })
  @ApiResponse({ status: 200, type: SegmentPreviewRecordDto, description: '{ count, sample }' })
  preview(@Body() dto: SegmentPreviewDto) {
    return this.segments.preview(dto.filter);
  }
}
