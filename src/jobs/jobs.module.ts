import { type DynamicModule, Global, Module, type Provider } from '@nestjs/common';
import { BullModule, getQueueToken } from '@nestjs/bullmq';
import type { ConnectionOptions, Queue } from 'bullmq';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { RedisService } from '../redis/redis.service.js';
import { BullMqJobQueue } from './bullmq.job-queue.js';
import { InProcessJobQueue } from './in-process.job-queue.js';
import { JobQueue } from './job-queue.js';
import { type QueueName, QUEUES } from './job-names.js';
import { DASHBOARD_QUEUES, QueueDashboardController } from './queue-dashboard.js';

const QUEUE_NAMES = Object.values(QUEUES) as QueueName[];

/**
 * Provides JobQueue: BullMQ on Redis when REDIS_URL is set (queues through @nestjs/bullmq, under
 * REDIS_PREFIX; workers unless APP_ROLE=api; the Bull Board dashboard in HTTP processes), the
 * in-process runner otherwise.
 */
@Global()
@Module({})
export class JobsModule {
  static forRoot(config: AppConfig): DynamicModule {
    if (!config.redisUrl) {
      return {
        module: JobsModule,
        providers: [
          {
            provide: JobQueue,
            useFactory: (c: AppConfig) => new InProcessJobQueue({ sms: { max: c.smsRateLimitPerSecond, durationMs: 1000 } }),
            inject: [APP_CONFIG],
          },
        ],
        exports: [JobQueue],
      };
    }
    const queuesProvider: Provider = {
      provide: DASHBOARD_QUEUES,
      useFactory: (...queues: Queue[]) => Object.fromEntries(QUEUE_NAMES.map((n, i) => [n, queues[i]])),
      inject: QUEUE_NAMES.map((n) => getQueueToken(n)),
    };
    return {
      module: JobsModule,
      imports: [
        BullModule.forRootAsync({
          useFactory: (redis: RedisService, c: AppConfig) => ({
            // Producers fail fast while Redis is down (routes answer 503) instead of queueing in memory.
            connection: redis.connectionOptions({
              enableOfflineQueue: false,
              maxRetriesPerRequest: 1,
              connectionName: `${c.redisPrefix}-queue`,
            }) as ConnectionOptions,
            prefix: c.redisPrefix,
          }),
          inject: [RedisService, APP_CONFIG],
        }),
        BullModule.registerQueue(...QUEUE_NAMES.map((name) => ({ name }))),
      ],
      providers: [
        queuesProvider,
        {
          provide: JobQueue,
          useFactory: (c: AppConfig, redis: RedisService, queues: Record<QueueName, Queue>) => new BullMqJobQueue(c, redis, queues),
          inject: [APP_CONFIG, RedisService, DASHBOARD_QUEUES],
        },
      ],
      controllers: config.role !== 'worker' ? [QueueDashboardController] : [],
      exports: [JobQueue],
    };
  }
}
