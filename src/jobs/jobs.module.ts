import { DynamicModule, Global, Module } from '@nestjs/common';
import type { AppConfig } from '../config/config.js';
import { InProcessJobQueue } from './in-process.job-queue.js';
import { JobQueue } from './job-queue.js';

/**
 * Provides JobQueue: BullMQ on Redis when REDIS_URL is set, the in-process runner otherwise.
 * (The BullMQ implementation is registered here as well; see bullmq.job-queue.ts.)
 */
@Global()
@Module({})
export class JobsModule {
  static forRoot(config: AppConfig): DynamicModule {
    void config;
    return {
      module: JobsModule,
      providers: [{ provide: JobQueue, useClass: InProcessJobQueue }],
      exports: [JobQueue],
    };
  }
}
