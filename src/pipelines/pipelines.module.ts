import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Pipeline, PipelineStage } from './pipeline.entity.js';
import { PipelinesController } from './pipelines.controller.js';
import { PipelinesRepository } from './pipelines.repository.js';
import { PipelinesService } from './pipelines.service.js';
import { EventsModule } from '../events/events.module.js';

@Module({
  imports: [EventsModule, TypeOrmModule.forFeature([Pipeline, PipelineStage])],
  controllers: [PipelinesController],
  providers: [PipelinesService, PipelinesRepository],
  exports: [PipelinesService, PipelinesRepository],
})
export class PipelinesModule {}
