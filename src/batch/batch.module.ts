import { Global, Module } from '@nestjs/common';
import { BatchRunner } from './batch.js';

/** The batch engine (POST /api/<resource>/batch): one runner shared by every resource's batch route. */
@Global()
@Module({ providers: [BatchRunner], exports: [BatchRunner] })
export class BatchModule {}
