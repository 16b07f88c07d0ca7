import { Injectable } from '@nestjs/common';
import { assertBatchSize } from '../batch/batch.js';
import { Clock } from '../common/clock.js';
import { AppError, conflict, notFound, validationError } from '../common/errors.js';
import { ContactsService } from '../contacts/contacts.service.js';
import { Transactions, type Tx } from '../database/transactions.js';
import { parseListQuery } from '../lists/list-query.js';
import { listEnvelope } from '../lists/list-sql.js';
import { ENROLLMENT_LIST_SPEC, type EnrolSource, EnrollmentsRepository } from './enrollments.repository.js';
import { ENROL_MAX } from './workflow.dto.js';
import type { Workflow } from './workflow.entity.js';
import { toEnrollmentRecord, toStepRunRecord } from './workflow-records.js';
import { WorkflowsRepository } from './workflows.repository.js';

/**
 * Enrollments: entering a workflow (by a trigger, by hand, on activation), their lists, one with
 * its history, leaving one, and moving running ones to another version. Entry follows the
 * workflow's reenrollment rule: never (once per contact), afterExit (again once the previous
 * enrollment ended), always (a running enrollment is exited and a new one starts). At most one
 * enrollment per workflow and contact runs at a time, whatever races (a partial unique index).
 */
@Injectable()
export class EnrollmentsService {
  private wake: () => void = () => undefined;

  constructor(
    private readonly enrollments: EnrollmentsRepository,
    private readonly workflows: WorkflowsRepository,
    private readonly contacts: ContactsService,
    private readonly transactions: Transactions,
    private readonly clock: Clock,
  ) {}

  /** Called after new enrollments commit (the runner, in a process that runs it). */
  onEnrolled(wake: () => void): void {
    this.wake = wake;
  }

  /** Wakes the runner once the caller's transaction is over (a pass started now would not see the rows yet). */
  notify(): void {
    setTimeout(() => this.wake(), 0).unref();
  }

  /**
   * Enrols contacts in an active workflow's current version inside `tx`, following its reenrollment
   * rule. `onlyNew`: only contacts that were never enrolled (a rebuilt segment, which does not say
   * who joined). Answers the new enrollments (ids and contacts).
   */
  async enrol(w: Workflow, source: EnrolSource, tx: Tx, onlyNew = false): Promise<{ id: number; contactId: number }[]> {
    const now = this.clock.now();
    const first = w.steps[0]?.key;
    if (!first) return [];
    // always: a contact named again restarts (a segment's members that are running keep going).
    if (w.settings.reenrollment === 'always' && !onlyNew && 'ids' in source && source.ids.length)
      await this.enrollments.endRunning(w.id, source.ids, 'exited', 're-enrolled', now, tx);
    const rows = await this.enrollments.enrol(
      { workflowId: w.id, version: w.version, stepKey: first, reenrollment: w.settings.reenrollment, at: now, onlyNew },
      source,
      tx,
    );
    if (rows.length) this.notify();
    return rows;
  }

  /**
   * `POST /api/workflows/{id}/enrollments`: enrols up to 10,000 contacts by hand. The workflow must be
   * active (409 otherwise). Contacts the reenrollment rule refuses are listed in `refused`; when it
   * refuses every existing contact asked for, the answer is a 409 naming their enrollments.
   */
  async enrolByHand(workflowId: number, contactIds: number[]) {
    assertBatchSize(contactIds, ENROL_MAX, 'contactIds');
    const wanted = [...new Set(contactIds)];
    return this.transactions.run(async (tx) => {
      const w = await this.workflows.findForShare(workflowId, tx);
      if (!w) throw notFound('Workflow', workflowId);
      if (w.status !== 'active')
        throw conflict(`Workflow ${workflowId} is ${w.status}: only an active workflow enrols contacts`, [{ field: 'status', message: 'must be active' }]);
      const rows = await this.enrol(w, { ids: wanted }, tx);
      const enrolled = new Set(rows.map((r) => r.contactId));
      const existing = await this.enrollments.existingContacts(wanted, tx);
      const notFoundIds = wanted.filter((id) => !existing.has(id));
      const refusedIds = wanted.filter((id) => existing.has(id) && !enrolled.has(id));
      const latest = await this.enrollments.latestOf(workflowId, refusedIds, tx);
      const refused = refusedIds.map((contactId) => ({
        contactId,
        enrollmentId: latest.get(contactId)?.id ?? null,
        status: latest.get(contactId)?.status ?? null,
      }));
      if (!rows.length && refused.length) {
        const shown = refused.slice(0, 10);
        throw new AppError(
          'conflict',
          `Not enrolled (reenrollment ${w.settings.reenrollment}): ${shown.map((r) => `contact ${r.contactId} has enrollment ${r.enrollmentId} (${r.status})`).join('; ')}`,
          shown.map((r) => ({ field: 'contactIds', message: `contact ${r.contactId} has enrollment ${r.enrollmentId} (${r.status})`, ...r })),
        );
      }
      const records = [];
      for (const r of rows.slice(0, 100)) {
        const e = await this.enrollments.find(workflowId, r.id, tx);
        if (e) records.push(toEnrollmentRecord(e));
      }
      return { enrolled: rows.length, enrollments: records, refused, notFound: notFoundIds };
    });
  }

  async list(workflowId: number, query: Record<string, unknown>) {
    // The parameters first: a bad one is a 400 whether or not the workflow exists.
    const spec = { ...ENROLLMENT_LIST_SPEC, name: `workflow ${workflowId} enrollments` };
    const q = parseListQuery(query, spec);
    if (!(await this.workflows.findRecord(workflowId))) throw notFound('Workflow', workflowId);
    const page = await this.enrollments.page(workflowId, q, spec);
    return listEnvelope(q, 'enrollments', page, page.items.map(toEnrollmentRecord));
  }

  async get(workflowId: number, id: number) {
    const e = await this.enrollments.find(workflowId, id);
    if (!e) throw notFound('Enrollment', id);
    return { ...toEnrollmentRecord(e), history: (await this.enrollments.history(id)).map(toStepRunRecord) };
  }

  /** DELETE of one enrollment: a running one exits (workflow.exited); one that ended is a 409. */
  async exit(workflowId: number, id: number) {
    return this.transactions.run(async (tx) => {
      const e = await this.enrollments.lockOne(workflowId, id, tx);
      if (!e) throw notFound('Enrollment', id);
      if (e.status !== 'active' && e.status !== 'waiting')
        throw conflict(`Enrollment ${id} already ended (${e.status})`, [{ field: 'status', message: 'must be active or waiting' }]);
      await this.enrollments.endRunning(workflowId, [e.contactId], 'exited', 'exited by request', this.clock.now(), tx);
      const after = await this.enrollments.find(workflowId, id, tx);
      if (!after) throw notFound('Enrollment', id);
      return toEnrollmentRecord(after);
    });
  }

  /** GET /api/contacts/{id}/workflows: every enrollment of the contact, with its workflow's name. */
  async ofContact(contactId: number, query: Record<string, unknown>) {
    const unknown = Object.keys(query);
    if (unknown.length) {
      throw validationError(
        `Unknown query parameter ${unknown.join(', ')}: this route takes none`,
        unknown.map((field) => ({ field, message: 'is not a parameter of this route' })),
      );
    }
    if (!(await this.contacts.exists(contactId))) throw notFound('Contact', contactId);
    const rows = await this.enrollments.ofContact(contactId);
    const names = await this.workflows.namesByIds([...new Set(rows.map((r) => r.workflowId))]);
    return { total: rows.length, workflows: rows.map((r) => ({ ...toEnrollmentRecord(r), workflowName: names.get(r.workflowId) ?? '' })) };
  }
}
