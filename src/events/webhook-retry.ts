/**
 * The delivery retry rules, in one place (README "Webhooks: retry schedule").
 *
 * A failed attempt is retried when the receiver could not be reached, timed out, or answered 408,
 * 429 or 5xx. Retry n waits firstDelay × 4^(n-1), at most 12 h (with the default first delay of
 * 5 s: 5 s, 20 s, 80 s, 5 min, 21 min, 85 min, 5.7 h, then every 12 h), or what `Retry-After` asks
 * for (at most 12 h). A delivery whose next attempt would fall more than 72 h after its first is
 * `dead`. 410 Gone: dead, and the webhook is disabled. Any other answer outside 2xx (3xx included:
 * redirects are not followed, other 4xx): dead at once.
 */
import type { DeliveryOutcome, DeliveryRow } from './webhook-deliveries.repository.js';

export const RETRY_WINDOW_MS = 72 * 3600_000;
export const MAX_RETRY_DELAY_MS = 12 * 3600_000;
/** A webhook is disabled after this long without a successful delivery while its deliveries fail. */
export const DISABLE_AFTER_MS = RETRY_WINDOW_MS;

/** What one attempt's outcome means for its delivery. */
export type AttemptVerdict = 'succeeded' | 'retry' | 'dead' | 'gone';

/** `status` null = no HTTP answer (network error, timeout, refused address). */
export function verdictFor(status: number | null): AttemptVerdict {
  if (status === null) return 'retry';
  if (status >= 200 && status < 300) return 'succeeded';
  if (status === 410) return 'gone';
  if (status === 408 || status === 429 || status >= 500) return 'retry';
  return 'dead';
}

/** Delay before retry number `failedAttempts` (1 after the first failed attempt). */
export function retryDelayMs(failedAttempts: number, firstDelayMs: number, retryAfterMs: number | null = null): number {
  if (retryAfterMs !== null && retryAfterMs >= 0) return Math.min(retryAfterMs, MAX_RETRY_DELAY_MS);
  return Math.min(firstDelayMs * 4 ** Math.max(0, failedAttempts - 1), MAX_RETRY_DELAY_MS);
}

/**
 * When to try again after a failed attempt, or null when the delivery is dead: the next attempt
 * would start later than 72 h after the delivery's window opened (its first attempt, or its re-queue).
 */
export function nextAttemptAt(failedAttempts: number, windowStartedAt: Date, now: Date, firstDelayMs: number, retryAfterMs: number | null = null): Date | null {
  const at = new Date(now.getTime() + retryDelayMs(failedAttempts, firstDelayMs, retryAfterMs));
  return at.getTime() - windowStartedAt.getTime() > RETRY_WINDOW_MS ? null : at;
}

/** `Retry-After` as milliseconds (delta-seconds or an HTTP date); null when absent or unreadable. */
export function parseRetryAfter(value: string | undefined, now = Date.now()): number | null {
  if (!value) return null;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const t = Date.parse(v);
  return Number.isNaN(t) ? null : Math.max(0, t - now);
}

/**
 * Where a delivery stands: pending (not sent yet, or retried later), succeeded, or failed for good
 * with its reason (the receiver's status and the start of its answer for a refusal such as a 4xx;
 * the attempts and the last error when its retries ran out; the webhook disabled or deleted).
 */
export function outcomeOfDelivery(d: DeliveryRow): DeliveryOutcome {
  const last = d.attempts.length ? d.attempts[d.attempts.length - 1] : null;
  const code = last?.code ?? null;
  if (d.status === 'succeeded') return { state: 'succeeded', attempts: d.attemptCount, code, reason: null };
  if (d.status !== 'dead') return { state: 'pending', attempts: d.attemptCount, code, reason: null };
  const lastAttemptError = last ? (last.error ?? (last.code === null ? null : `HTTP ${last.code}`)) : null;
  let reason: string;
  if (!last || d.lastError !== lastAttemptError) reason = d.lastError ?? 'the delivery ended without an attempt';
  else if (code !== null && verdictFor(code) !== 'retry') {
    const excerpt = last.response.replace(/\s+/g, ' ').trim().slice(0, 200);
    reason = `the receiver answered HTTP ${code}${excerpt ? `: ${excerpt}` : ''}`;
  } else reason = `no success after ${d.attemptCount} attempt${d.attemptCount === 1 ? '' : 's'} in the retry window (last: ${d.lastError ?? 'no answer'})`;
  return { state: 'failed', attempts: d.attemptCount, code, reason };
}
