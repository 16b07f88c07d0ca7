import { Module } from '@nestjs/common';
import { ContactsModule } from '../contacts/contacts.module.js';
import { SegmentsController } from './segments.controller.js';
import { SegmentsService } from './segments.service.js';

@Module({
  imports: [ContactsModule],
  controllers: [SegmentsController],
  providers: [SegmentsService],
})
export class SegmentsModule {}
