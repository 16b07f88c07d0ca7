import { plainToInstance } from 'class-transformer';
import { validate } from 'class-validator';
import { AppError } from '../common/errors.js';
import { CreateWebhookDto } from '../events/webhook.dto.js';

/** The create-webhook form's values as typed (shown again next to their errors). */
export interface WebhookFormValues {
  url: string;
  events: string[];
  description: string;
}

/**
 * The create-webhook form as the body POST /api/webhooks takes, checked by the same DTO rules (the
 * service then checks the event types, the permissions they need and the URL, as for the API).
 */
export async function webhookRequestFromForm(values: WebhookFormValues): Promise<CreateWebhookDto> {
  const dto = plainToInstance(CreateWebhookDto, {
    url: values.url.trim(),
    events: values.events,
    description: values.description.trim() ? values.description : null,
  });
  const errors = await validate(dto, { whitelist: true, forbidNonWhitelisted: true });
  if (errors.length) {
    const details = errors.map((e) => ({
      field: e.property,
      message: e.property === 'events' && !values.events.length ? 'choose at least one event type' : (Object.values(e.constraints ?? {})[0] ?? 'is invalid'),
    }));
    throw new AppError('validation_failed', details.map((d) => `${d.field}: ${d.message}`).join('; '), details);
  }
  return dto;
}
