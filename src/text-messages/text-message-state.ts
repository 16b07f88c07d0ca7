/**
 * The text message state machine (docs/decisions/sms-sending-and-opt-out.md), as plain rules (unit-tested beside this file).
 *
 *   draft ──send──▶ queued ──provider accepts──▶ sent ──delivery report──▶ delivered
 *     ▲  (or create/edit with scheduledFor)  │                          └──────────────▶ failed
 *     │                                      └──provider refuses / retries run out / outcome unknown──▶ failed
 *   failed ──send──▶ queued (a new send: new job id, new idempotency key)
 *   draft/queued ──▶ canceled (terminal): the recipient opted out before the worker claimed the
 *     message (failureCode opted_out), or its broadcast was canceled (failureCode canceled). A
 *     message a worker has already claimed (handed, or being handed, to the provider) is never canceled.
 *
 * Transitions only move forward. Edits and send are allowed on draft and failed only (409 otherwise).
 * `queued` covers both "waiting for its job" and "claimed by a worker that is calling the provider".
 */
export const TEXT_MESSAGE_STATUSES = ['draft', 'queued', 'sent', 'delivered', 'failed', 'canceled'] as const;
export type TextMessageStatus = (typeof TEXT_MESSAGE_STATUSES)[number];

export type FailureCode = 'provider_rejected' | 'retries_exhausted' | 'outcome_unknown' | 'delivery_failed' | 'opted_out' | 'canceled';

export function canEdit(status: TextMessageStatus): boolean {
  return status === 'draft' || status === 'failed';
}

/** The statuses a send starts from (a new send: new job id, new idempotency key). */
export const SENDABLE_STATUSES: readonly TextMessageStatus[] = ['draft', 'failed'];

export function canSend(status: TextMessageStatus): boolean {
  return SENDABLE_STATUSES.includes(status);
}

export interface DeliveryState {
  status: TextMessageStatus;
  /** A worker holds a claim (it is calling the provider, or died doing so). */
  claimed: boolean;
  failureCode: FailureCode | null;
}

/**
 * The status a delivery report moves a message to, or null when it changes nothing:
 * - from `sent`: to delivered or failed;
 * - from `queued` while claimed: the gateway can report before our worker has recorded its
 *   answer; the report wins and the worker's later write finds the claim gone;
 * - from `failed` with outcome unknown (a worker died mid-call): a report proves the gateway had
 *   the message, so `delivered` corrects the record (this is learning what happened, not a step back);
 * - nothing else moves: delivered stays delivered, and a report never reopens a draft.
 */
export function deliveryTransition(current: DeliveryState, report: 'delivered' | 'failed'): TextMessageStatus | null {
  if (current.status === 'sent') return report;
  if (current.status === 'queued' && current.claimed) return report;
  if (current.status === 'failed' && current.failureCode === 'outcome_unknown' && report === 'delivered') return 'delivered';
  return null;
}
