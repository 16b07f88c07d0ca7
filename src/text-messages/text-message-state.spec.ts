import { describe, expect, it } from '@jest/globals';
import { canEdit, canSend, deliveryTransition, TEXT_MESSAGE_STATUSES } from './text-message-state.js';

describe('text message transitions', () => {
  it('edits and send only from draft or failed', () => {
    expect(TEXT_MESSAGE_STATUSES.filter(canEdit)).toEqual(['draft', 'failed']);
    expect(TEXT_MESSAGE_STATUSES.filter(canSend)).toEqual(['draft', 'failed']);
  });

  it('delivery reports only move forward', () => {
    const s = (status: (typeof TEXT_MESSAGE_STATUSES)[number], claimed = false, failureCode: 'outcome_unknown' | 'delivery_failed' | null = null) => ({
      status,
      claimed,
      failureCode,
    });
    expect(deliveryTransition(s('sent'), 'delivered')).toBe('delivered');
    expect(deliveryTransition(s('sent'), 'failed')).toBe('failed');
    expect(deliveryTransition(s('queued', true), 'delivered')).toBe('delivered');
    expect(deliveryTransition(s('queued', false), 'delivered')).toBeNull();
    expect(deliveryTransition(s('draft'), 'delivered')).toBeNull();
    expect(deliveryTransition(s('delivered'), 'failed')).toBeNull();
    expect(deliveryTransition(s('delivered'), 'delivered')).toBeNull();
    expect(deliveryTransition(s('failed', false, 'outcome_unknown'), 'delivered')).toBe('delivered');
    expect(deliveryTransition(s('failed', false, 'outcome_unknown'), 'failed')).toBeNull();
    expect(deliveryTransition(s('failed', false, 'delivery_failed'), 'delivered')).toBeNull();
  });
});
