import { registerDecorator, type ValidationOptions } from 'class-validator';
import { parseIsoWithOffset } from './dates.js';
import { toE164 } from './phone.js';

export { toE164 };

/** Body class → property → the route that changes it (see {@link changedElsewhere}). */
const CHANGED_ELSEWHERE = new Map<abstract new () => unknown, Map<string, string>>();

/**
 * Declares a record property that a body of `classes` must not carry because another route changes
 * it (a contact's `points`): the validation pipe's 400 for it names that route instead of "should
 * not exist". The property stays out of the body's schema (unknown properties are refused anyway).
 */
export function changedElsewhere(classes: (abstract new () => unknown)[], property: string, route: string): void {
  for (const c of classes) {
    const props = CHANGED_ELSEWHERE.get(c) ?? new Map<string, string>();
    props.set(property, route);
    CHANGED_ELSEWHERE.set(c, props);
  }
}

/** The route that changes `property` of bodies of class `body`, when one was declared. */
export function changedElsewhereRoute(body: unknown, property: string): string | undefined {
  return typeof body === 'function' ? CHANGED_ELSEWHERE.get(body as abstract new () => unknown)?.get(property) : undefined;
}

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
