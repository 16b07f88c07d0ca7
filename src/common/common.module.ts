import { Global, Module } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { Clock } from './clock.js';
import { SignedLinks } from './signed-links.js';

/** What every feature may inject from the shared floor: the clock and the signed-link signer and verifier. */
@Global()
@Module({
  providers: [SignedLinks, { provide: Clock, inject: [APP_CONFIG], useFactory: (config: AppConfig) => new Clock(config.testClockFile) }],
  exports: [SignedLinks, Clock],
})
export class CommonModule {}
