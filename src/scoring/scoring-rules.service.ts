import { Injectable } from '@nestjs/common';
import { auditOut, stampCreated, stampModified } from '../common/audit.js';
import { AppError, type ErrorDetail, notFound, validationError } from '../common/errors.js';
import type { Principal } from '../common/request.js';
import { Transactions, type Tx } from '../database/transactions.js';
import { ContactsService } from '../contacts/contacts.service.js';
import { EVENT_TYPES, EventsService, isEventType } from '../events/events.service.js';
import { type CompiledFilter, compileFilter, type FilterRegistry } from '../lists/filter-sql.js';
import type { FilterNode } from '../lists/filter-syntax.js';
import { parseListQuery } from '../lists/list-query.js';
import { listEnvelope } from '../lists/list-sql.js';
import { type RuleSource, ScoringRule } from './scoring-rule.entity.js';
import { CreateScoringRuleDto, UpdateScoringRuleDto } from './scoring.dto.js';
import { SCORING_RULE_LIST_SPEC, ScoringRulesRepository } from './scoring-rules.repository.js';
import { durationMs, MAX_DELTA, readFilter } from './scoring.rules.js';
import { trackedPropertiesRegistry } from '../tracking/index.js';
import { FilterSyntaxError } from '../lists/filter-syntax.js';
import { TrackedEventQueue } from '../tracking/tracked-event-queue.repository.js';

/** A scoring rule as the API returns it (the one mapper from row to record). */
export function toScoringRuleRecord(r: ScoringRule) {
  return {
    id: r.id,
    name: r.name,
    description: r.description,
    isPublished: r.isPublished,
    on: { [r.onKind]: r.onName, filter: r.filter } as { recordEvent?: string; trackedEvent?: string; filter: FilterNode | null },
    delta: r.delta,
    repeatable: r.repeatable,
    maxPerContact: r.maxPerContact,
    cooldown: r.cooldown,
    ...auditOut(r),
  };
}

export type ScoringRuleRecord = ReturnType<typeof toScoringRuleRecord>;

/** A rule as the engine applies it: stored or a what-if draft (id 0 and no creation time for drafts). */
export interface RuleDefinition {
  id: number;
  name: string;
  onKind: RuleSource;
  onName: string;
  filter: FilterNode | null;
  delta: number;
  repeatable: boolean;
  maxPerContact: number | null;
  cooldown: string | null;
  createdAt: Date | null;
}

type Mode = 'create' | 'replace' | 'patch';

function definitionOf(r: ScoringRule, createdAt: Date | null): RuleDefinition {
  return {
    id: r.id ?? 0,
    name: r.name,
    onKind: r.onKind,
    onName: r.onName,
    filter: r.filter,
    delta: r.delta,
    repeatable: r.repeatable,
    maxPerContact: r.maxPerContact,
    cooldown: r.cooldown,
    createdAt,
  };
}

/** The jsonb expression a tracked event's properties are compiled over (ScoringRepository.propertiesMatching). */
export const PROPERTIES_COLUMN = 'p.properties';
/** The scoring rules' consumer name on the tracked-event queue. */
export const SCORING_CONSUMER = 'scoring';

/**
 * Scoring rules: their resource (`/api/scoring-rules`) and the checks a rule's body gets (exactly one
 * of recordEvent and trackedEvent, a known event type, a filter that compiles, a delta within bounds).
 */
@Injectable()
export class ScoringRulesService {
  constructor(
    private readonly rules: ScoringRulesRepository,
    private readonly transactions: Transactions,
    private readonly events: EventsService,
    private readonly contacts: ContactsService,
    private readonly trackedQueue: TrackedEventQueue,
  ) {}

  /**
   * Rewrites the tracked event names scoring consumes (the published trackedEvent rules' names) in
   * `tx`, the transaction that changed a rule, after its row is written: an event stored after that
   * commit is queued for scoring (docs/decisions/tracked-event-stream.md).
   */
  private declareTracked(tx: Tx): Promise<void> {
    return this.trackedQueue.declare(SCORING_CONSUMER, (t) => this.rules.publishedNames('trackedEvent', t), tx);
  }

  async list(query: Record<string, unknown>) {
    const q = parseListQuery(query, SCORING_RULE_LIST_SPEC);
    const page = await this.rules.list(q);
    return listEnvelope(q, 'scoringRules', page, page.items.map(toScoringRuleRecord));
  }

  async get(id: number, tx?: Tx): Promise<ScoringRuleRecord> {
    const r = await this.rules.findRecord(id, tx);
    if (!r) throw notFound('Scoring rule', id);
    return toScoringRuleRecord(r);
  }

  async create(dto: CreateScoringRuleDto, who: Principal, tx?: Tx): Promise<ScoringRuleRecord> {
    const r = this.rules.create();
    await this.assign(r, dto, 'create');
    stampCreated(r, who);
    return this.transactions.run(async (t) => {
      const record = await this.get(await this.rules.save(r, t), t);
      await this.events.record(t, 'scoring_rule.created', record);
      await this.declareTracked(t);
      return record;
    }, tx);
  }

  async patch(id: number, dto: UpdateScoringRuleDto, who: Principal): Promise<ScoringRuleRecord> {
    return this.transactions.run(async (tx) => {
      const r = await this.rules.findForUpdate(id, tx);
      if (!r) throw notFound('Scoring rule', id);
      const before = toScoringRuleRecord(r);
      await this.assign(r, dto, 'patch');
      stampModified(r, who);
      const after = await this.get(await this.rules.save(r, tx), tx);
      await this.events.recordUpdate(tx, 'scoring_rule.updated', before, after);
      await this.declareTracked(tx);
      return after;
    });
  }

  async put(id: number, dto: CreateScoringRuleDto, who: Principal): Promise<{ created: boolean; scoringRule: ScoringRuleRecord }> {
    return this.transactions.run(async (tx) => {
      const r = await this.rules.findForUpdate(id, tx);
      if (!r) return { created: true, scoringRule: await this.create(dto, who, tx) };
      const before = toScoringRuleRecord(r);
      await this.assign(r, dto, 'replace');
      stampModified(r, who);
      const after = await this.get(await this.rules.save(r, tx), tx);
      await this.events.recordUpdate(tx, 'scoring_rule.updated', before, after);
      await this.declareTracked(tx);
      return { created: false, scoringRule: after };
    });
  }

  /** One of parallel deletes gets the rule, the others a 404. Its ledger rows stay (with their ruleId). */
  async remove(id: number): Promise<ScoringRuleRecord> {
    return this.transactions.run(async (tx) => {
      const r = await this.rules.findForUpdate(id, tx);
      if (!r || !(await this.rules.delete(id, tx))) throw notFound('Scoring rule', id);
      const record = toScoringRuleRecord(r);
      await this.events.record(tx, 'scoring_rule.deleted', record);
      await this.declareTracked(tx);
      return record;
    });
  }

  /** The published rules of one kind (one event type or name, when given), as the engine applies them. */
  async published(kind: RuleSource, name?: string, tx?: Tx): Promise<RuleDefinition[]> {
    return (await this.rules.published(kind, name, tx)).map((r) => definitionOf(r, r.createdAt));
  }

  /** A what-if draft checked exactly as a rule's body (400 naming `rules.<i>.<field>`, as the validation pipe names it), as the engine applies it. */
  async draft(dto: CreateScoringRuleDto, index: number): Promise<RuleDefinition> {
    const r = new ScoringRule();
    try {
      await this.assign(r, dto, 'create');
    } catch (e) {
      if (e instanceof AppError && e.details) {
        throw validationError(
          `Validation failed: ${e.details.map((d) => `rules.${index}.${d.field}: ${d.message}`).join('; ')}`,
          e.details.map((d) => ({ ...d, field: `rules.${index}.${d.field}` })),
        );
      }
      throw e;
    }
    return definitionOf(r, null);
  }

  /** The contacts filter registry (published custom fields included), read in `tx`. */
  contactsRegistry(tx?: Tx): Promise<FilterRegistry> {
    return this.contacts.filterRegistry([], tx);
  }

  /**
   * A rule's filter compiled: over contacts (alias `c`) with `contacts`, the contacts registry, for a
   * recordEvent rule; over PROPERTIES_COLUMN for a trackedEvent rule. Null for a rule without a filter,
   * undefined when a stored filter no longer compiles (a custom field was removed): such a rule applies to nothing.
   */
  compile(rule: RuleDefinition, contacts: FilterRegistry, now: Date): CompiledFilter | null | undefined {
    if (!rule.filter) return null;
    try {
      const registry = rule.onKind === 'recordEvent' ? contacts : trackedPropertiesRegistry(rule.filter, PROPERTIES_COLUMN);
      return compileFilter(rule.filter, registry, now).compiled;
    } catch {
      return undefined;
    }
  }

  /** Copies a body onto the rule and checks it; every problem is one 400 with details. */
  private async assign(r: ScoringRule, dto: UpdateScoringRuleDto, mode: Mode): Promise<void> {
    const errors: ErrorDetail[] = [];
    for (const k of ['name', 'isPublished', 'on', 'delta', 'repeatable'] as const) {
      if (dto[k] === null) errors.push({ field: k, message: 'must not be null' });
    }
    if (dto.name !== undefined && dto.name !== null) {
      r.name = dto.name.trim();
      if (!r.name) errors.push({ field: 'name', message: 'must not be empty' });
    }
    if (dto.description !== undefined || mode !== 'patch') r.description = dto.description ?? null;
    if (dto.isPublished !== undefined && dto.isPublished !== null) r.isPublished = dto.isPublished;
    else if (mode !== 'patch') r.isPublished = true;
    if (dto.repeatable !== undefined && dto.repeatable !== null) r.repeatable = dto.repeatable;
    else if (mode !== 'patch') r.repeatable = true;
    if (dto.maxPerContact !== undefined || mode !== 'patch') r.maxPerContact = dto.maxPerContact ?? null;
    if (dto.cooldown !== undefined || mode !== 'patch') {
      r.cooldown = dto.cooldown ?? null;
      if (r.cooldown !== null && durationMs(r.cooldown) === null) errors.push({ field: 'cooldown', message: 'must be a duration such as 1d' });
    }
    if (dto.delta !== undefined && dto.delta !== null) {
      r.delta = dto.delta;
      if (dto.delta === 0 || Math.abs(dto.delta) > MAX_DELTA) errors.push({ field: 'delta', message: `must not be 0 and at most ${MAX_DELTA} either way` });
    }
    if (dto.on) await this.assignOn(r, dto.on, errors);
    if (errors.length) throw validationError(`Validation failed: ${errors.map((e) => `${e.field}: ${e.message}`).join('; ')}`, errors);
  }

  /** What the rule reacts to: exactly one source; a known event type; a filter that compiles for that source. */
  private async assignOn(r: ScoringRule, on: NonNullable<UpdateScoringRuleDto['on']>, errors: ErrorDetail[]): Promise<void> {
    const record = on.recordEvent !== undefined && on.recordEvent !== null;
    const tracked = on.trackedEvent !== undefined && on.trackedEvent !== null;
    if (record === tracked) {
      errors.push({ field: 'on', message: 'must name exactly one of recordEvent (a change-feed event type) and trackedEvent (a tracked event name)' });
      return;
    }
    if (record) {
      if (!isEventType(on.recordEvent ?? '')) {
        errors.push({ field: 'on.recordEvent', message: `must be an event type of the catalogue: ${EVENT_TYPES.join(', ')}`, allowed: EVENT_TYPES });
        return;
      }
      r.onKind = 'recordEvent';
      r.onName = on.recordEvent as string;
    } else {
      r.onKind = 'trackedEvent';
      r.onName = (on.trackedEvent as string).trim();
      if (!r.onName) errors.push({ field: 'on.trackedEvent', message: 'must not be empty' });
    }
    r.filter = null;
    if (on.filter === undefined || on.filter === null) return;
    try {
      if (r.onKind === 'recordEvent') {
        r.filter = (await this.contacts.compileFilter(on.filter)).node;
      } else {
        const node = readFilter(on.filter);
        compileFilter(node, trackedPropertiesRegistry(node, PROPERTIES_COLUMN));
        r.filter = node;
      }
    } catch (e) {
      if (e instanceof FilterSyntaxError) errors.push({ field: 'on.filter', message: e.message });
      else if (e instanceof AppError) {
        for (const d of e.details ?? [{ field: 'filter', message: e.message }]) {
          const hint =
            r.onKind === 'trackedEvent' && d.message.includes('is not a filterable field') ? ' (a tracked event filter names properties.<name>)' : '';
          errors.push({ field: `on.${d.field}`, message: d.message + hint });
        }
      } else throw e;
    }
  }
}
