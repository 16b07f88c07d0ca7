import { Injectable, type PipeTransform } from '@nestjs/common';
import { AppError } from './errors.js';

const MAX_ID = 2147483647;

/** Path ids are positive 32-bit integers; anything else names no record, so it is a 404. */
@Injectable()
export class IdPipe implements PipeTransform<string, number> {
  transform(value: unknown): number {
    if (typeof value !== 'string' || !/^[1-9]\d{0,9}$/.test(value) || Number(value) > MAX_ID) {
      throw new AppError('not_found', `No record has the id "${String(value).slice(0, 40)}"`);
    }
    return Number(value);
  }
}

export function parseId(value: unknown): number | null {
  if (typeof value === 'number' && Number.isInteger(value) && value > 0 && value <= MAX_ID) return value;
  if (typeof value === 'string' && /^[1-9]\d{0,9}$/.test(value) && Number(value) <= MAX_ID) return Number(value);
  return null;
}
