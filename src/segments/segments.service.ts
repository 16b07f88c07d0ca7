import { Injectable } from '@nestjs/common';
import { fieldError } from '../common/errors.js';
import { ContactsService } from '../contacts/contacts.service.js';

/** How many matching contacts a preview shows. */
export const PREVIEW_SAMPLE_SIZE = 10;

/**
 * Segments of contacts (issue 14 part 4). So far: the preview of a filter, through the contacts
 * list (the same filter registry, custom fields included, and the same checks and limits).
 */
@Injectable()
export class SegmentsService {
  constructor(private readonly contacts: ContactsService) {}

  async preview(filter: unknown) {
    if (typeof filter === 'string' && filter.trim() === '') throw fieldError('filter', 'must not be empty');
    const { total, contacts } = await this.contacts.list({ filter, limit: String(PREVIEW_SAMPLE_SIZE), orderBy: 'id' });
    return { count: total, sample: contacts };
  }
}
