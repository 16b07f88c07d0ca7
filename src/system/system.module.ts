import { Module } from '@nestjs/common';
import { SystemController } from './system.controller.js';
import { SystemRepository } from './system.repository.js';

@Module({ controllers: [SystemController], providers: [SystemRepository] })
export class SystemModule {}
