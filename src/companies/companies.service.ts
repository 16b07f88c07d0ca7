import { Injectable } from '@nestjs/common';
import { stampCreated, stampModified } from '../common/audit.js';
import { assertBatchPermission, type BatchAnswer, BatchRunner } from '../batch/batch.js';
import type { BatchWriteDto } from '../batch/batch.dto.js';
import { iso } from '../common/dates.js';
import { fieldError, notFound, rejectNulls } from '../common/errors.js';
import type { FilterField } from '../lists/filter-sql.js';
import { parseListQuery } from '../lists/list-query.js';
import type { ListExtras } from '../lists/list-spec.js';
import { listEnvelope } from '../lists/list-sql.js';
import { toE164 } from '../common/phone.js';
import type { Principal } from '../common/request.js';
import { ContactsService, customFilterField } from '../contacts/contacts.service.js';
import { Transactions, type Tx } from '../database/transactions.js';
import { DealsService } from '../deals/deals.service.js';
import { EventsService } from '../events/events.service.js';
import { ContactFieldValuesService } from '../fields/contact-field-values.service.js';
import { JOB_IDS } from '../jobs/job-names.js';
import { JobQueue } from '../jobs/job-queue.js';
import { Company } from './company.entity.js';
import { CreateCompanyDto, UpdateCompanyDto } from './company.dto.js';
import { normalizeDomain, normalizeWebsite } from './company.rules.js';
import { type CompanyRecord, PLAIN_TEXT_PROPERTIES, toCompanyRecord } from './company.columns.js';
import { type BackfillActor, type BackfillRunRow, CompaniesRepository } from './companies.repository.js';
import { COMPANY_LIST_SPEC } from './company.columns.js';

/** The list's sortable columns and filters, read by the controller's OpenAPI parameters. */

export { toCompanyRecord, type CompanyRecord };

function toRunRecord(r: BackfillRunRow) {
  return {
    id: r.id,
    status: r.status,
    trigger: r.trigger,
    companiesCreated: r.companies_created,
    contactsLinked: r.contacts_linked,
    error: r.error,
    createdAt: iso(r.created_at),
    startedAt: iso(r.started_at),
    finishedAt: iso(r.finished_at),
  };
}

export type BackfillRunRecord = ReturnType<typeof toRunRecord>;

/**
 * Companies. The domain's uniqueness, the owner's existence and the contacts' and deals' company
 * references are enforced by the database (translated by the constraint registry), never by a
 * SELECT that could race; custom values follow the published company fields (the fields feature's
 * rules, as for contacts).
 */
@Injectable()
export class CompaniesService {
  constructor(
    private readonly companies: CompaniesRepository,
    private readonly transactions: Transactions,
    private readonly events: EventsService,
    private readonly fieldValues: ContactFieldValuesService,
    private readonly contacts: ContactsService,
    private readonly deals: DealsService,
    private readonly jobs: JobQueue,
    private readonly batches: BatchRunner,
  ) {}

  async list(query: Record<string, unknown>) {
    const q = parseListQuery(query, COMPANY_LIST_SPEC, await this.listExtras(query));
    const page = await this.companies.page(q);
    const owners = await this.companies.ownerNames(page.items.flatMap((c) => (c.ownerId !== null ? [c.ownerId] : [])));
    const records = page.items.map((c) => toCompanyRecord(c, c.ownerId !== null ? (owners.get(c.ownerId) ?? null) : null));
    return listEnvelope(q, 'companies', page, records);
  }

  /**
   * The published company fields as filter fields (`fields.<alias>` on `co.fields`, typed by the
   * field) and sparse names, read (from the field cache) only when the query has a filter or a
   * fields selection.
   */
  private async listExtras(query: Record<string, unknown>): Promise<ListExtras> {
    if (query.filter === undefined && query.fields === undefined) return {};
    const filterable: Record<string, FilterField> = {};
    const properties: string[] = [];
    for (const rule of await this.fieldValues.publishedRules(undefined, 'company')) {
      properties.push(`fields.${rule.alias}`);
      filterable[`fields.${rule.alias}`] = customFilterField(rule.alias, rule.type, rule.options, 'co.fields');
    }
    return { filterable, properties };
  }

  async get(id: number, tx?: Tx): Promise<CompanyRecord> {
    const c = await this.companies.findRecord(id, tx);
    if (!c) throw notFound('Company', id);
    return this.record(c, tx);
  }

  private async record(c: Company, tx?: Tx): Promise<CompanyRecord> {
    const owners = c.ownerId !== null ? await this.companies.ownerNames([c.ownerId], tx) : new Map<number, string>();
    return toCompanyRecord(c, c.ownerId !== null ? (owners.get(c.ownerId) ?? null) : null);
  }

  async create(dto: CreateCompanyDto, who: Principal, outer?: Tx): Promise<CompanyRecord> {
    const c = this.companies.create();
    this.assign(c, dto, true);
    const custom = await this.fieldValues.apply({}, dto.fields, 'create', 'company');
    c.fields = custom.values;
    stampCreated(c, who);
    return this.transactions.run(async (tx) => {
      await this.fieldValues.assertUnique(tx, null, c.fields, custom.unique, 'company');
      const record = await this.get(await this.companies.save(c, tx), tx);
      await this.events.record(tx, 'company.created', record);
      return record;
    }, outer);
  }

  /**
   * PATCH: the row is locked while it is read and written, so parallel edits of different
   * properties all land. The custom-field rules are read before the lock is taken.
   */
  async patch(id: number, dto: UpdateCompanyDto, who: Principal, outer?: Tx): Promise<CompanyRecord> {
    rejectNulls(dto, ['name']);
    const applyFields = await this.fieldValues.prepare(dto.fields, 'patch', 'company');
    return this.transactions.run(async (tx) => {
      const c = await this.companies.findForUpdate(id, tx);
      if (!c) throw notFound('Company', id);
      return this.write(c, dto, false, applyFields, who, tx);
    }, outer);
  }

  /**
   * Creates, updates or upserts up to 500 companies named by id, each exactly as its single-record
   * route (the import jobs' write path; with `outer`, inside that transaction). No HTTP route yet.
   */
  batch(dto: BatchWriteDto, who: Principal, outer?: Tx): Promise<BatchAnswer> {
    assertBatchPermission(dto, who, 'companies:delete');
    return this.batches.runById(
      dto,
      {
        createDto: CreateCompanyDto,
        updateDto: UpdateCompanyDto,
        create: (body, tx) => this.create(body as CreateCompanyDto, who, tx),
        patch: (id, body, tx) => this.patch(id, body, who, tx),
        remove: (id) => this.remove(id, who),
      },
      outer,
    );
  }

  /** PUT: full replace when the id exists (omitted optional properties reset), else a new company with a new id. */
  async put(id: number, dto: CreateCompanyDto, who: Principal): Promise<{ created: boolean; company: CompanyRecord }> {
    const applyFields = await this.fieldValues.prepare(dto.fields, 'replace', 'company');
    const replaced = await this.transactions.run(async (tx) => {
      const c = await this.companies.findForUpdate(id, tx);
      if (!c) return null;
      return this.write(c, dto, true, applyFields, who, tx);
    });
    if (!replaced) return { created: true, company: await this.create(dto, who) };
    return { created: false, company: replaced };
  }

  private async write(
    c: Company,
    dto: UpdateCompanyDto,
    replace: boolean,
    applyFields: (current: Record<string, unknown>) => { values: Record<string, unknown>; unique: string[] },
    who: Principal,
    tx: Tx,
  ): Promise<CompanyRecord> {
    const before = await this.record(c, tx);
    this.assign(c, dto, replace);
    const custom = applyFields(c.fields ?? {});
    c.fields = custom.values;
    await this.fieldValues.assertUnique(tx, c.id, c.fields, custom.unique, 'company');
    stampModified(c, who);
    const after = await this.get(await this.companies.save(c, tx), tx);
    await this.events.recordUpdate(tx, 'company.updated', before, after);
    return after;
  }

  /**
   * Deletes the company after detaching its contacts and deals (companyId / company_id set to null,
   * modifiedAt now, each with its update event), in one transaction. The row lock makes parallel
   * deletes wait: exactly one gets the company, the others a 404.
   */
  async remove(id: number, who: Principal): Promise<CompanyRecord> {
    return this.transactions.run(async (tx) => {
      const c = await this.companies.findForUpdate(id, tx);
      if (!c) throw notFound('Company', id);
      const record = await this.record(c, tx);
      await this.contacts.detachCompany(id, c.name, who, tx);
      await this.deals.detachCompany(id, who, tx);
      if (!(await this.companies.delete(id, tx))) throw notFound('Company', id);
      await this.events.record(tx, 'company.deleted', record);
      return record;
    });
  }

  /**
   * Makes the contact's primary company this one (companyId, and company set to the company's
   * name); a contact that already belongs to it is left as it is (not an error). 404 when the
   * company or the contact does not exist. The company is locked against deletion meanwhile.
   */
  async addContact(companyId: number, contactId: number, who: Principal): Promise<{ success: true }> {
    await this.transactions.run(async (tx) => {
      if (!(await this.companies.lockForReference(companyId, tx))) throw notFound('Company', companyId);
      await this.contacts.joinCompany(contactId, companyId, who, tx);
    });
    return { success: true };
  }

  /** Clears the contact's company (its `company` text is kept); 404 when either does not exist or the contact does not belong to the company. */
  async removeContact(companyId: number, contactId: number, who: Principal): Promise<{ success: true }> {
    await this.transactions.run(async (tx) => {
      if (!(await this.companies.lockForReference(companyId, tx))) throw notFound('Company', companyId);
      await this.contacts.leaveCompany(contactId, companyId, who, tx);
    });
    return { success: true };
  }

  /** The company's contacts, with exactly the contacts list's parameters and envelope. */
  async listContacts(companyId: number, query: Record<string, unknown>) {
    if (!(await this.companies.exists(companyId))) throw notFound('Company', companyId);
    return this.contacts.listOfCompany(companyId, query);
  }

  /**
   * POST /api/companies/backfill: records a queued run and queues its job (the job layer runs it:
   * a BullMQ worker, or this process without Redis). Answers the run; its outcome is read with
   * getBackfill. When the job cannot be queued the run is marked failed and the error answered.
   */
  async startBackfill(who: Principal): Promise<BackfillRunRecord> {
    const run = await this.companies.createRun('api', { userId: who.userId, userName: who.userName });
    try {
      await this.jobs.enqueue('companies.backfill', { runId: run.id }, { jobId: JOB_IDS.companiesBackfill(run.id), uniqueId: true });
    } catch (e) {
      await this.companies.markRun(run.id, 'failed', 'the job could not be queued');
      throw e;
    }
    return toRunRecord(run);
  }

  /** The CLI's companies:backfill: a run executed right here, answered once it is done. */
  async backfillNow(): Promise<BackfillRunRecord> {
    const run = await this.companies.createRun('cli', { userId: null, userName: 'cli' });
    try {
      await this.runBackfill(run.id);
    } catch (e) {
      await this.companies.markRun(run.id, 'failed', (e as Error).message.slice(0, 500));
      throw e;
    }
    return this.getBackfill(run.id);
  }

  async getBackfill(runId: number): Promise<BackfillRunRecord> {
    const run = await this.companies.findRun(runId);
    if (!run) throw notFound('Backfill run', runId);
    return toRunRecord(run);
  }

  /**
   * Runs a backfill (the job's work): in one transaction, serialised with other runs, two set-based
   * statements: companies for the distinct contact company strings that no company has yet (case-
   * insensitive, trimmed, the first-seen spelling), then every contact without a company linked to
   * the company its string names. Running it again creates and links nothing new; a run already
   * completed (a duplicate delivery of its job) does nothing.
   */
  async runBackfill(runId: number): Promise<void> {
    await this.companies.markRun(runId, 'running');
    const defaults = await this.fieldValues.defaults('company');
    await this.transactions.run(async (tx) => {
      await this.companies.lockBackfill(tx);
      const run = await this.companies.lockRun(runId, tx);
      if (!run || run.status === 'completed') return;
      const actor: BackfillActor = { userId: run.created_by ?? null, userName: run.created_by_user ?? 'cli' };
      const created = await this.companies.insertFromContactCompanies(actor, defaults, tx);
      const linked = await this.contacts.linkByCompanyName(actor, tx);
      await this.companies.completeRun(runId, created, linked, tx);
    });
  }

  /** Marks a run failed for good (its job used up its attempts). */
  failBackfill(runId: number, error: string): Promise<void> {
    return this.companies.markRun(runId, 'failed', error.slice(0, 500));
  }

  /** Copies DTO values onto the entity; with `replace` (create, PUT), omitted optional properties are cleared. */
  private assign(c: Company, dto: UpdateCompanyDto, replace: boolean) {
    const given = (k: keyof UpdateCompanyDto) => dto[k] !== undefined || replace;
    const text = (v: string | null | undefined) => (v === null || v === undefined || v.trim() === '' ? null : v.trim());
    if (dto.name !== undefined && dto.name !== null) {
      c.name = dto.name.trim();
      if (c.name === '') throw fieldError('name', 'must not be empty');
    }
    if (given('domain')) {
      const raw = text(dto.domain);
      c.domain = raw === null ? null : normalizeDomain(raw);
      if (raw !== null && c.domain === null) throw fieldError('domain', 'must be an internet domain name, e.g. example.com');
    }
    if (given('website')) {
      const raw = text(dto.website);
      c.website = raw === null ? null : normalizeWebsite(raw);
      if (raw !== null && c.website === null) throw fieldError('website', 'must be an http(s) URL, e.g. https://example.com');
    }
    if (given('phone')) {
      const raw = text(dto.phone);
      c.phone = raw === null ? null : (toE164(raw) ?? raw);
    }
    for (const k of PLAIN_TEXT_PROPERTIES) if (given(k)) c[k] = text(dto[k]);
    if (given('size')) c.size = dto.size ?? null;
    if (given('ownerId')) c.ownerId = dto.ownerId ?? null;
  }
}
