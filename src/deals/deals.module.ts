import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Deal } from './deal.entity.js';
import { DealsController } from './deals.controller.js';
import { DealsRepository } from './deals.repository.js';
import { DealsService } from './deals.service.js';
import { EventsModule } from '../events/events.module.js';
import { PipelinesModule } from '../pipelines/pipelines.module.js';
import { DealStagesService } from './deal-stages.service.js';
import { DealReportsService } from './deal-reports.service.js';
import { DealReportsRepository } from './deal-reports.repository.js';
import { PipelineReportsController } from './pipeline-reports.controller.js';

@Module({
  imports: [EventsModule, PipelinesModule, TypeOrmModule.forFeature([Deal])],
  controllers: [DealsController, PipelineReportsController],
  providers: [DealsService, DealsRepository, DealStagesService, DealReportsService, DealReportsRepository],
  exports: [DealsService, DealsRepository],
})
export class DealsModule {}
