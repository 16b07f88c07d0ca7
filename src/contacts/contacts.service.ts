import { Injectable } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import { DataSource, EntityManager, QueryFailedError, Repository } from 'typeorm';
import { auditOut, stampCreated, stampModified } from '../common/audit.js';
import { AppError, conflict, fieldError, notFound } from '../common/errors.js';
import { ListSpec, paginate, parseListQuery } from '../common/list.js';
import type { Principal } from '../common/request.js';
import { toE164 } from '../common/validation.js';
import { NotificationsService } from '../notifications/notifications.service.js';
import { User } from '../auth/user.entity.js';
import { Contact } from './contact.entity.js';
import { CreateContactDto, UpdateContactDto } from './contact.dto.js';
import { ContactFieldValuesService } from '../fields/contact-field-values.service.js';

export const CONTACT_LIST_SPEC: ListSpec = {
  sortable: {
    id: 'c.id',
    name: 'c.name',
    email: 'c.email',
    phone: 'c.phone',
    company: 'c.company',
    title: 'c.title',
    createdAt: 'c.created_at',
    modifiedAt: 'c.modified_at',
  },
  // search_text is the lower-cased text of name, email, phone, company, title and custom field
  // values, kept by a trigger and indexed with pg_trgm (see the platform migration).
  searchExpression: 'c.search_text',
  countTable: 'contacts',
};

export type ContactRecord = ReturnType<ContactsService['toRecord']>;

@Injectable()
export class ContactsService {
  constructor(
    @InjectRepository(Contact) private readonly contacts: Repository<Contact>,
    @InjectDataSource() private readonly db: DataSource,
    private readonly notifications: NotificationsService,
    private readonly fieldValues: ContactFieldValuesService,
  ) {}

  toRecord(c: Contact, owners: Map<number, string>) {
    return {
      id: c.id,
      name: c.name,
      email: c.email,
      phone: c.phone,
      company: c.company,
      title: c.title,
      ownerId: c.ownerId,
      owner: c.ownerId !== null ? { id: c.ownerId, name: owners.get(c.ownerId) ?? null } : null,
      fields: c.fields ?? {},
      ...auditOut(c),
    };
  }

  /** Records for a batch of contacts, with their owners' names in one query. */
  async toRecords(list: Contact[]): Promise<ContactRecord[]> {
    const ids = [...new Set(list.map((c) => c.ownerId).filter((id): id is number => id !== null))];
    const owners = new Map<number, string>();
    if (ids.length) {
      const rows: { id: number; name: string }[] = await this.db.query(`SELECT id, name FROM users WHERE id = ANY($1)`, [ids]);
      for (const r of rows) owners.set(r.id, r.name);
    }
    return list.map((c) => this.toRecord(c, owners));
  }

  async list(query: Record<string, unknown>, scope?: (qb: ReturnType<Repository<Contact>['createQueryBuilder']>) => void) {
    const q = parseListQuery(query, CONTACT_LIST_SPEC);
    const qb = this.contacts.createQueryBuilder('c');
    scope?.(qb);
    const { total, items } = await paginate(qb, q, CONTACT_LIST_SPEC, { scoped: scope !== undefined });
    return { total, contacts: await this.toRecords(items) };
  }

  async findEntity(id: number, manager?: EntityManager): Promise<Contact> {
    const repo = manager ? manager.getRepository(Contact) : this.contacts;
    const c = await repo.findOne({ where: { id } });
    if (!c) throw notFound('Contact', id);
    return c;
  }

  async get(id: number): Promise<ContactRecord> {
    return (await this.toRecords([await this.findEntity(id)]))[0];
  }

  async create(dto: CreateContactDto, who: Principal): Promise<ContactRecord> {
    const contact = this.contacts.create();
    this.assign(contact, dto, true);
    const custom = await this.fieldValues.apply({}, dto.fields, 'create');
    contact.fields = custom.values;
    stampCreated(contact, who);
    return this.persist(contact, null, who, custom.unique);
  }

  async patch(id: number, dto: UpdateContactDto, who: Principal): Promise<ContactRecord> {
    const contact = await this.findEntity(id);
    const previousOwner = contact.ownerId;
    this.assign(contact, dto, false);
    const custom = await this.fieldValues.apply(contact.fields ?? {}, dto.fields, 'patch');
    contact.fields = custom.values;
    stampModified(contact, who);
    return this.persist(contact, previousOwner, who, custom.unique);
  }

  /** PUT: full replace when the id exists (omitted optional properties reset), else a new contact. */
  async put(id: number, dto: CreateContactDto, who: Principal): Promise<{ created: boolean; contact: ContactRecord }> {
    const existing = await this.contacts.findOne({ where: { id } });
    if (!existing) return { created: true, contact: await this.create(dto, who) };
    const previousOwner = existing.ownerId;
    this.assign(existing, dto, true);
    const custom = await this.fieldValues.apply(existing.fields ?? {}, dto.fields, 'replace');
    existing.fields = custom.values;
    stampModified(existing, who);
    return { created: false, contact: await this.persist(existing, previousOwner, who, custom.unique) };
  }

  async remove(id: number): Promise<ContactRecord> {
    const contact = await this.findEntity(id);
    const record = (await this.toRecords([contact]))[0];
    await this.contacts.delete({ id });
    return record;
  }

  /** Copies DTO values onto the entity; with `replace`, omitted optional properties are reset. */
  private assign(c: Contact, dto: UpdateContactDto, replace: boolean) {
    const set = <K extends keyof UpdateContactDto>(key: K, apply: (v: UpdateContactDto[K]) => void) => {
      if (dto[key] !== undefined) apply(dto[key]);
      else if (replace) apply(null as UpdateContactDto[K]);
    };
    if (dto.name === null) throw fieldError('name', 'must not be null');
    if (dto.email === null) throw fieldError('email', 'must not be null');
    if (dto.name !== undefined) c.name = dto.name.trim();
    if (dto.name !== undefined && c.name === '') throw fieldError('name', 'must not be empty');
    if (dto.email !== undefined) c.email = dto.email.trim();
    set('phone', (v) => (c.phone = v ? (toE164(v) ?? v.trim()) : null));
    set('company', (v) => (c.company = v ?? null));
    set('title', (v) => (c.title = v ?? null));
    set('ownerId', (v) => (c.ownerId = v ?? null));
  }

  private async persist(contact: Contact, previousOwner: number | null, who: Principal, uniqueFields: string[] = []): Promise<ContactRecord> {
    try {
      const saved = await this.db.transaction(async (m) => {
        await this.fieldValues.assertUnique(m, contact.id ?? null, contact.fields, uniqueFields);
        if (contact.ownerId !== null && contact.ownerId !== previousOwner) {
          const owner = await m.getRepository(User).findOne({ where: { id: contact.ownerId } });
          if (!owner) throw fieldError('ownerId', `user ${contact.ownerId} does not exist`);
        }
        const s = await m.getRepository(Contact).save(contact);
        if (s.ownerId !== null && s.ownerId !== previousOwner) {
          await this.notifications.notify(
            s.ownerId,
            'lead_assigned',
            `${who.userName} assigned the contact ${s.name} to you`,
            { leadId: s.id, leadName: s.name },
            m,
          );
        }
        return s;
      });
      return this.get(saved.id);
    } catch (e) {
      throw await this.translate(e, contact);
    }
  }

  private async translate(e: unknown, contact: Contact): Promise<unknown> {
    const code = (e as QueryFailedError & { driverError?: { code?: string; constraint?: string } }).driverError;
    if (e instanceof QueryFailedError && code?.code === '23505' && code.constraint === 'contacts_email_lower_uq') {
      const rows: { id: number }[] = await this.db.query(`SELECT id FROM contacts WHERE lower(email) = lower($1)`, [contact.email]);
      return conflict(`A contact with the email ${contact.email} already exists`, [
        { field: 'email', message: 'is already taken', existingId: rows[0]?.id ?? null },
      ]);
    }
    if (e instanceof AppError) return e;
    return e;
  }
}
