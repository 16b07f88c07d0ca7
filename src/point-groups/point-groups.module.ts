import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { PointGroup } from './point-group.entity.js';
import { PointGroupsController } from './point-groups.controller.js';
import { PointGroupsRepository } from './point-groups.repository.js';
import { PointGroupsService } from './point-groups.service.js';
import { EventsModule } from '../events/events.module.js';

@Module({
  imports: [EventsModule, TypeOrmModule.forFeature([PointGroup])],
  controllers: [PointGroupsController],
  providers: [PointGroupsService, PointGroupsRepository],
  exports: [PointGroupsService, PointGroupsRepository],
})
export class PointGroupsModule {}
