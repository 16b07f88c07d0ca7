import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { SmsModule } from '../sms/sms.module.js';
import { TextMessage } from './text-message.entity.js';
import { TextMessageRepository } from './text-message.repository.js';
import { TextMessagesController } from './text-messages.controller.js';
import { TextMessagesProcessor } from './text-messages.processor.js';
import { TextMessagesService } from './text-messages.service.js';
import { NotificationsModule } from '../notifications/notifications.module.js';
import { EventsModule } from '../events/events.module.js';

@Module({
  imports: [EventsModule, TypeOrmModule.forFeature([TextMessage]), SmsModule, NotificationsModule],
  controllers: [TextMessagesController],
  providers: [TextMessageRepository, TextMessagesService, TextMessagesProcessor],
  exports: [TextMessagesService, TextMessageRepository],
})
export class TextMessagesModule {}
