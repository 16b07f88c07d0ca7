import { Global, Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { BatchRunner } from './batch.js';
import { RouteTable } from './route-table.js';

/** What every feature uses and that needs injection: the live route table, the batch runner. */
@Global()
@Module({ imports: [DiscoveryModule], providers: [RouteTable, BatchRunner], exports: [RouteTable, BatchRunner] })
export class CommonModule {}
