import { type ArgumentMetadata, Injectable, type ValidationError, ValidationPipe } from '@nestjs/common';
import { AppError, type ErrorDetail } from '../common/errors.js';
import { changedElsewhereRoute } from '../common/validation.js';
import { cacheValidationRuleLookups } from '../patches/class-validator.js';

// Each class's rules are looked up once (src/server/README.md, "class-validator's rule lookups").
cacheValidationRuleLookups();

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
 * The global validation pipe: whitelist + forbid unknown properties (the API answers an unknown property with a 400), no implicit
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
    try {
      return await super.transform(value, metadata);
    } catch (e) {
      throw metadata.type === 'body' && e instanceof AppError ? withRouteHints(e, metadata.metatype) : e;
    }
  }
}

/** A refused property that another route changes (common/validation.ts, changedElsewhere): its detail names that route. */
function withRouteHints(e: AppError, body: unknown): AppError {
  let hinted = false;
  const details = e.details?.map((d) => {
    const route = d.message === 'should not exist' ? changedElsewhereRoute(body, d.field) : undefined;
    if (!route) return d;
    hinted = true;
    return { ...d, message: `is not writable here: change it with ${route}` };
  });
  if (!hinted || !details) return e;
  return new AppError(e.code, `Validation failed: ${details.map((d) => `${d.field}: ${d.message}`).join('; ')}`, details);
}
