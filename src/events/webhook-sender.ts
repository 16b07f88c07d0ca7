import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { storableText, storableTextOf } from '../common/storable-text.js';
import { parseRetryAfter } from './webhook-retry.js';
import type { ResolvedTarget } from './webhook-url.js';

/** At most this much of a receiver's answer is read (and kept as the attempt's excerpt); the rest is not downloaded. */
export const RESPONSE_EXCERPT_BYTES = 4096;

export interface SendOutcome {
  /** The receiver's HTTP status; null when there was no answer (network error, timeout). */
  status: number | null;
  durationMs: number;
  error: string | null;
  /**
   * The start of the answer's body (at most 4 KiB), as storable text: bytes that are not valid
   * UTF-8, and NUL, read as U+FFFD (any answer can be recorded).
   */
  excerpt: string;
  retryAfterMs: number | null;
}

/** A lookup that answers the checked address whatever the name: the request goes where the check looked. */
function pinnedLookup(target: ResolvedTarget): LookupFunction {
  return (_host, options, cb) => {
    if ((options as { all?: boolean }).all)
      (cb as unknown as (e: null, a: { address: string; family: number }[]) => void)(null, [{ address: target.address, family: target.family }]);
    else cb(null, target.address, target.family);
  };
}

/**
 * A keep-alive agent for one checked target (one webhook's batch): at most `maxSockets`
 * connections, every one to the checked address. The caller destroys it when the batch is done; a
 * new check that resolves elsewhere gets a new agent, so a kept connection never outlives its check.
 */
export function targetAgent(target: ResolvedTarget, maxSockets: number): http.Agent {
  const options = { keepAlive: true, maxSockets, lookup: pinnedLookup(target) };
  return target.url.protocol === 'https:' ? new https.Agent(options) : new http.Agent(options);
}

/**
 * POSTs one signed body to a checked target: connects to the address that was checked (the host
 * name is still sent as Host and TLS server name), follows no redirect, reads at most 4 KiB of the
 * answer, and gives up after `timeoutMs` for the whole exchange. With an agent (targetAgent, for
 * the same target) the connection is kept for the next request when the answer was read to its
 * end; without one, each request has its own connection. Never throws.
 */
export function postWebhook(
  target: ResolvedTarget,
  headers: Record<string, string>,
  body: string,
  timeoutMs: number,
  agent: http.Agent | false = false,
): Promise<SendOutcome> {
  const started = performance.now();
  const lookup = pinnedLookup(target);
  const mod = target.url.protocol === 'https:' ? https : http;
  return new Promise<SendOutcome>((resolve) => {
    let done = false;
    const finish = (o: Omit<SendOutcome, 'durationMs'>) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve({ ...o, durationMs: Math.round(performance.now() - started) });
    };
    const req = mod.request(
      target.url,
      {
        method: 'POST',
        lookup,
        agent,
        headers: {
          ...headers,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          'user-agent': 'salesflow-webhooks/1',
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        const complete = (whole: boolean) => {
          if (done) return;
          const excerpt = storableTextOf(Buffer.concat(chunks).subarray(0, RESPONSE_EXCERPT_BYTES));
          const status = res.statusCode ?? null;
          finish({
            status,
            error: status !== null && status >= 300 && status < 400 ? storableText(`redirect to ${res.headers.location ?? '(none)'} not followed`) : null,
            excerpt,
            retryAfterMs: parseRetryAfter(res.headers['retry-after']),
          });
          // An answer read to its end leaves the connection to the agent; the rest of a longer one is not downloaded.
          if (!whole) req.destroy();
        };
        res.on('data', (c: Buffer) => {
          chunks.push(c);
          size += c.length;
          if (size >= RESPONSE_EXCERPT_BYTES) complete(false);
        });
        res.on('end', () => complete(true));
        res.on('error', () => complete(false));
        res.on('close', () => complete(false));
      },
    );
    const timer = setTimeout(() => {
      finish({ status: null, error: `timed out after ${timeoutMs} ms`, excerpt: '', retryAfterMs: null });
      req.destroy();
    }, timeoutMs);
    req.on('error', (e: NodeJS.ErrnoException) =>
      finish({ status: null, error: storableText(`${e.code ?? 'error'}: ${e.message}`.slice(0, 500)), excerpt: '', retryAfterMs: null }),
    );
    req.end(body);
  });
}
