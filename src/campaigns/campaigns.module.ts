import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { ContactsModule } from '../contacts/contacts.module.js';
import { Campaign } from './campaign.entity.js';
import { CampaignCompletionProcessor } from './campaign-completion.processor.js';
import { CampaignMembersRepository } from './campaign-members.repository.js';
import { CampaignsController } from './campaigns.controller.js';
import { CampaignsRepository } from './campaigns.repository.js';
import { CampaignsService } from './campaigns.service.js';
import { EventsModule } from '../events/events.module.js';

@Module({
  imports: [EventsModule, TypeOrmModule.forFeature([Campaign]), ContactsModule],
  controllers: [CampaignsController],
  providers: [CampaignsService, CampaignsRepository, CampaignMembersRepository, CampaignCompletionProcessor],
  exports: [CampaignsService, CampaignsRepository, CampaignMembersRepository],
})
export class CampaignsModule {}
