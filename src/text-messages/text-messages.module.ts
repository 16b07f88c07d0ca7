import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { AuthModule } from '../auth/auth.module.js';
import { SegmentsModule } from '../segments/segments.module.js';
import { SmsModule } from '../sms/sms.module.js';
import { TextMessage } from './text-message.entity.js';
import { TextMessageRepository } from './text-message.repository.js';
import { BroadcastMessagesRepository } from './broadcast-messages.repository.js';
import { TextMessagesController } from './text-messages.controller.js';
import { TextMessagesProcessor } from './text-messages.processor.js';
import { TextMessagesService } from './text-messages.service.js';
import { InboundMessagesRepository } from './inbound-messages.repository.js';
import { InboundMessagesService } from './inbound-messages.service.js';
import { NotificationsModule } from '../notifications/notifications.module.js';
import { EventsModule } from '../events/events.module.js';
import { ContactsModule } from '../contacts/contacts.module.js';
import { FieldsModule } from '../fields/fields.module.js';
import { Broadcast } from './broadcast.entity.js';
import { BroadcastsController } from './broadcasts.controller.js';
import { BroadcastsProcessor } from './broadcasts.processor.js';
import { BroadcastsRepository } from './broadcasts.repository.js';
import { BroadcastsService } from './broadcasts.service.js';

@Module({
  imports: [
    AuthModule,
    EventsModule,
    ContactsModule,
    SegmentsModule,
    TypeOrmModule.forFeature([TextMessage, Broadcast]),
    FieldsModule,
    SmsModule,
    NotificationsModule,
  ],
  // BroadcastsController first: /api/text-messages/broadcasts must not reach the message routes' :id.
  controllers: [BroadcastsController, TextMessagesController],
  providers: [
    TextMessageRepository,
    BroadcastMessagesRepository,
    TextMessagesService,
    TextMessagesProcessor,
    InboundMessagesRepository,
    InboundMessagesService,
    BroadcastsRepository,
    BroadcastsService,
    BroadcastsProcessor,
  ],
  exports: [TextMessagesService, TextMessageRepository],
})
export class TextMessagesModule {}
