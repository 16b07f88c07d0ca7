import { Injectable } from '@nestjs/common';
import { Clock } from '../common/clock.js';
import { iso, isoRequired } from '../common/dates.js';
import type { Principal } from '../common/request.js';
import type { Tx } from '../database/transactions.js';
import { EventsService } from '../events/events.service.js';
import { type DealStage, type PipelineDeals, PipelinesService } from '../pipelines/pipelines.service.js';
import { type DealRecord, toDealRecord } from './deal.record.js';
import { DealsRepository } from './deals.repository.js';

/**
 * The stage ledger (deal_stage_changes): one append-only row per stage change of a deal, creation
 * included, written in the transaction of the change while the deal's row is locked (so that
 * parallel changes of one deal land one after the other, each with its row). Also what the
 * pipelines feature asks of the deals when stages change under them (PipelineDeals).
 */
@Injectable()
export class DealStagesService implements PipelineDeals {
  constructor(
    private readonly deals: DealsRepository,
    private readonly events: EventsService,
    private readonly pipelines: PipelinesService,
    private readonly clock: Clock,
  ) {}

  /**
   * After a deal was written: its ledger row when it entered a stage (created, or moved), and
   * deal.stage_changed (a move) / deal.won / deal.lost (its status became won or lost).
   */
  async recorded(tx: Tx, before: DealRecord | null, after: DealRecord, at: Date, who: Principal): Promise<void> {
    if (before === null || before.stage_id !== after.stage_id) {
      await this.deals.appendStageChanges(
        [
          {
            dealId: after.id,
            pipelineId: after.pipeline_id,
            fromStageId: before?.stage_id ?? null,
            toStageId: after.stage_id,
            at,
            by: who.userId,
            value: after.value,
            probability: after.probability,
          },
        ],
        tx,
      );
    }
    await this.events.recordMany(tx, transitionEvents(before, after));
  }

  /** A deal's stays, oldest first: each stage it entered, when, when it left, and the seconds spent (up to now for the current one). */
  async history(dealId: number) {
    const rows = await this.deals.stageHistory(dealId);
    const names = new Map((await this.pipelines.stagesByIds([...new Set(rows.map((r) => r.to_stage_id))])).map((s) => [s.id, s.name]));
    const now = this.clock.nowMs();
    return rows.map((r, i) => {
      const next = rows[i + 1];
      const left = next ? next.at.getTime() : null;
      return {
        id: Number(r.id),
        pipeline_id: r.pipeline_id,
        stage_id: r.to_stage_id,
        stage: names.get(r.to_stage_id) ?? null,
        from_stage_id: r.from_stage_id,
        entered_at: isoRequired(r.at),
        left_at: next ? iso(next.at) : null,
        seconds: Math.max(0, Math.floor(((left ?? now) - r.at.getTime()) / 1000)),
        by: r.by,
        value: Number(r.value),
        probability: r.probability,
      };
    });
  }

  count(pipelineId: number, stageId: number | null, tx: Tx): Promise<number> {
    return this.deals.countIn(pipelineId, stageId, tx);
  }

  /** Moves every deal of a stage being removed to `to`: one statement, then a ledger row and the events per deal. */
  async moveAll(fromStageId: number, to: DealStage, who: Principal, tx: Tx): Promise<number> {
    const locked = await this.deals.findInStageForUpdate(fromStageId, tx);
    if (!locked.length) return 0;
    const now = this.clock.now();
    const ids = locked.map((d) => d.id);
    await this.deals.moveToStage(ids, to, now, who, tx);
    const after = (await this.deals.findMany(ids, tx)).map(toDealRecord);
    const before = new Map(locked.map((d) => [d.id, toDealRecord(d)]));
    await this.deals.appendStageChanges(
      after.map((a) => ({
        dealId: a.id,
        pipelineId: a.pipeline_id,
        fromStageId,
        toStageId: a.stage_id,
        at: now,
        by: who.userId,
        value: a.value,
        probability: a.probability,
      })),
      tx,
    );
    await this.events.recordMany(
      tx,
      after.flatMap((a) => updateEvents(before.get(a.id) ?? a, a)),
    );
    return after.length;
  }

  /** The deals of a renamed or re-typed stage take its name and type (no ledger row: they stay in the stage). */
  async restamp(stage: DealStage, who: Principal, tx: Tx): Promise<void> {
    const locked = await this.deals.findInStageForUpdate(stage.id, tx);
    if (!locked.length) return;
    await this.deals.restamp(stage, this.clock.now(), who, tx);
    const after = (
      await this.deals.findMany(
        locked.map((d) => d.id),
        tx,
      )
    ).map(toDealRecord);
    const before = new Map(locked.map((d) => [d.id, toDealRecord(d)]));
    await this.events.recordMany(
      tx,
      after.flatMap((a) => updateEvents(before.get(a.id) ?? a, a)),
    );
  }
}

type Event = Parameters<EventsService['recordMany']>[1][number];

/** deal.updated (the changed properties' old values) and the transitions a change made. */
function updateEvents(before: DealRecord, after: DealRecord): Event[] {
  const previous: Record<string, unknown> = {};
  for (const k of Object.keys(after) as (keyof DealRecord)[]) {
    if (k === 'modifiedAt' || k === 'modifiedBy' || k === 'modifiedByUser') continue;
    if (before[k] !== after[k]) previous[k] = before[k];
  }
  return [{ type: 'deal.updated', data: after, previous }, ...transitionEvents(before, after)];
}

/** deal.stage_changed when the deal moved (previous: its stage, stage_id and pipeline_id); deal.won / deal.lost when its status became won / lost. */
function transitionEvents(before: DealRecord | null, after: DealRecord): Event[] {
  const out: Event[] = [];
  if (before && before.stage_id !== after.stage_id) {
    out.push({ type: 'deal.stage_changed', data: after, previous: { stage: before.stage, stage_id: before.stage_id, pipeline_id: before.pipeline_id } });
  }
  if (after.status !== 'open' && before?.status !== after.status) {
    out.push({ type: after.status === 'won' ? 'deal.won' : 'deal.lost', data: after, previous: before ? { status: before.status } : null });
  }
  return out;
}
