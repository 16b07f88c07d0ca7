import { Module } from '@nestjs/common';
import { MulterModule } from '@nestjs/platform-express';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { AuthModule } from '../auth/auth.module.js';
import { ScoringModule } from '../scoring/scoring.module.js';
import { SegmentsModule } from '../segments/segments.module.js';
import { CampaignsModule } from '../campaigns/campaigns.module.js';
import { CompaniesModule } from '../companies/companies.module.js';
import { ContactsModule } from '../contacts/contacts.module.js';
import { DealsModule } from '../deals/deals.module.js';
import { EventsModule } from '../events/events.module.js';
import { FieldsModule } from '../fields/fields.module.js';
import { NotificationsModule } from '../notifications/notifications.module.js';
import { ExportsController } from './exports.controller.js';
import { ExportsService } from './exports.service.js';
import { ImportRunner } from './import-runner.service.js';
import { ImportUploadEngine } from './import-upload.engine.js';
import { ImportsController } from './imports.controller.js';
import { ImportsProcessor } from './imports.processor.js';
import { ImportsRepository } from './imports.repository.js';
import { ImportsService } from './imports.service.js';
import { JobFiles } from './job-files.js';

/** The job files, shared by the upload engine and the services. */
@Module({ providers: [JobFiles], exports: [JobFiles] })
export class JobFilesModule {}

/** Import and export jobs (docs/decisions/imports-and-exports.md). */
@Module({
  imports: [
    AuthModule,
    EventsModule,
    NotificationsModule,
    ContactsModule,
    CompaniesModule,
    DealsModule,
    CampaignsModule,
    SegmentsModule,
    ScoringModule,
    FieldsModule,
    JobFilesModule,
    // Multipart parsing for POST /api/imports: one CSV in `file`, streamed to disk.
    MulterModule.registerAsync({
      imports: [JobFilesModule],
      inject: [APP_CONFIG, JobFiles],
      useFactory: (config: AppConfig, files: JobFiles) => ({
        storage: new ImportUploadEngine(files, config.importMaxBytes),
        defParamCharset: 'utf8',
        limits: { files: 1, fields: 20, fieldSize: 256 * 1024, fieldNameSize: 100, parts: 25, headerPairs: 50 },
      }),
    }),
  ],
  controllers: [ImportsController, ExportsController],
  providers: [ImportsRepository, ImportsService, ImportRunner, ExportsService, ImportsProcessor],
  exports: [ImportsService, ExportsService],
})
export class ImportsModule {}
