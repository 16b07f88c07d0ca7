import { storableText } from '../common/storable-text.js';
import { type OutboundSms, type SendResult, SmsProvider, SmsProviderError } from './sms-provider.js';

/** Network errors that mean the request never reached the gateway (safe to retry). */
const NOT_SENT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);
const MAX_RETRY_AFTER_MS = 10 * 60_000;

export interface HttpSmsOptions {
  url: string;
  token: string | null;
  timeoutMs: number;
  /** Where the gateway posts delivery reports. */
  callbackUrl: string;
}

/** Retry-After as milliseconds (delta-seconds or an HTTP date), capped; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  if (!value) return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Math.min(Number(v) * 1000, MAX_RETRY_AFTER_MS);
  const at = Date.parse(v);
  if (Number.isNaN(at)) return undefined;
  return Math.min(Math.max(0, at - now), MAX_RETRY_AFTER_MS);
}

function errorCodes(e: unknown): string[] {
  const out: string[] = [];
  const visit = (x: unknown, depth: number) => {
    if (!x || typeof x !== 'object' || depth > 4) return;
    const o = x as { code?: unknown; cause?: unknown; errors?: unknown[] };
    if (typeof o.code === 'string') out.push(o.code);
    visit(o.cause, depth + 1);
    if (Array.isArray(o.errors)) o.errors.forEach((y) => visit(y, depth + 1));
  };
  visit(e, 0);
  return out;
}

/**
 * SMS_PROVIDER=http: POSTs `{ to, body, reference, callbackUrl }` as JSON to SMS_HTTP_URL with
 * `Authorization: Bearer SMS_HTTP_TOKEN` and `Idempotency-Key: <reference>`. A 2xx answer accepts
 * the message (its JSON `id`, if any, is the gateway's message id); delivery follows on the signed
 * callback (POST /api/text-messages/delivery-reports). 429 and 5xx are retried (honouring
 * Retry-After), other 4xx fail the message; a timeout or a connection lost after sending leaves the
 * outcome unknown and is not retried.
 */
export class HttpSmsProvider extends SmsProvider {
  readonly name = 'http';

  constructor(private readonly options: HttpSmsOptions) {
    super();
  }

  get maxCallMs(): number {
    return this.options.timeoutMs;
  }

  async send(sms: OutboundSms): Promise<SendResult> {
    const headers: Record<string, string> = { 'Content-Type': 'application/json', Accept: 'application/json', 'Idempotency-Key': sms.idempotencyKey };
    if (this.options.token) headers.Authorization = `Bearer ${this.options.token}`;
    let res: Response;
    try {
      res = await fetch(this.options.url, {
        method: 'POST',
        headers,
        body: JSON.stringify({ to: sms.to, body: sms.body, reference: sms.idempotencyKey, callbackUrl: this.options.callbackUrl }),
        signal: AbortSignal.timeout(this.options.timeoutMs),
        redirect: 'error',
      });
    } catch (e) {
      const codes = errorCodes(e);
      if (codes.some((c) => NOT_SENT_CODES.has(c))) throw new SmsProviderError(`gateway unreachable (${codes.join(', ')})`, 'retryable');
      const timeout = (e as Error).name === 'TimeoutError' || (e as Error).name === 'AbortError';
      throw new SmsProviderError(
        timeout ? `no answer from the gateway within ${this.options.timeoutMs} ms` : storableText(`connection to the gateway failed: ${(e as Error).message}`),
        'unknown',
      );
    }
    const text = await res.text().catch(() => '');
    if (res.ok) {
      let id: string | null = null;
      try {
        const body = JSON.parse(text) as { id?: unknown; messageId?: unknown };
        const raw = body.id ?? body.messageId;
        // Stored with the message: text PostgreSQL can hold, whatever the gateway sent (NUL, a cut surrogate pair).
        if (typeof raw === 'string' || typeof raw === 'number') id = storableText(String(raw).slice(0, 200));
      } catch {
        /* an empty or non-JSON 2xx still accepts the message */
      }
      return { providerMessageId: id };
    }
    const detail = storableText(`gateway answered ${res.status}${text ? `: ${text.slice(0, 200)}` : ''}`);
    if (res.status === 429 || res.status === 408 || res.status >= 500) {
      throw new SmsProviderError(detail, 'retryable', parseRetryAfter(res.headers.get('retry-after')));
    }
    throw new SmsProviderError(detail, 'rejected');
  }
}
