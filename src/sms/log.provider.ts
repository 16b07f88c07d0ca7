import { Logger } from '@nestjs/common';
import { type OutboundSms, type SendResult, SmsProvider } from './sms-provider.js';

/**
 * The default provider (SMS_PROVIDER=log): writes the send to the log instead of a gateway and
 * reports the message delivered at once. For development and installations without a gateway.
 */
export class LogSmsProvider extends SmsProvider {
  readonly name = 'log';
  readonly maxCallMs = 1_000;
  private readonly logger = new Logger('SMS');

  async send(sms: OutboundSms): Promise<SendResult> {
    // The number is partly masked: logs are no place for full phone numbers.
    this.logger.log({
      msg: 'sms (log provider)',
      messageId: sms.messageId,
      to: sms.to.slice(0, -4) + '****',
      chars: sms.body.length,
      idempotencyKey: sms.idempotencyKey,
    });
    return { providerMessageId: `log-${sms.idempotencyKey}`, delivery: { status: 'delivered', at: new Date() } };
  }
}
