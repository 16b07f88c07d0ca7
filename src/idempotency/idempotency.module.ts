import { Module } from '@nestjs/common';
import { IdempotencyPruneProcessor } from './idempotency-prune.processor.js';
import { IdempotencyRepository } from './idempotency.repository.js';
import { IdempotencyService } from './idempotency.service.js';

/** Idempotency-Key storage (PostgreSQL) and its retention job; the global guard is wired in AppModule. */
@Module({
  providers: [IdempotencyRepository, IdempotencyService, IdempotencyPruneProcessor],
  exports: [IdempotencyService],
})
export class IdempotencyModule {}
