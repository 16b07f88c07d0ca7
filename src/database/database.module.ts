import { type DynamicModule, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import type { AppConfig } from '../config/config.js';
import { TableStatistics } from './table-statistics.js';
import { Transactions } from './transactions.js';

/** TypeORM on PostgreSQL (the configured server or the embedded one); schema only through migrations. */
@Module({})
export class DatabaseModule {
  static forRoot(config: AppConfig, url: string): DynamicModule {
    return {
      module: DatabaseModule,
      // Infrastructure, not a feature: every repository may take the transaction runner.
      global: true,
      providers: [Transactions, TableStatistics],
      exports: [Transactions, TableStatistics],
      imports: [
        TypeOrmModule.forRoot({
          type: 'postgres',
          url,
          autoLoadEntities: true,
          synchronize: false,
          migrationsRun: false,
          logging: false,
          // Retry the first connection briefly; afterwards the pool reconnects per query by itself.
          retryAttempts: 5,
          retryDelay: 1000,
          extra: {
            max: config.databaseUrl === null ? Math.min(config.databasePoolSize, 8) : config.databasePoolSize,
            connectionTimeoutMillis: 5000,
            idleTimeoutMillis: 30000,
            // Startup parameters only for a real server (the embedded socket ignores them).
            ...(config.databaseUrl !== null ? { statement_timeout: 30000, application_name: `salesflow-${config.role}` } : {}),
          },
        }),
      ],
    };
  }
}
