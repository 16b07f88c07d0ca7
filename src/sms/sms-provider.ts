/**
 * The SMS provider adapter. A provider hands one message to a gateway and says how that went;
 * the text-message processor owns the state machine around it (claims, retries, failures).
 */
export interface OutboundSms {
  /** Our text message id. */
  messageId: number;
  /** E.164 recipient. */
  to: string;
  body: string;
  /**
   * Sent to the gateway as the Idempotency-Key: `textmessage-<id>-<sendCount>`, i.e. the message id
   * plus which send of it this is, so that a message re-sent after failing is a new request while
   * repeats of the same send are recognisable as such by the gateway.
   */
  idempotencyKey: string;
}

export interface DeliveryOutcome {
  status: 'delivered' | 'failed';
  at: Date;
  reason?: string;
}

export interface SendResult {
  /** The gateway's id for the message, when it gives one (matched by delivery reports). */
  providerMessageId: string | null;
  /** A delivery outcome known at once (the log provider reports delivery immediately). */
  delivery?: DeliveryOutcome;
}

/**
 * How a send failed:
 * - `retryable`: the gateway did not take the message (429, 5xx, connection refused): safe to try again.
 * - `rejected`: the gateway refused the message for good (other 4xx): do not retry.
 * - `unknown`: the request may have reached the gateway (timeout, connection lost mid-request):
 *   trying again could send the message twice, so it is not retried.
 */
export type SmsFailureKind = 'retryable' | 'rejected' | 'unknown';

export class SmsProviderError extends Error {
  constructor(
    message: string,
    readonly kind: SmsFailureKind,
    readonly retryAfterMs?: number,
  ) {
    super(message);
  }
}

export abstract class SmsProvider {
  /** Stored with each sent message (`log`, `http`). */
  abstract readonly name: string;
  /** The longest one send() can take; a claim older than this plus a margin belongs to a dead worker. */
  abstract readonly maxCallMs: number;
  /** Hands the message to the gateway; throws SmsProviderError when it was not accepted. */
  abstract send(sms: OutboundSms): Promise<SendResult>;
}

export const idempotencyKey = (messageId: number, sendCount: number) => `textmessage-${messageId}-${sendCount}`;

/** The message id and send number from an idempotency key, or null. */
export function parseIdempotencyKey(key: unknown): { messageId: number; sendCount: number } | null {
  if (typeof key !== 'string') return null;
  const m = /^textmessage-([1-9]\d{0,9})-([1-9]\d{0,9})$/.exec(key);
  if (!m || Number(m[1]) > 2147483647 || Number(m[2]) > 2147483647) return null;
  return { messageId: Number(m[1]), sendCount: Number(m[2]) };
}
