import {
  Controller,
  createParamDecorator,
  Delete,
  type ExecutionContext,
  Get,
  HttpCode,
  Param,
  Patch,
  Post,
  Put,
  Query,
  Req,
  Res,
  UseInterceptors,
  Body,
} from '@nestjs/common';
import { FileInterceptor } from '@nestjs/platform-express';
import { ApiBody, ApiConsumes, ApiOperation, ApiParam, ApiProduces, ApiResponse, ApiTags } from '@nestjs/swagger';
import { SkipThrottle } from '@nestjs/throttler';
import type { Request, Response } from 'express';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import { Public, RequirePermission } from '../auth/permissions.js';
import { Consumes } from '../server/content-type.guard.js';
import { IdPipe } from '../common/id.pipe.js';
import { ApiEnvelope, ApiErrorBody, ApiErrors } from '../common/openapi.js';
import { ApiListQuery, ApiListSearch } from '../lists/list.openapi.js';
import { ListSearchDto, searchQuery } from '../lists/list-search.dto.js';
import type { Principal } from '../common/request.js';
import { AssetEditFormDto, AssetRecordDto, AssetUploadFormDto } from './asset.dto.js';
import { AssetDownloadsService } from './asset-downloads.service.js';
import type { UploadedAssetFile } from './asset-upload.engine.js';
import { type AssetInput, AssetsService } from './assets.service.js';
import { ASSET_LIST_SPEC } from './assets.repository.js';

/** The body of a create/edit request: JSON or multipart form fields, and the upload multer stored (if any). */
const AssetRequest = createParamDecorator((_: unknown, ctx: ExecutionContext): AssetInput => {
  const req = ctx.switchToHttp().getRequest<Request & { file?: UploadedAssetFile }>();
  return { body: req.body, file: req.file, multipart: Boolean(req.is('multipart/form-data')) };
});

const EDIT_BODY =
  'JSON with metadata only, or multipart/form-data with metadata form fields and optionally a new `file`, which replaces the ' +
  'stored file (type, size and extension detected again) and increments `revision`.';

@ApiTags('assets')
@Controller('api/assets')
export class AssetsController {
  constructor(
    private readonly assets: AssetsService,
    private readonly downloads: AssetDownloadsService,
  ) {}

  // Declared before GET :id so that Express tries it first: `/api/assets/12:price-list` is a
  // download, `/api/assets/12` the token-protected record.
  @Get(':id\\:{:alias}')
  @Public()
  @SkipThrottle()
  @ApiOperation({
    summary: 'Download an asset (public, no token): {base_url}/api/assets/<id>:<alias>',
    description:
      'Streams the file while the asset is published and inside its publishUp/publishDown window; otherwise, or for a wrong ' +
      'alias, 404. Sends Content-Type (detected at upload), Content-Disposition (the uploaded file name, with an RFC 5987 ' +
      '`filename*` and an ASCII fallback; inline for images, audio, video, PDF and plain text), ETag (SHA-256 of the content), ' +
      'Last-Modified and Accept-Ranges. One `Range: bytes=` range is answered 206 (several ranges are answered with the whole ' +
      'file), a range outside the file 416; If-None-Match / If-Modified-Since answer 304 and If-Range is honoured. ' +
      'A full download or a range starting at byte 0 counts one download (`downloadCount`) and, once per client address and ' +
      'user agent, one unique download (`uniqueDownloadCount`); HEAD, 304 and later ranges are not counted. ' +
      'Not subject to the per-account or anonymous rate limits, as public files are fetched by many clients behind shared addresses.',
  })
  @ApiParam({ name: 'id', type: 'integer' })
  @ApiParam({ name: 'alias', type: 'string' })
  @ApiProduces('application/octet-stream')
  @ApiResponse({ status: 200, description: 'The file', schema: { type: 'string', format: 'binary' } })
  @ApiResponse({ status: 206, description: 'The requested byte range (Content-Range)' })
  @ApiResponse({ status: 304, description: 'Not modified' })
  @ApiResponse({ status: 404, description: 'No published asset at this address', type: ApiErrorBody })
  @ApiResponse({ status: 416, description: 'Range not satisfiable (Content-Range: bytes */<size>)', type: ApiErrorBody })
  download(@Param('id', IdPipe) id: number, @Param('alias') alias: string | undefined, @Req() req: Request, @Res() res: Response) {
    return this.downloads.serve(id, alias, req, res);
  }

  @Get()
  @RequirePermission('assets:read')
  @ApiOperation({
    summary: 'List assets',
    description:
      'List parameters: search (title, alias, description), page, limit, orderBy, orderByDir; filter `status`: `published` or ' +
      '`unpublished` (the isPublished flag; the publishUp/publishDown window is not applied here).',
  })
  @ApiEnvelope('assets', AssetRecordDto, { list: true })
  @ApiListQuery(ASSET_LIST_SPEC)
  list(@Query() query: Record<string, unknown>) {
    return this.assets.list(query);
  }

  @Post('search')
  @HttpCode(200)
  @RequirePermission('assets:read')
  @ApiOperation({
    summary: 'Search assets: the list with its parameters as a JSON body (filter in its JSON form)',
    description: 'Answers what the GET list answers.',
  })
  @ApiListSearch('assets', AssetRecordDto, ASSET_LIST_SPEC)
  search(@Body() body: ListSearchDto) {
    return this.assets.list(searchQuery(body));
  }

  @ApiErrors({ status: 409, description: 'The alias is taken by another asset' })
  @Post(['new', '/'])
  @HttpCode(201)
  @RequirePermission('assets:write')
  @Consumes('multipart/form-data')
  @UseInterceptors(FileInterceptor('file'))
  @ApiOperation({
    summary: 'Upload an asset (multipart/form-data; 415 for other content types)',
    description:
      'The file goes in the form field `file`, the other properties in form fields. The upload is streamed to storage and ' +
      'refused with 413 `payload_too_large` beyond ASSET_MAX_BYTES (default 25 MiB), leaving nothing behind. `mime`, ' +
      '`extension` and `size` are set by the server from the content; the uploaded file name is kept only for ' +
      'Content-Disposition. `alias` is generated from `title` when omitted; a taken alias is 409. `category` must be an ' +
      'existing category id (400 otherwise); deleting that category later leaves the asset uncategorised (category null).',
  })
  @ApiConsumes('multipart/form-data')
  @ApiBody({ type: AssetUploadFormDto })
  @ApiEnvelope('asset', AssetRecordDto, { status: 201 })
  async create(@AssetRequest() input: AssetInput, @CurrentPrincipal() who: Principal) {
    return { asset: await this.assets.create(input, who) };
  }

  @Get(':id')
  @RequirePermission('assets:read')
  @ApiEnvelope('asset', AssetRecordDto)
  async get(@Param('id', IdPipe) id: number) {
    return { asset: await this.assets.get(id) };
  }

  @ApiErrors({ status: 409, description: 'The alias is taken by another asset' })
  @Patch([':id/edit', ':id'])
  @RequirePermission('assets:write')
  @Consumes('application/json', 'multipart/form-data')
  @UseInterceptors(FileInterceptor('file'))
  @ApiOperation({ summary: 'Edit an asset: changes only the supplied properties; 404 when the id does not exist', description: EDIT_BODY })
  @ApiConsumes('application/json', 'multipart/form-data')
  @ApiBody({ type: AssetEditFormDto })
  @ApiEnvelope('asset', AssetRecordDto)
  async patch(@Param('id', IdPipe) id: number, @AssetRequest() input: AssetInput, @CurrentPrincipal() who: Principal) {
    return { asset: await this.assets.patch(id, input, who) };
  }

  @ApiErrors(
    {
      status: 400,
      description:
        'Invalid request (malformed body or a value that breaks a rule); `details` names each field. `file`: a PUT that creates the asset (the id does not exist) needs the file, so it is multipart/form-data',
    },
    { status: 409, description: 'The alias is taken by another asset' },
  )
  @Put([':id/edit', ':id'])
  @RequirePermission('assets:write')
  @Consumes('application/json', 'multipart/form-data')
  @UseInterceptors(FileInterceptor('file'))
  @ApiOperation({
    summary: 'Replace an asset (200), or create one with a new id when the id does not exist (201, needs a file)',
    description:
      `${EDIT_BODY} Omitted properties are reset to their defaults (language en, isPublished true, no window, no category); ` +
      'without `alias`, the alias is generated from the title again (kept when it already derives from it).',
  })
  @ApiConsumes('application/json', 'multipart/form-data')
  @ApiBody({ type: AssetEditFormDto })
  @ApiEnvelope('asset', AssetRecordDto)
  @ApiEnvelope('asset', AssetRecordDto, { status: 201 })
  async put(@Param('id', IdPipe) id: number, @AssetRequest() input: AssetInput, @CurrentPrincipal() who: Principal, @Res({ passthrough: true }) res: Response) {
    const { created, asset } = await this.assets.put(id, input, who);
    res.status(created ? 201 : 200);
    return { asset };
  }

  @Delete([':id/delete', ':id'])
  @RequirePermission('assets:delete')
  @ApiOperation({ summary: 'Delete an asset and its stored file; answers the asset as it was. Its download URL answers 404 from then on.' })
  @ApiEnvelope('asset', AssetRecordDto)
  async remove(@Param('id', IdPipe) id: number) {
    return { asset: await this.assets.remove(id) };
  }
}
