import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { ContactsModule } from '../contacts/contacts.module.js';
import { DealsModule } from '../deals/deals.module.js';
import { EventsModule } from '../events/events.module.js';
import { FieldsModule } from '../fields/fields.module.js';
import { CompaniesController } from './companies.controller.js';
import { CompaniesRepository } from './companies.repository.js';
import { CompaniesService } from './companies.service.js';
import { CompanyBackfillProcessor } from './company-backfill.processor.js';
import { Company } from './company.entity.js';

@Module({
  imports: [EventsModule, TypeOrmModule.forFeature([Company]), FieldsModule, ContactsModule, DealsModule],
  controllers: [CompaniesController],
  providers: [CompaniesService, CompaniesRepository, CompanyBackfillProcessor],
  exports: [CompaniesService, CompaniesRepository],
})
export class CompaniesModule {}
