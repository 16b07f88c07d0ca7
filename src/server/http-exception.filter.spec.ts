import { describe, expect, it } from '@jest/globals';
import { BadRequestException } from '@nestjs/common';
import { createServer, type ServerResponse } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { isClientAbort, labelBodyError } from './http-exception.filter.js';

const req = (contentType?: string) => ({ headers: contentType ? { 'content-type': contentType } : {} });

/** What Nest's multer integration (transformException) and express adapter (mapException) hand the filter. */
function multerError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code, name: 'MulterError' });
}

describe('labelBodyError', () => {
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

describe('isClientAbort', () => {
  /** What piping a file into a real response gives when the client has closed its connection first, and the response. */
  async function abortedPipe(): Promise<{ error: unknown; res: ServerResponse }> {
    return new Promise((resolve, reject) => {
      const server = createServer((req, res) => {
        // The client's close arrives while the handler still waits (the database, in the app).
        setTimeout(() => {
          pipeline(Readable.from(['x'.repeat(100_000)]), res).then(
            () => reject(new Error('the pipe finished although the client had gone')),
            (error: unknown) => resolve({ error, res }),
          );
          server.close();
        }, 100);
      });
      server.listen(0, '127.0.0.1', () => {
        const { port } = server.address() as AddressInfo;
        const socket = connect(port, '127.0.0.1', () => socket.write('GET /download HTTP/1.1\r\nHost: x\r\n\r\n', () => socket.destroy()));
      });
    });
  }

  it('tells a download the client closed from a server failure', async () => {
    const { error, res } = await abortedPipe();
    expect(isClientAbort(error, res)).toBe(true);
    // The same code while the response is still open (a database connection reset) is a failure of the server.
    expect(isClientAbort(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }), { destroyed: false, writableFinished: false })).toBe(false);
    expect(isClientAbort(new Error('disk failed'), res)).toBe(false);
    expect(isClientAbort(null, res)).toBe(false);
  });
});
