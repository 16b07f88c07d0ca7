import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { ContactFieldValuesService } from './contact-field-values.service.js';
import { Field } from './field.entity.js';
import { FieldsController } from './fields.controller.js';
import { FieldsService } from './fields.service.js';

@Module({
  imports: [TypeOrmModule.forFeature([Field])],
  controllers: [FieldsController],
  providers: [FieldsService, ContactFieldValuesService],
  exports: [FieldsService, ContactFieldValuesService],
})
export class FieldsModule {}
