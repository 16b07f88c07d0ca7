import { plainToInstance } from 'class-transformer';
import { validate } from 'class-validator';
import { CreateAccountTokenDto } from '../auth/account-token.dto.js';
import { AppError, fieldError } from '../common/errors.js';

/**
 * The generate-token form as the body POST /api/account/tokens takes, checked by the same DTO
 * rules. The optional expiry is a date: the token stops at the end of that day (UTC).
 */
export async function tokenRequestFromForm(values: { name: string; permissions: string[]; expires: string }): Promise<CreateAccountTokenDto> {
  let expiresAt: string | null = null;
  if (values.expires.trim()) {
    if (!/^\d{4}-\d{2}-\d{2}$/.test(values.expires.trim())) throw fieldError('expires', 'must be a date (YYYY-MM-DD)');
    expiresAt = `${values.expires.trim()}T23:59:59+00:00`;
  }
  if (!values.permissions.length) throw fieldError('permissions', 'choose at least one permission');
  const dto = plainToInstance(CreateAccountTokenDto, { name: values.name.trim(), permissions: values.permissions, expiresAt });
  const errors = await validate(dto, { whitelist: true, forbidNonWhitelisted: true });
  if (errors.length) {
    const details = errors.map((e) => ({ field: e.property, message: Object.values(e.constraints ?? {})[0] ?? 'is invalid' }));
    throw new AppError('validation_failed', details.map((d) => d.message).join('; '), details);
  }
  return dto;
}
