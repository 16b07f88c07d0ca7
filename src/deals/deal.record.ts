import { auditOut } from '../common/audit.js';
import { iso, isoRequired } from '../common/dates.js';
import type { Deal } from './deal.entity.js';

/** A deal as the API returns it (the one mapper from row to record). */
export function toDealRecord(d: Deal) {
  return {
    id: d.id,
    title: d.title,
    value: Number(d.value),
    contact_id: d.contactId,
    expected_close_date: d.expectedCloseDate,
    pipeline_id: d.pipelineId,
    stage_id: d.stageId,
    stage: d.stage ?? '',
    entered_stage_at: isoRequired(d.enteredStageAt),
    probability: d.probability ?? d.stageProbability,
    status: d.status,
    product: d.product,
    quantity: d.quantity,
    closed_at: iso(d.closedAt),
    owner_id: d.ownerId,
    company_id: d.companyId,
    ...auditOut(d),
  };
}

export type DealRecord = ReturnType<typeof toDealRecord>;
