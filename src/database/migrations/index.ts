/**
 * Every migration, in order. ESM builds cannot glob-load classes, so each migration is listed here
 * (timestamps keep the order; TypeORM sorts by them too).
 */
import { Platform1763700000000 } from './1763700000000-platform.js';

export const MIGRATIONS = [Platform1763700000000];
