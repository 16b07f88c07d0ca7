import { Module } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { HttpSmsProvider } from './http.provider.js';
import { LogSmsProvider } from './log.provider.js';
import { SmsProvider } from './sms-provider.js';

/** Provides the configured SmsProvider (SMS_PROVIDER=log|http). */
@Module({
  providers: [
    {
      provide: SmsProvider,
      useFactory: (config: AppConfig): SmsProvider =>
        config.smsProvider === 'http'
          ? new HttpSmsProvider({
              url: config.smsHttpUrl!,
              token: config.smsHttpToken,
              timeoutMs: config.smsHttpTimeoutMs,
              callbackUrl: `${config.baseUrl}/api/text-messages/delivery-reports`,
            })
          : new LogSmsProvider(),
      inject: [APP_CONFIG],
    },
  ],
  exports: [SmsProvider],
})
export class SmsModule {}
