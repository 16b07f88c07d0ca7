import { plainToInstance } from 'class-transformer';
import { validate } from 'class-validator';
import { CreateAccountTokenDto } from '../auth/api-token.dto.js';
import { PERMISSIONS } from '../auth/permissions.js';
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

/** A group of the token form: a resource (the part of a permission before `:`) and its actions. */
export interface PermissionGroup {
  resource: string;
  permissions: { value: string; action: string }[];
}

/**
 * The form's checkboxes, generated from the permission registry (every permission the API accepts
 * but `*`, which the form offers on its own), grouped by resource in the registry's order: a
 * permission added to the registry gets its checkbox without touching the form. Only the permissions
 * `granted` covers are offered (a token never grants more than its creator holds).
 */
export function permissionGroups(granted: ReadonlySet<string>): PermissionGroup[] {
  const groups = new Map<string, PermissionGroup>();
  for (const value of PERMISSIONS) {
    if (value === '*' || (!granted.has('*') && !granted.has(value))) continue;
    const [resource, action] = value.split(':');
    let group = groups.get(resource);
    if (!group) groups.set(resource, (group = { resource, permissions: [] }));
    group.permissions.push({ value, action });
  }
  return [...groups.values()];
}
