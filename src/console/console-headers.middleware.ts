import { Injectable, type NestMiddleware } from '@nestjs/common';
import type { NextFunction, Request, Response } from 'express';

/**
 * Response headers of every console page (they replace the API-wide ones helmet set): a strict
 * Content-Security-Policy (scripts and styles only from this origin, no inline code, forms post
 * only here, no framing), clickjacking protection, no caching of pages that may show a secret,
 * and no Referer leaving the console.
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ');

@Injectable()
export class ConsoleHeadersMiddleware implements NestMiddleware {
  use(_req: Request, res: Response, next: NextFunction): void {
    res.setHeader('Content-Security-Policy', CONSOLE_CSP);
    res.setHeader('X-Frame-Options', 'DENY');
    res.setHeader('Cache-Control', 'no-store');
    // same-origin, not no-referrer: with no-referrer browsers send `Origin: null` on form posts, which the origin check refuses.
    res.setHeader('Referrer-Policy', 'same-origin');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    next();
  }
}
