import { Module } from '@nestjs/common';
import { APP_CONFIG, type AppConfig, ConfigError } from '../config/config.js';
import { MetricsModule } from '../metrics/metrics.module.js';
import { MetricsService } from '../metrics/metrics.service.js';
import { HttpSmsProvider } from './http.provider.js';
import { LogSmsProvider } from './log.provider.js';
import { SmsProvider } from './sms-provider.js';
import { SmsSendRate } from './send-rate.service.js';
import { SmsLogSendsRepository } from './sms-log-sends.repository.js';

/** Provides the configured SmsProvider (SMS_PROVIDER=log|http). */
@Module({
  imports: [MetricsModule],
  providers: [
    SmsLogSendsRepository,
    {
      provide: SmsProvider,
      useFactory: (config: AppConfig, logSends: SmsLogSendsRepository, metrics: MetricsService): SmsProvider => {
        if (config.smsProvider !== 'http') return new LogSmsProvider(logSends, metrics);
        // loadConfig() already refuses SMS_PROVIDER=http without SMS_HTTP_URL.
        if (!config.smsHttpUrl) throw new ConfigError('SMS_HTTP_URL', 'is required when SMS_PROVIDER=http');
        return new HttpSmsProvider({
          url: config.smsHttpUrl,
          token: config.smsHttpToken,
          timeoutMs: config.smsHttpTimeoutMs,
          callbackUrl: `${config.baseUrl}/api/text-messages/delivery-reports`,
        });
      },
      inject: [APP_CONFIG, SmsLogSendsRepository, MetricsService],
    },
    SmsSendRate,
  ],
  exports: [SmsProvider, SmsSendRate],
})
export class SmsModule {}
