import { ApiPropertyOptional } from '@nestjs/swagger';
import { Allow, ArrayMaxSize, IsArray, IsBoolean, IsInt, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';

/**
 * Body of `POST /api/<resource>/search` (docs/decisions/filter-language.md): the list parameters as JSON, with `filter` as
 * the JSON form (or the query-string text). Answers the list's own envelope; parseListQuery checks
 * the values exactly as it checks the query string.
 */
export class ListSearchDto {
  @ApiPropertyOptional({
    description:
      "The filter: the JSON form (a FilterNode) or, as a string, the query-string form of the `filter` parameter. Fields and operators per list: see the `filter` parameter of the list's GET route.",
    oneOf: [{ $ref: '#/components/schemas/FilterNode' }, { type: 'string', maxLength: 65536 }],
  })
  @Allow()
  filter?: Record<string, unknown> | string;

  /** 1-based page number (not with a cursor beyond page 1). */
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(1_000_000)
  page?: number;

  /** Records per page. */
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(200)
  limit?: number;

  /** Property to order by (the list's orderBy values). */
  @IsOptional()
  @IsString()
  @MaxLength(100)
  orderBy?: string;

  /** asc or desc (case-insensitive). */
  @IsOptional()
  @IsString()
  @MaxLength(10)
  orderByDir?: string;

  /** Case-insensitive substring match, as the list's `search`. */
  @IsOptional()
  @IsString()
  @MaxLength(200)
  search?: string;

  /** Keyset paging: the `next` of the previous answer, or "" to start a walk. */
  @IsOptional()
  @IsString()
  @MaxLength(4096)
  after?: string;

  /** false: do not count (total is -1; the answer carries next). */
  @IsOptional()
  @IsBoolean()
  count?: boolean;

  /** Sparse records: the properties to answer (id always). */
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(100)
  @IsString({ each: true })
  @MaxLength(200, { each: true })
  fields?: string[];
}

/** The body as list parameters (what parseListQuery reads from a query string). */
export function searchQuery(body: ListSearchDto | undefined): Record<string, unknown> {
  const q: Record<string, unknown> = {};
  if (!body) return q;
  for (const [k, v] of Object.entries(body) as [string, unknown][]) {
    if (v === undefined || v === null) continue;
    if (k === 'filter') q.filter = v;
    else if (k === 'fields' && Array.isArray(v)) q.fields = (v as string[]).join(',');
    else if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'string') q[k] = String(v);
    else q[k] = v;
  }
  return q;
}
