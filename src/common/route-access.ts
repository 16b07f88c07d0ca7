/**
 * Route access metadata: who may call a route and with which credential. Every route declares it
 * with these decorators; the global guard chain (auth/auth.guards.ts, rate-limit/, common/
 * same-origin.guard.ts) enforces it, and the route table (GET /api/endpoints, the OpenAPI document,
 * the reviewed permission snapshot) is generated from it. Closed by default: a route without
 * @Public() or a permission is refused.
 */
import { applyDecorators, type ExecutionContext, SetMetadata } from '@nestjs/common';
import { Reflector } from '@nestjs/core';

/** Resources a token can be granted access to, each with `<resource>:read`, `:write` and `:delete` (docs/decisions/api-tokens-and-oauth.md). */
export const RESOURCES = [
  'contacts',
  'companies',
  'segments',
  'fields',
  'campaigns',
  'assets',
  'categories',
  'pointGroups',
  'reports',
  'textMessages',
  'notifications',
  'deals',
  'pipelines',
  'activities',
  'tokens',
  'webhooks',
  'workflows',
  'scoring',
] as const;
export type Resource = (typeof RESOURCES)[number];
export const ACTIONS = ['read', 'write', 'delete'] as const;
export type Action = (typeof ACTIONS)[number];

/**
 * Every permission a token can hold: `<resource>:<action>` for each pair, `events:read` (the event
 * feed is read-only), the import and export jobs' `imports:read|write` and `exports:read|write`
 * (which also need the imported object's write or the exported object's read permission), the tracked
 * events' `tracking:write` (the intake) and `tracking:read` (definitions, list, timelines), plus `*` (everything).
 */
export const PERMISSIONS = [
  '*',
  ...RESOURCES.flatMap((r) => ACTIONS.map((a) => `${r}:${a}` as const)),
  'events:read',
  'imports:read',
  'imports:write',
  'exports:read',
  'exports:write',
  'tracking:read',
  'tracking:write',
] as const;
export type Permission = (typeof PERMISSIONS)[number];

export const PERMISSION_KEY = 'sf:permission';
/** Permissions a route needs besides its main one (a route that answers another resource's records needs that resource's read). */
export const ALSO_REQUIRES_KEY = 'sf:also-requires';
/** Any valid token, whatever its permissions (shown as "authenticated" in GET /api/endpoints). */
export const AUTHENTICATED = 'authenticated';
export const PUBLIC_KEY = 'sf:public';
export const CREDENTIAL_KEY = 'sf:credential';
/** Marks the catch-all route that answers unknown paths (404/405); it is not listed as an endpoint. */
export const FALLBACK_ROUTE_KEY = 'sf:fallback-route';

/**
 * How a caller proves who it is on a route:
 * - `none`: nothing (a @Public() route; a bearer token, when sent, still selects the rate-limit account);
 * - `token`: `Authorization: Bearer <API token or OAuth access token>` (the default);
 * - `token-or-basic`: a token as Bearer, or as the password of HTTP Basic (which browsers cache, so
 *   such routes also refuse cross-origin state-changing requests);
 * - `write-key`: a token as Bearer, or as the user name of HTTP Basic with an empty password (Segment's
 *   write-key convention, which its tracking libraries send: the tracking intake);
 * - `metrics-token`: `Authorization: Bearer <METRICS_TOKEN>`, or a token as for `token`;
 * - `sms-signature`: `X-Signature: t=<unix seconds>,sha256=<HMAC-SHA256 of "<t>.<raw body>" with SMS_WEBHOOK_SECRET>`,
 *   the timestamp within 5 minutes of the server's time (sms/signature.ts);
 * - `session`: the account console's session cookie (checked by account/console.guard.ts; no token is
 *   accepted there, and the cookie is never accepted by a token route);
 * - `signed-link`: a link the service handed out, signed and expiring (`?expires=<unix seconds>&signature=<hex>`,
 *   e.g. an export's download), checked by the verifier its feature registers with SignedLinks.
 */
export const CREDENTIALS = ['none', 'token', 'token-or-basic', 'write-key', 'metrics-token', 'sms-signature', 'session', 'signed-link'] as const;
export type Credential = (typeof CREDENTIALS)[number];

/**
 * The permission a route needs from a token. Every route carries this, @Authenticated(), @Public() or a credential of its own.
 * Further permissions are needed too: a route of one resource that answers records of another (a segment's member contacts)
 * also needs that resource's read permission, e.g. `@RequirePermission('segments:read', 'contacts:read')`.
 */
export const RequirePermission = (permission: Permission, ...also: Permission[]) =>
  also.length ? applyDecorators(SetMetadata(PERMISSION_KEY, permission), SetMetadata(ALSO_REQUIRES_KEY, also)) : SetMetadata(PERMISSION_KEY, permission);

/** A route any valid token may call, whatever its permissions (e.g. GET /api/version). */
export const Authenticated = () => SetMetadata(PERMISSION_KEY, AUTHENTICATED);

/** A route reachable without any credential (health, public asset download, OAuth token endpoint). */
export const Public = () => applyDecorators(SetMetadata(PUBLIC_KEY, true), SetMetadata(CREDENTIAL_KEY, 'none'));

/** The route takes a token as Bearer or as the password of HTTP Basic (a browser page such as the queue dashboard). */
export const AcceptsBasicAuth = () => SetMetadata(CREDENTIAL_KEY, 'token-or-basic');

/** The route takes a token as Bearer or as a write key: HTTP Basic with the token as user name and an empty password (the tracking intake). */
export const AcceptsWriteKey = () => SetMetadata(CREDENTIAL_KEY, 'write-key');

/** The route takes `Bearer <METRICS_TOKEN>` (a Prometheus scraper) besides a token holding its permission. */
export const AcceptsMetricsToken = () => SetMetadata(CREDENTIAL_KEY, 'metrics-token');

/** The route is called by the SMS gateway, which signs the raw body with SMS_WEBHOOK_SECRET; no token. */
export const SignedBySmsGateway = () => SetMetadata(CREDENTIAL_KEY, 'sms-signature');

/** The route is reached through a signed, expiring link the service handed out (an export's download); no token. */
export const SignedLink = () => SetMetadata(CREDENTIAL_KEY, 'signed-link');

/** A signed-in account console page: the session cookie, never a token. */
export const SignedInSession = () => applyDecorators(SetMetadata(PUBLIC_KEY, true), SetMetadata(CREDENTIAL_KEY, 'session'));

/** Label shown as the permission of a route that needs no token permission but a signature (sms-signature, signed-link). */
export const SIGNATURE_PERMISSION = 'signature';

/** What a route needs, read from its metadata (handler first, then controller). */
export interface RouteAccess {
  credential: Credential;
  /** A permission, `authenticated`, `public`, or `signature` (sms-signature and signed-link routes). */
  permission: string | null;
  /** Permissions needed besides `permission` (empty for most routes). */
  alsoRequires: readonly Permission[];
}

const reflector = new Reflector();

/** The access rule of a handler in a controller (also used by the route table). */
export function routeAccessOf(handler: object, controller: object): RouteAccess {
  const targets = [handler, controller] as Parameters<Reflector['getAllAndOverride']>[1];
  const isPublic = reflector.getAllAndOverride<boolean | undefined>(PUBLIC_KEY, targets) === true;
  const credential = reflector.getAllAndOverride<Credential | undefined>(CREDENTIAL_KEY, targets) ?? (isPublic ? 'none' : 'token');
  const alsoRequires: readonly Permission[] = [];
  if (credential === 'none') return { credential, permission: 'public', alsoRequires };
  if (credential === 'sms-signature') return { credential, permission: SIGNATURE_PERMISSION, alsoRequires };
  if (credential === 'session') return { credential, permission: 'session', alsoRequires };
  if (credential === 'signed-link') return { credential, permission: SIGNATURE_PERMISSION, alsoRequires };
  return {
    credential,
    permission: reflector.getAllAndOverride<string | undefined>(PERMISSION_KEY, targets) ?? null,
    alsoRequires: reflector.getAllAndOverride<Permission[] | undefined>(ALSO_REQUIRES_KEY, targets) ?? alsoRequires,
  };
}

/** Route metadata is fixed once the app is built: each handler's rule is read once, not per request. */
const accessByHandler = new WeakMap<object, RouteAccess>();

/** The access rule of the route a request reached. */
export function routeAccess(context: ExecutionContext): RouteAccess {
  const handler = context.getHandler();
  let access = accessByHandler.get(handler);
  if (!access) {
    access = routeAccessOf(handler, context.getClass());
    accessByHandler.set(handler, access);
  }
  return access;
}

const metadataByKey = new Map<string, WeakMap<object, { value: unknown }>>();

/**
 * A route's metadata under `key` (the handler's, else its controller's), read once per handler:
 * route metadata is fixed once the app is built, so the request path reads a cache, not reflection.
 */
export function routeMetadata(key: string, context: ExecutionContext): unknown {
  let byHandler = metadataByKey.get(key);
  if (!byHandler) metadataByKey.set(key, (byHandler = new WeakMap()));
  const handler = context.getHandler();
  let hit = byHandler.get(handler);
  if (!hit) {
    hit = { value: reflector.getAllAndOverride<unknown>(key, [handler, context.getClass()]) };
    byHandler.set(handler, hit);
  }
  return hit.value;
}

export function isFallbackRoute(context: ExecutionContext): boolean {
  return routeMetadata(FALLBACK_ROUTE_KEY, context) === true;
}
