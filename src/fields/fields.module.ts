import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { ContactFieldValuesRepository } from './contact-field-values.repository.js';
import { ContactFieldValuesService } from './contact-field-values.service.js';
import { Field } from './field.entity.js';
import { FieldsController } from './fields.controller.js';
import { FieldsRepository } from './fields.repository.js';
import { FieldsService } from './fields.service.js';
import { EventsModule } from '../events/events.module.js';

@Module({
  imports: [EventsModule, TypeOrmModule.forFeature([Field])],
  controllers: [FieldsController],
  providers: [FieldsService, FieldsRepository, ContactFieldValuesService, ContactFieldValuesRepository],
  exports: [FieldsService, ContactFieldValuesService],
})
export class FieldsModule {}
