import { Injectable, type PipeTransform } from '@nestjs/common';
import { notFound } from '../common/errors.js';
import type { FieldObject } from './field-rules.js';
import { isFieldObject } from './fields.service.js';

/** The `<object>` path segment of `/api/fields/<object>/...`: contact or company, anything else is a 404. */
@Injectable()
export class FieldObjectPipe implements PipeTransform<string, FieldObject> {
  transform(value: unknown): FieldObject {
    if (typeof value !== 'string' || !isFieldObject(value)) {
      throw notFound(`Unknown field object "${String(value).slice(0, 40)}"; use contact or company`);
    }
    return value;
  }
}
