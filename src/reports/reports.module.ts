import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Report } from './report.entity.js';
import { ReportsController } from './reports.controller.js';
import { ReportsProcessor } from './reports.processor.js';
import { ReportsRepository } from './reports.repository.js';
import { ReportsService } from './reports.service.js';
import { NotificationsModule } from '../notifications/notifications.module.js';
import { EventsModule } from '../events/events.module.js';

@Module({
  imports: [EventsModule, TypeOrmModule.forFeature([Report]), NotificationsModule],
  controllers: [ReportsController],
  providers: [ReportsRepository, ReportsService, ReportsProcessor],
  exports: [ReportsService, ReportsRepository],
})
export class ReportsModule {}
