import { CronExpressionParser } from 'cron-parser';
import type { Workflow } from './workflow.entity.js';

/** A schedule trigger's next tick after `now`, in the workflow's time zone; null for other triggers. */
export function nextScheduleTick(w: Pick<Workflow, 'trigger' | 'settings'>, now: Date): Date | null {
  if (w.trigger.type !== 'schedule') return null;
  try {
    return CronExpressionParser.parse(w.trigger.cron, { currentDate: now, tz: w.settings.timezone }).next().toDate();
  } catch {
    return null;
  }
}
