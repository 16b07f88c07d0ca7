/**
 * Pipeline rules that need no database: stage types and the checks a pipeline's stage list must
 * pass. Kept free of Nest and TypeORM so that the unit spec can import them.
 */
import type { ErrorDetail } from '../common/errors.js';

export const STAGE_TYPES = ['open', 'won', 'lost'] as const;
export type StageType = (typeof STAGE_TYPES)[number];
/** Stages a pipeline may have. */
export const MAX_STAGES = 100;
/** The longest window a report takes (from .. to): five years. */
export const MAX_REPORT_WINDOW_DAYS = 5 * 366;

export interface StageShape {
  name: string;
  type: StageType;
}

/**
 * What is wrong with a pipeline's stage list (empty when nothing): at least one open stage, no two
 * stages with one name, at most MAX_STAGES.
 */
export function stageListProblems(stages: readonly StageShape[], field = 'stages'): ErrorDetail[] {
  const problems: ErrorDetail[] = [];
  if (stages.length > MAX_STAGES) problems.push({ field, message: `must hold at most ${MAX_STAGES} stages` });
  if (!stages.some((s) => s.type === 'open')) problems.push({ field, message: 'must hold at least one open stage' });
  const seen = new Set<string>();
  for (const s of stages) {
    if (seen.has(s.name)) problems.push({ field, message: `two stages are named ${JSON.stringify(s.name)}: stage names are unique in a pipeline` });
    seen.add(s.name);
  }
  return problems;
}

/** The stage to put a deal in when only its status is given: the first stage of that type, in order (null when none). */
export function firstStageOfType<T extends { type: StageType }>(stages: readonly T[], type: StageType): T | null {
  return stages.find((s) => s.type === type) ?? null;
}
