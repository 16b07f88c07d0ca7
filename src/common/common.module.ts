import { Global, Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { RouteTable } from './route-table.js';

/** What every feature uses and that needs injection: the live route table. */
@Global()
@Module({ imports: [DiscoveryModule], providers: [RouteTable], exports: [RouteTable] })
export class CommonModule {}
