import { randomUUID } from 'node:crypto';
import { parseIsoWithOffset } from '../common/dates.js';
import { AppError, type ErrorDetail } from '../common/errors.js';

/**
 * Pure rules of the Segment-compatible intake: what a track or identify call must hold, the limits
 * (as Segment's HTTP tracking API: 500 KB a batch, 32 KB a call; ours: 500 calls, properties at
 * most 5 levels deep and 255 keys), the receive-time rules of `timestamp`, and the traits that
 * map onto a contact's properties.
 */

export const TRACKING_LIMITS = {
  batchBytes: 500 * 1024,
  itemBytes: 32 * 1024,
  batchItems: 500,
  depth: 5,
  properties: 255,
  nameLength: 255,
  idLength: 255,
  messageIdLength: 255,
} as const;

/** A timestamp more than this far in the future is clamped to the receive time and flagged. */
export const FUTURE_TOLERANCE_MS = 24 * 3600_000;

export type CallType = 'track' | 'identify';

/** One call as stored: checked, its times resolved. */
export interface TrackedCall {
  /** Position in the request (0 for a single call). */
  index: number;
  type: CallType;
  /** The event name (track); null for identify. */
  name: string | null;
  userId: string | null;
  anonymousId: string | null;
  messageId: string;
  properties: Record<string, unknown>;
  traits: Record<string, unknown>;
  context: Record<string, unknown> | null;
  occurredAt: Date;
  /** Set when the timestamp lay more than 24 h ahead of the receive time and was clamped. */
  clampedFrom: string | null;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The depth of a JSON value's nesting (a scalar 0, `{a:1}` 1). Iterative, so a deep value cannot overflow the stack. */
export function jsonDepth(value: unknown, stopAt = 64): number {
  let max = 0;
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length) {
    const [v, d] = stack.pop() as [unknown, number];
    if (typeof v !== 'object' || v === null) continue;
    if (d + 1 > max) max = d + 1;
    if (max > stopAt) return max;
    for (const child of Object.values(v)) stack.push([child, d + 1]);
  }
  return max;
}

/** An id (userId, anonymousId) as Segment takes it: a non-empty string or a number; null when absent. */
function idOf(v: unknown, field: string, problems: ErrorDetail[]): string | null {
  if (v === undefined || v === null || v === '') return null;
  if (typeof v === 'number' && Number.isFinite(v)) return String(v);
  if (typeof v !== 'string') {
    problems.push({ field, message: 'must be a string' });
    return null;
  }
  if (v.length > TRACKING_LIMITS.idLength) problems.push({ field, message: `must be at most ${TRACKING_LIMITS.idLength} characters` });
  return v;
}

/** Checks an object of properties or traits: an object, at most 255 keys, nested at most 5 levels. */
function checkBag(v: unknown, field: string, problems: ErrorDetail[]): Record<string, unknown> {
  if (v === undefined || v === null) return {};
  if (!isObject(v)) {
    problems.push({ field, message: 'must be an object' });
    return {};
  }
  if (Object.keys(v).length > TRACKING_LIMITS.properties) problems.push({ field, message: `must have at most ${TRACKING_LIMITS.properties} keys` });
  if (jsonDepth(v, TRACKING_LIMITS.depth + 1) > TRACKING_LIMITS.depth)
    problems.push({ field, message: `must not nest deeper than ${TRACKING_LIMITS.depth} levels` });
  return v;
}

/**
 * One call of a request, checked: `at` is its path in the answer's error details (`batch.3`, or
 * empty for a single call), `type` the route's type for /track and /identify (a batch item names
 * its own). `receivedAt` is the clock's time; with `sentAt`, the client's clock skew is corrected
 * as Segment does (`timestamp + (receivedAt - sentAt)`). `knownBytes`: its JSON size, when the caller measured it.
 */
export function readCall(
  raw: unknown,
  index: number,
  at: string,
  routeType: CallType | null,
  receivedAt: Date,
  sentAt: Date | null,
  knownBytes?: number,
): TrackedCall | ErrorDetail[] {
  const f = (name: string) => (at ? `${at}.${name}` : name);
  const problems: ErrorDetail[] = [];
  if (!isObject(raw)) return [{ field: at || 'body', message: 'must be an object (a track or identify call)' }];
  const bytes = knownBytes ?? Buffer.byteLength(JSON.stringify(raw));
  if (bytes > TRACKING_LIMITS.itemBytes)
    return [{ field: at || 'body', message: `is ${bytes} bytes; a call may be at most ${TRACKING_LIMITS.itemBytes} bytes (32 KB)` }];
  // A batch call without `type` is a track when it names an event, else an identify.
  const type = raw.type ?? routeType ?? (raw.event !== undefined ? 'track' : 'identify');
  if (type !== 'track' && type !== 'identify') {
    problems.push({ field: f('type'), message: 'must be track or identify' });
    return problems;
  }
  if (routeType && raw.type !== undefined && raw.type !== routeType) problems.push({ field: f('type'), message: `must be ${routeType} on this route` });
  let name: string | null = null;
  if (type === 'track') {
    if (typeof raw.event !== 'string' || raw.event.trim() === '')
      problems.push({ field: f('event'), message: 'is required: the event name (a non-empty string)' });
    else if (raw.event.length > TRACKING_LIMITS.nameLength)
      problems.push({ field: f('event'), message: `must be at most ${TRACKING_LIMITS.nameLength} characters` });
    else name = raw.event.trim();
  }
  const userId = idOf(raw.userId, f('userId'), problems);
  const anonymousId = idOf(raw.anonymousId, f('anonymousId'), problems);
  if (userId === null && anonymousId === null && !problems.some((p) => p.field === f('userId') || p.field === f('anonymousId'))) {
    problems.push({ field: f('userId'), message: 'userId or anonymousId is required' });
  }
  const properties = type === 'track' ? checkBag(raw.properties, f('properties'), problems) : {};
  const traits = type === 'identify' ? checkBag(raw.traits, f('traits'), problems) : {};
  let context: Record<string, unknown> | null = null;
  if (raw.context !== undefined && raw.context !== null) {
    if (!isObject(raw.context)) problems.push({ field: f('context'), message: 'must be an object' });
    else context = raw.context;
  }
  let messageId: string | null = null;
  if (raw.messageId !== undefined && raw.messageId !== null) {
    if (typeof raw.messageId !== 'string' || raw.messageId === '' || raw.messageId.length > TRACKING_LIMITS.messageIdLength) {
      problems.push({ field: f('messageId'), message: `must be a non-empty string of at most ${TRACKING_LIMITS.messageIdLength} characters` });
    } else messageId = raw.messageId;
  }
  const time = readTimestamp(raw.timestamp, f('timestamp'), receivedAt, sentAt, problems);
  if (problems.length) return problems;
  // A call without a messageId gets one (so that it is stored once even if the request is retried within it).
  messageId ??= randomUUID();
  return { index, type, name, userId, anonymousId, messageId, properties, traits, context, occurredAt: time.at, clampedFrom: time.clampedFrom };
}

/** A date-time of the wire: ISO 8601 with an offset (Segment's clients send UTC `Z` times). */
export function readSentAt(v: unknown, field: string): Date | ErrorDetail {
  const d = typeof v === 'string' ? parseIsoWithOffset(v) : null;
  return d ?? { field, message: 'must be an ISO 8601 date-time with an offset' };
}

function readTimestamp(v: unknown, field: string, receivedAt: Date, sentAt: Date | null, problems: ErrorDetail[]): { at: Date; clampedFrom: string | null } {
  if (v === undefined || v === null) return { at: receivedAt, clampedFrom: null };
  const given = readSentAt(v, field);
  if (!(given instanceof Date)) {
    problems.push(given);
    return { at: receivedAt, clampedFrom: null };
  }
  // The client's clock may be off: Segment moves the timestamp by the difference between the
  // request's sentAt and the receive time.
  const at = sentAt ? new Date(given.getTime() + (receivedAt.getTime() - sentAt.getTime())) : given;
  if (at.getTime() - receivedAt.getTime() > FUTURE_TOLERANCE_MS) return { at: receivedAt, clampedFrom: given.toISOString() };
  return { at, clampedFrom: null };
}

/**
 * A request's calls, checked: `/batch` (`{ batch: [...], sentAt?, context? }`, at most 500 calls
 * and 500 KB) or a single call. Any problem is a 400 naming every call index and field at fault
 * (Segment refuses the whole batch; nothing of it is stored).
 */
export function readRequest(body: unknown, route: 'batch' | CallType, receivedAt: Date): TrackedCall[] {
  if (!isObject(body)) throw new AppError('validation_failed', 'The body must be a JSON object', [{ field: 'body', message: 'must be a JSON object' }]);
  const fail = (problems: ErrorDetail[]) => {
    const shown = problems.slice(0, 20);
    throw new AppError('validation_failed', `Invalid ${route} request: ${shown.map((p) => `${p.field} ${p.message}`).join('; ')}`, shown);
  };
  let sentAt: Date | null = null;
  if (body.sentAt !== undefined && body.sentAt !== null) {
    const s = readSentAt(body.sentAt, 'sentAt');
    if (!(s instanceof Date)) fail([s]);
    else sentAt = s;
  }
  if (route !== 'batch') {
    const call = readCall(body, 0, '', route, receivedAt, sentAt);
    if (Array.isArray(call)) fail(call);
    return [call as TrackedCall];
  }
  // Each call is serialised once: its size is checked against a call's limit, and the batch's size is
  // the sum with the rest of the body (a JSON text's size does not depend on the order of its keys).
  const itemBytes = Array.isArray(body.batch) ? body.batch.map((raw) => Buffer.byteLength(JSON.stringify(raw) ?? 'null')) : null;
  const bytes = itemBytes
    ? Buffer.byteLength(JSON.stringify({ ...body, batch: [] })) + itemBytes.reduce((a, b) => a + b, 0) + Math.max(0, itemBytes.length - 1)
    : Buffer.byteLength(JSON.stringify(body));
  if (bytes > TRACKING_LIMITS.batchBytes)
    fail([{ field: 'batch', message: `is ${bytes} bytes; a batch may be at most ${TRACKING_LIMITS.batchBytes} bytes (500 KB)` }]);
  if (!Array.isArray(body.batch)) fail([{ field: 'batch', message: 'is required: an array of track and identify calls' }]);
  const items = body.batch as unknown[];
  if (items.length > TRACKING_LIMITS.batchItems) fail([{ field: 'batch', message: `has ${items.length} calls; at most ${TRACKING_LIMITS.batchItems}` }]);
  const calls: TrackedCall[] = [];
  const problems: ErrorDetail[] = [];
  const shared = isObject(body.context) ? body.context : null;
  items.forEach((raw, i) => {
    const call = readCall(raw, i, `batch.${i}`, null, receivedAt, sentAt, itemBytes?.[i]);
    if (Array.isArray(call)) problems.push(...call);
    else calls.push(shared && !call.context ? { ...call, context: shared } : call);
  });
  if (problems.length) fail(problems);
  return calls;
}

/** The JSON type of a property value, as the definitions report it. */
export function jsonType(v: unknown): 'string' | 'number' | 'boolean' | 'object' | 'array' | 'null' {
  if (v === null || v === undefined) return 'null';
  if (Array.isArray(v)) return 'array';
  const t = typeof v;
  return t === 'string' || t === 'number' || t === 'boolean' ? t : 'object';
}

/** The observed types of an event's top-level properties as the definitions table keeps them: `{ "<key>:<type>": true }`. */
export function propertyTypes(properties: Record<string, unknown>): Record<string, true> {
  const out: Record<string, true> = {};
  for (const [k, v] of Object.entries(properties)) out[`${k}:${jsonType(v)}`] = true;
  return out;
}

/** The stored `{ "<key>:<type>": true }` as `{ key: [types] }`, keys and types sorted. */
export function typesByProperty(stored: Record<string, unknown>): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const k of Object.keys(stored).sort()) {
    const cut = k.lastIndexOf(':');
    if (cut < 0) continue;
    (out[k.slice(0, cut)] ??= []).push(k.slice(cut + 1));
  }
  return out;
}

/** The contact properties Segment's reserved traits map onto. */
export interface TraitValues {
  name?: unknown;
  email?: unknown;
  phone?: unknown;
  company?: unknown;
  title?: unknown;
}

/**
 * The traits an identify applies to its contact: Segment's reserved traits (`email`, `name` or
 * `firstName` + `lastName`, `phone`, `company` as a name or `{ name }`, `title`) as contact
 * properties, and the traits named like a published custom field's alias as its value. Other
 * traits are kept on the stored call only.
 */
export function contactTraits(traits: Record<string, unknown>, aliases: ReadonlySet<string>): { values: TraitValues; fields: Record<string, unknown> } {
  const values: TraitValues = {};
  if (traits.email !== undefined) values.email = traits.email;
  if (traits.name !== undefined) values.name = traits.name;
  else if (traits.firstName !== undefined || traits.lastName !== undefined) {
    const parts = [traits.firstName, traits.lastName].filter((p) => typeof p === 'string' && p.trim() !== '') as string[];
    if (parts.length) values.name = parts.join(' ');
  }
  if (traits.phone !== undefined) values.phone = traits.phone;
  if (traits.company !== undefined) values.company = isObject(traits.company) ? traits.company.name : traits.company;
  if (traits.title !== undefined) values.title = traits.title;
  const fields: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(traits)) if (aliases.has(k)) fields[k] = v;
  return { values, fields };
}

/** A UTC day (YYYY-MM-DD) of a time. */
export const utcDay = (d: Date): string => d.toISOString().slice(0, 10);

/** The first instant of the UTC month of `d`, moved by `months`. */
export function monthStart(d: Date, months = 0): Date {
  return new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + months, 1));
}

/** The partition of tracked_events that holds the month starting at `start`: `tracked_events_y2026m01`. */
export function partitionName(start: Date): string {
  return `tracked_events_y${start.getUTCFullYear()}m${String(start.getUTCMonth() + 1).padStart(2, '0')}`;
}
