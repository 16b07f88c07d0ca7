import { Global, Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { BatchRunner } from './batch.js';
import { RouteTable } from './route-table.js';
import { SignedLinks } from './signed-links.js';

/** What every feature uses and that needs injection: the live route table, the batch runner, the signed-link verifiers. */
@Global()
@Module({ imports: [DiscoveryModule], providers: [RouteTable, BatchRunner, SignedLinks], exports: [RouteTable, BatchRunner, SignedLinks] })
export class CommonModule {}
