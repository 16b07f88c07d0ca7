/** Activity rules that need no database (importable by unit specs). */
export const ACTIVITY_TYPES = ['call', 'email', 'meeting'] as const;
export type ActivityType = (typeof ACTIVITY_TYPES)[number];
