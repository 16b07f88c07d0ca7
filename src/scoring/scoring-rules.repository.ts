import { Injectable } from '@nestjs/common';
import { Transactions, type Tx } from '../database/transactions.js';
import { auditFields, defineList } from '../lists/list-spec.js';
import { RecordStore } from '../lists/record-store.js';
import { type RuleSource, ScoringRule } from './scoring-rule.entity.js';

export const SCORING_RULE_LIST_SPEC = defineList({
  name: 'scoring rules',
  sortable: ['id', 'name', 'isPublished', 'delta', 'createdAt', 'modifiedAt'],
  searchExpression: "lower(r.name || ' ' || coalesce(r.description, '') || ' ' || r.on_name)",
  filters: { isPublished: { type: 'boolean', column: 'r.is_published' } },
  fields: {
    id: { type: 'id', sql: 'r.id' },
    name: { type: 'string', sql: 'r.name' },
    description: { type: 'string', sql: 'r.description' },
    isPublished: { type: 'boolean', sql: 'r.is_published' },
    'on.recordEvent': { type: 'string', sql: "(CASE WHEN r.on_kind = 'recordEvent' THEN r.on_name END)", description: 'the change-feed event type' },
    'on.trackedEvent': { type: 'string', sql: "(CASE WHEN r.on_kind = 'trackedEvent' THEN r.on_name END)", description: "the tracked event's name" },
    delta: { type: 'int', sql: 'r.delta' },
    repeatable: { type: 'boolean', sql: 'r.repeatable' },
    maxPerContact: { type: 'int', sql: 'r.max_per_contact' },
    cooldown: { type: 'string', sql: 'r.cooldown' },
    ...auditFields('r'),
  },
  properties: [
    'id',
    'name',
    'description',
    'isPublished',
    'on',
    'delta',
    'repeatable',
    'maxPerContact',
    'cooldown',
    'createdAt',
    'modifiedAt',
    'createdBy',
    'createdByUser',
    'modifiedBy',
    'modifiedByUser',
  ],
});

/** Every query of the scoring_rules table (the shared CRUD of RecordStore, and the published rules the engine applies). */
@Injectable()
export class ScoringRulesRepository extends RecordStore<ScoringRule> {
  constructor(transactions: Transactions) {
    super(transactions, ScoringRule, 'r', SCORING_RULE_LIST_SPEC);
  }

  /** The distinct event names (types) the published rules of one kind react to, in name order. */
  async publishedNames(kind: RuleSource, tx?: Tx): Promise<string[]> {
    const rows: { name: string }[] = await this.transactions
      .handle(tx)
      .query(`SELECT DISTINCT on_name AS name FROM scoring_rules WHERE is_published AND on_kind = $1 ORDER BY 1`, [kind]);
    return rows.map((r) => r.name);
  }

  /** The published rules of one kind (of one event type or name, when given), in id order. */
  published(kind: RuleSource, name?: string, tx?: Tx): Promise<ScoringRule[]> {
    return this.repo(tx).find({ where: { isPublished: true, onKind: kind, ...(name !== undefined ? { onName: name } : {}) }, order: { id: 'ASC' } });
  }
}
