import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { ContactsModule } from '../contacts/contacts.module.js';
import { Campaign } from './campaign.entity.js';
import { CampaignCompletionProcessor } from './campaign-completion.processor.js';
import { CampaignsController } from './campaigns.controller.js';
import { CampaignsService } from './campaigns.service.js';

@Module({
  imports: [TypeOrmModule.forFeature([Campaign]), ContactsModule],
  controllers: [CampaignsController],
  providers: [CampaignsService, CampaignCompletionProcessor],
  exports: [CampaignsService],
})
export class CampaignsModule {}
