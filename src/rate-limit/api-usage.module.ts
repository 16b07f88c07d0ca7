import { Module } from '@nestjs/common';
import { ApiUsageRepository } from './api-usage.repository.js';
import { ApiUsageService } from './api-usage.service.js';
import { RateLimitModule } from './rate-limit.module.js';

/** API usage per token and hour in PostgreSQL (counted by the rate limiter, written in batches). */
@Module({
  imports: [RateLimitModule],
  providers: [ApiUsageRepository, ApiUsageService],
  exports: [ApiUsageService],
})
export class ApiUsageModule {}
