import { type ArgumentMetadata, Injectable, type ValidationError, ValidationPipe } from '@nestjs/common';
import { getMetadataStorage, registerDecorator, type ValidationOptions } from 'class-validator';
import { AppError, type ErrorDetail } from './errors.js';
import { parseIsoWithOffset } from './dates.js';
import { toE164 } from './phone.js';

export { toE164 };

const MAX_BODY_DEPTH = 32;

/** Depth of a parsed JSON value, counted without recursion and given up past `limit`. */
export function nestingDepth(value: unknown, limit: number): number {
  let max = 0;
  const stack: [unknown, number][] = [[value, 1]];
  for (let entry = stack.pop(); entry; entry = stack.pop()) {
    const [v, depth] = entry;
    if (v === null || typeof v !== 'object') continue;
    if (depth > max) max = depth;
    if (max > limit) return max;
    for (const child of Object.values(v)) stack.push([child, depth + 1]);
  }
  return max;
}

/** class-validator says "property x should not exist" / "x must be a string"; details name the field already. */
function stripSubject(message: string, property: string): string {
  for (const prefix of [`property ${property} `, `${property} `]) {
    if (message.startsWith(prefix)) return message.slice(prefix.length);
  }
  return message;
}

function flatten(errors: ValidationError[], parent = ''): ErrorDetail[] {
  const out: ErrorDetail[] = [];
  for (const e of errors) {
    const field = parent ? `${parent}.${e.property}` : e.property;
    const messages = Object.values(e.constraints ?? {}).map((m) => stripSubject(m, e.property));
    if (messages.length) {
      // One entry per field: "is required" when absent, else every rule it breaks.
      out.push({ field, message: e.value === undefined && !('whitelistValidation' in (e.constraints ?? {})) ? 'is required' : messages.join('; ') });
    }
    if (e.children?.length) out.push(...flatten(e.children, field));
  }
  return out;
}

/**
 * class-validator finds a class's rules on every validate() by walking every class that has rules
 * (to collect inherited ones): about 25 µs of each create contact (issue 18's profile). The rules are
 * fixed once the modules are loaded, so the answer is kept per class and options (requests here
 * validate without groups) and forgotten whenever a rule is added. Same rules, same order.
 */
export function cacheValidationRuleLookups(): void {
  const storage = getMetadataStorage() as ReturnType<typeof getMetadataStorage> & { sfCachedLookups?: true };
  if (storage.sfCachedLookups) return;
  storage.sfCachedLookups = true;
  type Lookup = ReturnType<typeof storage.getTargetValidationMetadatas>;
  const lookup = storage.getTargetValidationMetadatas.bind(storage);
  const add = storage.addValidationMetadata.bind(storage);
  let cache = new WeakMap<object, (Lookup | undefined)[]>();
  storage.addValidationMetadata = (metadata) => {
    cache = new WeakMap();
    add(metadata);
  };
  storage.getTargetValidationMetadatas = (target, schema, always, strictGroups, groups) => {
    if (typeof target !== 'function' || schema || (groups && groups.length > 0)) return lookup(target, schema, always, strictGroups, groups);
    let byOptions = cache.get(target);
    if (!byOptions) cache.set(target, (byOptions = []));
    const slot = (always ? 1 : 0) + (strictGroups ? 2 : 0);
    return (byOptions[slot] ??= lookup(target, schema, always, strictGroups, groups));
  };
}
cacheValidationRuleLookups();

/**
 * The global validation pipe: whitelist + forbid unknown properties (decisions §1), no implicit
 * type conversion, and every failure as a 400 `validation_failed` with `details`.
 */
@Injectable()
export class AppValidationPipe extends ValidationPipe {
  constructor() {
    super({
      whitelist: true,
      forbidNonWhitelisted: true,
      forbidUnknownValues: true,
      transform: true,
      validationError: { target: false, value: true },
      exceptionFactory: (errors) => {
        const details = flatten(errors);
        const summary = details
          .slice(0, 5)
          .map((d) => `${d.field}: ${d.message}`)
          .join('; ');
        return new AppError('validation_failed', summary ? `Validation failed: ${summary}` : 'Validation failed', details);
      },
    });
  }

  override async transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    // Path parameters are parsed by their own pipes (IdPipe), from the raw string.
    if (metadata.type === 'param') return value;
    if (metadata.type === 'body' && metadata.metatype && this.toValidate(metadata)) {
      if (value === undefined || value === null || value === '') value = {};
      if (typeof value !== 'object' || Array.isArray(value)) {
        throw new AppError('validation_failed', 'The request body must be a JSON object', [{ field: 'body', message: 'must be a JSON object' }]);
      }
      if (nestingDepth(value, MAX_BODY_DEPTH) > MAX_BODY_DEPTH) {
        throw new AppError('validation_failed', `The request body is nested deeper than ${MAX_BODY_DEPTH} levels`, [
          { field: 'body', message: `must not be nested deeper than ${MAX_BODY_DEPTH} levels` },
        ]);
      }
    }
    return super.transform(value, metadata);
  }
}

/** ISO 8601 date-time with an explicit offset (decisions §1). */
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
