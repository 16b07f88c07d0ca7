import { Module } from '@nestjs/common';
import { MulterModule } from '@nestjs/platform-express';
import { TypeOrmModule } from '@nestjs/typeorm';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { Asset } from './asset.entity.js';
import { AssetStorage, LocalDiskStorage } from './asset-storage.js';
import { AssetUploadEngine } from './asset-upload.engine.js';
import { AssetDownloadsService } from './asset-downloads.service.js';
import { AssetsController } from './assets.controller.js';
import { AssetsRepository } from './assets.repository.js';
import { AssetsService } from './assets.service.js';
import { EventsModule } from '../events/events.module.js';

/** The asset storage (local disk under STORAGE_DIR), shared by the upload engine and the services. */
@Module({
  providers: [{ provide: AssetStorage, useClass: LocalDiskStorage }],
  exports: [AssetStorage],
})
export class AssetStorageModule {}

@Module({
  imports: [
    EventsModule,
    TypeOrmModule.forFeature([Asset]),
    AssetStorageModule,
    // Multipart parsing for the asset routes: one file in `file`, streamed into AssetStorage.
    MulterModule.registerAsync({
      imports: [AssetStorageModule],
      inject: [APP_CONFIG, AssetStorage],
      useFactory: (config: AppConfig, storage: AssetStorage) => ({
        storage: new AssetUploadEngine(storage, config.assetMaxBytes),
        // File names arrive as UTF-8 in practice (browsers, curl); busboy's default would read them as latin1.
        defParamCharset: 'utf8',
        limits: { files: 1, fields: 20, fieldSize: 64 * 1024, fieldNameSize: 100, parts: 25, headerPairs: 50 },
      }),
    }),
  ],
  controllers: [AssetsController],
  providers: [AssetsRepository, AssetsService, AssetDownloadsService],
  exports: [AssetsService, AssetsRepository],
})
export class AssetsModule {}
