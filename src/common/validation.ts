import { registerDecorator, type ValidationOptions } from 'class-validator';
import { parseIsoWithOffset } from './dates.js';
import { toE164 } from './phone.js';

export { toE164 };

/** ISO 8601 date-time with an explicit offset, the API's one date-time format. */
export function IsIsoDateTime(options?: ValidationOptions) {
  return (object: object, propertyName: string) =>
    registerDecorator({
      name: 'isIsoDateTime',
      target: object.constructor,
      propertyName,
      options: { message: `${propertyName} must be an ISO 8601 date-time with an offset, e.g. 2026-11-21T10:15:00+00:00`, ...options },
      validator: { validate: (v: unknown) => typeof v === 'string' && parseIsoWithOffset(v) !== null },
    });
}

/** A phone number that parses (it is stored in E.164). */
export function IsPhone(options?: ValidationOptions) {
  return (object: object, propertyName: string) =>
    registerDecorator({
      name: 'isPhone',
      target: object.constructor,
      propertyName,
      options: { message: `${propertyName} must be a valid phone number, e.g. +14155550100`, ...options },
      validator: { validate: (v: unknown) => typeof v === 'string' && toE164(v) !== null },
    });
}

/** A string with no NUL bytes (PostgreSQL text cannot hold them). */
export function NoNul(options?: ValidationOptions) {
  return (object: object, propertyName: string) =>
    registerDecorator({
      name: 'noNul',
      target: object.constructor,
      propertyName,
      options: { message: `${propertyName} must not contain NUL characters`, ...options },
      validator: { validate: (v: unknown) => typeof v !== 'string' || !v.includes('\u0000') },
    });
}
