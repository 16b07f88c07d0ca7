import { CronExpressionParser } from 'cron-parser';

/** The first time strictly after `from` that a 5-field cron pattern fires (UTC), or null if never. */
export function nextCronTime(pattern: string, from: Date): Date | null {
  try {
    return CronExpressionParser.parse(pattern, { currentDate: from, tz: 'UTC' }).next().toDate();
  } catch {
    return null;
  }
}
