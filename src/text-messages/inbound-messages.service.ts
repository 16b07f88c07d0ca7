import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { parseIsoWithOffset } from '../common/dates.js';
import { AppError, fieldError } from '../common/errors.js';
import { toE164 } from '../common/phone.js';
import { ContactsService } from '../contacts/contacts.service.js';
import { Transactions } from '../database/transactions.js';
import { signatureProblem } from '../sms/signature.js';
import { type InboundAction, InboundMessagesRepository } from './inbound-messages.repository.js';

/** Replies that opt the sender out of text messages, and back in (compared trimmed, any case). */
export const OPT_OUT_KEYWORDS = ['STOP', 'UNSUBSCRIBE', 'CANCEL', 'END', 'QUIT'] as const;
export const OPT_IN_KEYWORDS = ['START', 'UNSTOP'] as const;

/** What a reply asks for: the whole body, trimmed, compared case-insensitively with the keywords. */
export function replyAction(body: string): InboundAction {
  const word = body.trim().toUpperCase();
  if ((OPT_OUT_KEYWORDS as readonly string[]).includes(word)) return 'opt_out';
  if ((OPT_IN_KEYWORDS as readonly string[]).includes(word)) return 'opt_in';
  return 'none';
}

export interface InboundResult {
  /** False when the gateway already sent this messageId (nothing done again). */
  accepted: boolean;
  action: InboundAction;
  /** Contacts whose sms do-not-contact entry changed. */
  contactsUpdated: number;
  /** The stored inbound message, or null for a repeat. */
  id: number | null;
}

/**
 * Inbound text messages (replies) forwarded by the SMS gateway: every one is stored
 * (inbound_text_messages); STOP/UNSUBSCRIBE/CANCEL/END/QUIT set the sms do-not-contact entry
 * `unsubscribed` on every contact with the sender's number, START/UNSTOP remove it (see
 * ContactsService.applySmsReply); other bodies are stored and change nothing.
 */
@Injectable()
export class InboundMessagesService {
  constructor(
    private readonly inbound: InboundMessagesRepository,
    private readonly contacts: ContactsService,
    private readonly transactions: Transactions,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async receive(rawBody: Buffer | undefined, signature: unknown, body: unknown): Promise<InboundResult> {
    const problem = signatureProblem(this.config.smsWebhookSecret, rawBody, signature);
    if (problem !== null) throw new AppError('unauthorized', `The inbound message is refused: ${problem}`);
    if (body === null || typeof body !== 'object' || Array.isArray(body)) throw fieldError('body', 'must be a JSON object');
    const b = body as Record<string, unknown>;
    if (typeof b.from !== 'string') throw fieldError('from', 'is required: the sender phone number');
    const from = toE164(b.from);
    if (!from) throw fieldError('from', 'must be a valid phone number, e.g. +14155550100');
    let to: string | null = null;
    if (b.to !== undefined && b.to !== null) {
      if (typeof b.to !== 'string' || !toE164(b.to)) throw fieldError('to', 'must be a valid phone number');
      to = toE164(b.to);
    }
    if (typeof b.body !== 'string') throw fieldError('body', 'is required: the message text');
    if (b.body.length > 1600 || b.body.includes('\u0000')) throw fieldError('body', 'must be at most 1600 characters without NUL');
    let providerMessageId: string | null = null;
    if (b.messageId !== undefined && b.messageId !== null) {
      if ((typeof b.messageId !== 'string' && typeof b.messageId !== 'number') || String(b.messageId).length === 0 || String(b.messageId).length > 200) {
        throw fieldError('messageId', 'must be a string of 1 to 200 characters');
      }
      providerMessageId = String(b.messageId).replaceAll('\u0000', '');
    }
    let receivedAt = new Date();
    if (b.receivedAt !== undefined && b.receivedAt !== null) {
      const at = typeof b.receivedAt === 'string' ? parseIsoWithOffset(b.receivedAt) : null;
      if (!at) throw fieldError('receivedAt', 'must be an ISO 8601 date-time with offset');
      receivedAt = at;
    }
    const action = replyAction(b.body);
    return this.transactions.run(async (tx) => {
      const id = await this.inbound.insert({ from, to, body: b.body as string, providerMessageId, receivedAt, action }, tx);
      if (id === null) return { accepted: false, action, contactsUpdated: 0, id: null };
      if (action === 'none') return { accepted: true, action, contactsUpdated: 0, id };
      const n = await this.contacts.applySmsReply(from, action, tx);
      if (n) await this.inbound.setContactsUpdated(id, n, tx);
      return { accepted: true, action, contactsUpdated: n, id };
    });
  }
}
