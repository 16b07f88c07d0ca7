import { Injectable, Logger } from '@nestjs/common';
import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Request, Response } from 'express';
import { AppError } from '../common/errors.js';
import { isClientAbort } from '../server/http-exception.filter.js';
import { AssetStorage, StoredObjectMissingError } from './asset-storage.js';
import { ALIAS_MAX, ALIAS_PATTERN, dispositionType } from './asset-file.js';
import { AssetsRepository } from './assets.repository.js';
import { contentDisposition, ifRangeAllows, isNotModified, parseRange } from './http-file.js';

/** Unknown, unpublished, outside its window, a wrong alias or a missing file: all the same 404. */
const gone = () => new AppError('not_found', 'No published asset at this address');

/** Text types were checked to be UTF-8 at upload, so they are served with that charset. */
const UTF8_TYPES = /^(text\/|application\/(json|xml|yaml)$)/;

/**
 * The public download URL `{base_url}/api/assets/<id>:<alias>`: serves the file of a published
 * asset inside its publishUp/publishDown window, with validators, ranges and download counting.
 */
@Injectable()
export class AssetDownloadsService {
  private readonly log = new Logger('AssetDownloads');

  constructor(
    private readonly assets: AssetsRepository,
    private readonly storage: AssetStorage,
  ) {}

  async serve(id: number, alias: string | undefined, req: Request, res: Response, attempt = 1): Promise<void> {
    // No asset has an alias outside the alias rule (the DTO and the generator keep to it): such an
    // address, NUL bytes and other text PostgreSQL cannot compare included, is a 404 unasked.
    if (alias === undefined || alias.length > ALIAS_MAX || !ALIAS_PATTERN.test(alias)) throw gone();
    const row = await this.assets.findPublished(id, alias);
    if (!row) throw gone();
    const size = Number(row.size);
    const etag = `"${row.checksum}"`;
    const lastModified = new Date(row.file_modified_at);

    res.setHeader('ETag', etag);
    res.setHeader('Last-Modified', lastModified.toUTCString());
    res.setHeader('Cache-Control', 'public, no-cache');
    res.setHeader('Accept-Ranges', 'bytes');
    // Public files may be embedded by other sites (helmet's default is same-origin).
    res.setHeader('Cross-Origin-Resource-Policy', 'cross-origin');

    const header = (name: string) => {
      const v = req.headers[name];
      return Array.isArray(v) ? v.join(', ') : v;
    };
    if (isNotModified(req.headers, etag, lastModified)) {
      res.status(304).end();
      return;
    }

    const range = ifRangeAllows(header('if-range'), etag, lastModified) ? parseRange(header('range'), size) : ({ kind: 'full' } as const);
    if (range.kind === 'unsatisfiable') {
      throw new AppError('range_not_satisfiable', `The range is outside the file (${size} bytes)`, undefined, { 'Content-Range': `bytes */${size}` });
    }
    const start = range.kind === 'partial' ? range.start : 0;
    const end = range.kind === 'partial' ? range.end : size - 1;
    const length = size === 0 ? 0 : end - start + 1;

    let stream: Readable | null = null;
    if (req.method !== 'HEAD') {
      try {
        if (length > 0) stream = await this.storage.open(row.storage_key, { start, end });
        // A download is counted once it is certain to be served: a whole file, or a range from byte 0
        // (players and PDF viewers fetch the rest in further ranges, which are not counted again).
        if (start === 0) await this.count(row.id, req);
      } catch (e) {
        stream?.destroy();
        if (e instanceof StoredObjectMissingError) {
          // The file was replaced between reading the row and opening it: read the row again, once.
          if (attempt === 1) return this.serve(id, alias, req, res, 2);
          this.log.error({ msg: 'asset file missing from storage', assetId: row.id, key: row.storage_key });
          throw gone();
        }
        throw e;
      }
    }

    res.status(range.kind === 'partial' ? 206 : 200);
    res.setHeader('Content-Type', UTF8_TYPES.test(row.mime) ? `${row.mime}; charset=utf-8` : row.mime);
    res.setHeader('Content-Disposition', contentDisposition(row.original_filename, dispositionType(row.mime)));
    res.setHeader('Content-Length', String(length));
    if (range.kind === 'partial') res.setHeader('Content-Range', `bytes ${start}-${end}/${size}`);
    if (!stream) {
      res.end();
      return;
    }
    try {
      await pipeline(stream, res);
    } catch (e) {
      // The client went away (an abort, not a failure), or the disk failed mid-file: the connection is closed either way.
      if (isClientAbort(e, res)) this.log.log({ msg: 'asset download aborted by the client', assetId: row.id, bytes: length });
      else this.log.warn({ msg: 'asset download interrupted', assetId: row.id, err: (e as Error).message });
    }
  }

  /**
   * Counts a download: the total always, the unique count once per client (address + user agent,
   * hashed; no raw address is kept). An asset deleted meanwhile answers 404 (its foreign key).
   */
  private async count(assetId: number, req: Request): Promise<void> {
    const client = createHash('sha256')
      .update(`${req.ip ?? req.socket.remoteAddress ?? ''}\n${req.headers['user-agent'] ?? ''}`)
      .digest();
    await this.assets.countDownload(assetId, client);
  }
}
