import { PERMISSIONS, type Permission } from '../common/route-access.js';

// The permission list and the route access decorators live in common/route-access.ts (common must
// not import auth); re-exported here for the features that import them from auth.
export {
  ACTIONS,
  AcceptsBasicAuth,
  AcceptsMetricsToken,
  AcceptsWriteKey,
  Authenticated,
  AUTHENTICATED,
  PERMISSION_KEY,
  PERMISSIONS,
  Public,
  PUBLIC_KEY,
  RequirePermission,
  RESOURCES,
  SignedBySmsGateway,
} from '../common/route-access.js';
export type { Action, Permission, Resource } from '../common/route-access.js';

export function isPermission(value: string): value is Permission {
  return (PERMISSIONS as readonly string[]).includes(value);
}

export function hasPermission(granted: ReadonlySet<string>, needed: Permission): boolean {
  return granted.has('*') || granted.has(needed);
}

/** A set of permissions `requested` may be granted by someone holding `granted` (no escalation). */
export function canGrant(granted: ReadonlySet<string>, requested: readonly string[]): boolean {
  if (granted.has('*')) return true;
  return requested.every((p) => p !== '*' && granted.has(p));
}

/** The permissions in `requested` that `granted` does not cover. */
export function lackingPermissions(granted: ReadonlySet<string>, requested: readonly string[]): string[] {
  return requested.filter((p) => !canGrant(granted, [p]));
}
