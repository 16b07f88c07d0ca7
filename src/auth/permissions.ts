import { SetMetadata } from '@nestjs/common';

/** Resources a token can be granted access to (decisions §5). */
export const RESOURCES = [
  'contacts',
  'fields',
  'campaigns',
  'assets',
  'categories',
  'pointGroups',
  'reports',
  'textMessages',
  'notifications',
  'deals',
  'activities',
  'tokens',
] as const;
export type Resource = (typeof RESOURCES)[number];
export const ACTIONS = ['read', 'write', 'delete'] as const;
export type Action = (typeof ACTIONS)[number];

/** Every permission a token can hold: `<resource>:<action>` for each pair, plus `*` (everything). */
export const PERMISSIONS = ['*', ...RESOURCES.flatMap((r) => ACTIONS.map((a) => `${r}:${a}` as const))] as const;
export type Permission = (typeof PERMISSIONS)[number];

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

export const PERMISSION_KEY = 'sf:permission';
/** Any valid token, whatever its permissions (shown as "authenticated" in GET /api/endpoints). */
export const AUTHENTICATED = 'authenticated';
export const PUBLIC_KEY = 'sf:public';

/** The permission a route needs. Every route carries this, @Authenticated() or @Public(); the guard refuses anything else. */
export const RequirePermission = (permission: Permission) => SetMetadata(PERMISSION_KEY, permission);

/** A route any valid token may call, whatever its permissions (e.g. GET /api/version). */
export const Authenticated = () => SetMetadata(PERMISSION_KEY, AUTHENTICATED);

/**
 * Marks a route as reachable without an API token (health, public asset download, OAuth token
 * endpoint). `label` replaces "public" in GET /api/endpoints when the route checks another
 * credential itself (e.g. the metrics token).
 */
export const Public = (label?: string) => SetMetadata(PUBLIC_KEY, label ?? true);
