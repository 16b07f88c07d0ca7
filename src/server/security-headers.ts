import type { NextFunction, Request, RequestHandler, Response } from 'express';
import helmet, { type HelmetOptions } from 'helmet';

/**
 * helmet's security headers, computed once at boot: with these options every header helmet sets
 * is the same for every request (no per-request nonce), so helmet runs once against a recording
 * response and the request path sets the recorded headers in one call. The X-Powered-By header
 * helmet would remove is never set (the caller disables it in Express).
 */
export function staticSecurityHeaders(options: HelmetOptions): RequestHandler {
  const headers = new Map<string, string>();
  const recorder = {
    setHeader(name: string, value: string | number | readonly string[]) {
      headers.set(name, Array.isArray(value) ? value.join(', ') : String(value));
    },
    removeHeader() {
      /* X-Powered-By: Express is told not to set it */
    },
    getHeader() {
      return undefined;
    },
    locals: {},
  };
  let done = false;
  helmet(options)({ headers: {} } as Request, recorder as unknown as Response, (err?: unknown) => {
    if (err) throw err instanceof Error ? err : new Error('helmet failed');
    done = true;
  });
  if (!done) throw new Error('helmet did not set its headers synchronously');
  // A flat list set header by header: res.setHeaders(map) would allocate an iterator entry per header per request.
  const names = [...headers.keys()];
  const values = [...headers.values()];
  return function securityHeaders(_req: Request, res: Response, next: NextFunction) {
    for (let i = 0; i < names.length; i++) res.setHeader(names[i], values[i]);
    next();
  };
}
