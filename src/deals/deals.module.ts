import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Deal } from './deal.entity.js';
import { DealsController } from './deals.controller.js';
import { DealsRepository } from './deals.repository.js';
import { DealsService } from './deals.service.js';
import { EventsModule } from '../events/events.module.js';
import { PipelinesModule } from '../pipelines/pipelines.module.js';
import { DealStagesService } from './deal-stages.service.js';

@Module({
  imports: [EventsModule, PipelinesModule, TypeOrmModule.forFeature([Deal])],
  controllers: [DealsController],
  providers: [DealsService, DealsRepository, DealStagesService],
  exports: [DealsService, DealsRepository],
})
export class DealsModule {}
