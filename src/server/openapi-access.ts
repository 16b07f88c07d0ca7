/** Who may call an operation, in the OpenAPI document: its permission, security requirement and Idempotency-Key. */
import type { Credential } from '../common/route-access.js';
import { IDEMPOTENCY_HEADER, IDEMPOTENT_METHODS } from '../idempotency/idempotency.decorators.js';
import type { Operation } from './openapi-schema.js';
import type { RouteInfo } from './route-table.js';

/** The OpenAPI security requirement of each credential kind (route-access.ts). */
export const SECURITY_BY_CREDENTIAL: Record<Credential, Record<string, string[]>[]> = {
  none: [],
  token: [{ bearer: [] }],
  'token-or-basic': [{ bearer: [] }, { basic: [] }],
  'write-key': [{ bearer: [] }, { writeKey: [] }],
  'metrics-token': [{ bearer: [] }],
  'sms-signature': [{ smsSignature: [] }],
  session: [],
  'signed-link': [{ signedLink: [] }],
};

export const IDEMPOTENCY_PARAMETER = {
  name: IDEMPOTENCY_HEADER,
  in: 'header',
  required: false,
  description:
    'Makes a retry safe: the first answer (2xx or 4xx) to this key, account, method and path is kept 24 h and replayed with `Idempotent-Replayed: true`; ' +
    'the same key with another body is a 422, while the first is still running a 409 with Retry-After. Not accepted on multipart/form-data uploads.',
  schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[A-Za-z0-9_:-]{1,255}$' },
};

/** Writes a token calls (the same rule the idempotency guard applies). */
export function takesIdempotencyKey(r: RouteInfo): boolean {
  return (
    IDEMPOTENT_METHODS.has(r.method) &&
    r.path.startsWith('/api/') &&
    (r.credential === 'token' || r.credential === 'token-or-basic' || r.credential === 'write-key' || r.credential === 'metrics-token')
  );
}

/** The permission (x-permission, x-also-requires, the description's last line) and the security requirement. */
export function documentAccess(op: Operation, r: RouteInfo): void {
  // Who may call it, from the same route table as GET /api/endpoints.
  op['x-permission'] = r.permission;
  const also = r.alsoRequires.length ? ` and ${r.alsoRequires.map((p) => `\`${p}\``).join(', ')}` : '';
  if (r.alsoRequires.length) op['x-also-requires'] = [...r.alsoRequires];
  op.description = `${op.description ? op.description + '\n\n' : ''}Permission: \`${r.permission}\`${also}`;
  const readsAuthorization = (op.parameters ?? []).some((p) => p.in === 'header' && p.name.toLowerCase() === 'authorization');
  if (readsAuthorization) {
    // The route reads the Authorization header itself (OAuth client authentication): HTTP Basic, optional.
    // OpenAPI ignores header parameters named Authorization, so it is a security requirement instead.
    op.parameters = (op.parameters ?? []).filter((p) => !(p.in === 'header' && p.name.toLowerCase() === 'authorization'));
    op.security = [{}, { basic: [] }];
  } else {
    op.security = SECURITY_BY_CREDENTIAL[r.credential];
  }
}

/** Idempotency-Key (idempotency/): every write a token calls takes one. */
export function documentIdempotencyKey(op: Operation, r: RouteInfo): boolean {
  if (!takesIdempotencyKey(r)) return false;
  const names = new Set((op.parameters ?? []).map((p) => `${p.in}:${p.name.toLowerCase()}`));
  if (!names.has('header:idempotency-key')) op.parameters = [...(op.parameters ?? []), IDEMPOTENCY_PARAMETER];
  return true;
}
