import { Global, Module } from '@nestjs/common';
import { SignedLinks } from './signed-links.js';

/** What every feature may inject from the shared floor: the signed-link signer and verifier. */
@Global()
@Module({ providers: [SignedLinks], exports: [SignedLinks] })
export class CommonModule {}
