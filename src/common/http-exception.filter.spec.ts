import { describe, expect, it } from '@jest/globals';
import { BadRequestException } from '@nestjs/common';
import { labelBodyError } from './http-exception.filter.js';

const req = (contentType?: string) => ({ headers: contentType ? { 'content-type': contentType } : {} });

/** What Nest's multer integration (transformException) and express adapter (mapException) hand the filter. */
function multerError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code, name: 'MulterError' });
}

describe('labelBodyError (issue 11.16)', () => {
  it('labels body-parser JSON failures as malformed JSON', () => {
    const cause = Object.assign(new SyntaxError('Unexpected end of JSON input'), { type: 'entity.parse.failed', status: 400 });
    const e = new BadRequestException(cause.message, { cause });
    expect(labelBodyError(e, req('application/json'), cause.message)).toBe('Malformed JSON body: Unexpected end of JSON input');
  });

  it('labels busboy parse failures as a malformed multipart body, never JSON', () => {
    const cause = new Error('Unexpected end of form');
    const e = new BadRequestException('Multipart: Unexpected end of form', { cause });
    expect(labelBodyError(e, req('multipart/form-data; boundary=x'), 'Multipart: Unexpected end of form')).toBe(
      'Malformed multipart body: Unexpected end of form',
    );
  });

  it("labels multer's refusals of a well-formed body as such", () => {
    const cause = multerError('LIMIT_UNEXPECTED_FILE', 'Unexpected file field');
    const e = new BadRequestException('Unexpected file field - other', { cause });
    const label = labelBodyError(e, req('multipart/form-data; boundary=x'), 'Unexpected file field - other');
    expect(label).toBe('Multipart body refused: Unexpected file field - other');
    expect(label).not.toMatch(/JSON/);
  });

  it('leaves other 400s alone, whatever words their message holds', () => {
    expect(labelBodyError(new BadRequestException('Unexpected token in name'), req('application/json'), 'Unexpected token in name')).toBe(
      'Unexpected token in name',
    );
    const uri = new URIError('Failed to decode param');
    expect(labelBodyError(new BadRequestException(uri.message, { cause: uri }), req(), uri.message)).toBe('Failed to decode param');
  });
});
