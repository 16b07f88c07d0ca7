import { Global, Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { RouteTable } from './route-table.js';

/** The request path's injectables that features read: the live route table (GET /api/endpoints, the console, 405 answers). */
@Global()
@Module({ imports: [DiscoveryModule], providers: [RouteTable], exports: [RouteTable] })
export class ServerModule {}
