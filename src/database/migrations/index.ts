/**
 * Every migration, in order. ESM builds cannot glob-load classes, so each migration is listed here
 * (timestamps keep the order; TypeORM sorts by them too).
 */
import { Platform1763700000000 } from './1763700000000-platform.js';
import { CrmTables1763700000050 } from './1763700000050-crm-tables.js';
import { Assets1763700000300 } from './1763700000300-assets.js';

export const MIGRATIONS = [Platform1763700000000, CrmTables1763700000050, Assets1763700000300];
