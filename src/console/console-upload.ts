import { type CallHandler, type ExecutionContext, Injectable, type NestInterceptor } from '@nestjs/common';
import type { MulterModuleOptions } from '@nestjs/platform-express';
import type { Observable } from 'rxjs';
import { ImportsService, type StoredImportFile } from '../imports/imports.service.js';
import { checkUploadToken, type ConsoleRequest } from './console.guard.js';

/**
 * multer for the console's upload forms (SignedInUpload routes): one CSV in `file`, streamed to the
 * job files by the imports' storage engine (IMPORT_MAX_BYTES, UTF-8 check). The form's CSRF token is
 * a field before the file: the file filter refuses the file (403, nothing stored) unless the fields
 * read so far carry the session's token, so a forged form never has its file written anywhere.
 */
export function consoleUploadOptions(imports: ImportsService): MulterModuleOptions {
  return {
    storage: imports.uploadStorage(),
    defParamCharset: 'utf8',
    limits: { files: 1, fields: 8, fieldSize: 1024, fieldNameSize: 100, parts: 10, headerPairs: 50 },
    fileFilter: (req: unknown, _file: unknown, cb: (error: Error | null, accept: boolean) => void) => {
      try {
        checkUploadToken(req as ConsoleRequest);
        cb(null, true);
      } catch (e) {
        cb(e as Error, false);
      }
    },
  };
}

/**
 * After multer (bind it after FileInterceptor): the parsed form's CSRF token, for a post that sent
 * no file (the file filter saw none); a refused form's stored file, if any, is removed.
 */
@Injectable()
export class ConsoleUploadCsrf implements NestInterceptor {
  constructor(private readonly imports: ImportsService) {}

  async intercept(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
    const req = context.switchToHttp().getRequest<ConsoleRequest & { file?: StoredImportFile }>();
    try {
      checkUploadToken(req);
    } catch (e) {
      if (req.file) await this.imports.discardFile(req.file.storageKey);
      throw e;
    }
    return next.handle();
  }
}
