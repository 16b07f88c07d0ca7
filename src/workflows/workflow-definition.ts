/**
 * What a workflow is made of (its trigger, its steps, its settings) and the structural rules of a
 * definition, pure: the shape of each step, the graph (every `next` names a step, every step is
 * reachable from the first, no cycle without a wait, at most 200 steps). Whatever refers to other
 * records or compiles a filter is checked by WorkflowValidator (workflow-validation.ts).
 * A broken rule is a 400 whose detail names the field (`steps.2.next`) and the step's key.
 */
import { AppError, type ErrorDetail } from '../common/errors.js';
import { isTimeZone, parseDuration, parseRelative, parseTimeOfDay, type SendWindow } from './workflow-time.js';

export const WORKFLOW_STATUSES = ['draft', 'active', 'paused', 'archived'] as const;
export type WorkflowStatus = (typeof WORKFLOW_STATUSES)[number];
export const ENROLLMENT_STATUSES = ['active', 'waiting', 'completed', 'exited', 'converted', 'failed'] as const;
export type EnrollmentStatus = (typeof ENROLLMENT_STATUSES)[number];
export const RUNNING_STATUSES: readonly EnrollmentStatus[] = ['active', 'waiting'];
export const REENROLLMENT = ['never', 'afterExit', 'always'] as const;
export type Reenrollment = (typeof REENROLLMENT)[number];

export const TRIGGER_TYPES = ['manual', 'record_event', 'tracked_event', 'segment_entered', 'segment_exited', 'schedule'] as const;
export type TriggerType = (typeof TRIGGER_TYPES)[number];
/** The longest tracked event name (as the intake takes them). */
export const TRACKED_NAME_MAX = 255;

/** Change-feed events a record_event trigger may name, and where the contact is in their data. */
export const RECORD_EVENT_CONTACT: Record<string, string> = {
  'contact.created': 'id',
  'contact.updated': 'id',
  'contact.owner_changed': 'id',
  'deal.created': 'contactId',
  'deal.updated': 'contactId',
  'deal.stage_changed': 'contactId',
  'deal.won': 'contactId',
  'deal.lost': 'contactId',
  'activity.created': 'contact_id',
  'campaign.contact_added': 'contactId',
  'campaign.contact_removed': 'contactId',
};

export const STEP_TYPES = [
  'wait',
  'branch',
  'send_sms',
  'add_points',
  'update_contact',
  'add_to_campaign',
  'remove_from_campaign',
  'add_to_segment',
  'remove_from_segment',
  'create_activity',
  'notify_user',
  'webhook',
  'goal',
  'exit',
] as const;
export type StepType = (typeof STEP_TYPES)[number];
export const MAX_STEPS = 200;
/** The largest change of points one add_points step makes, either way (the scoring ledger's bound). */
export const MAX_STEP_POINTS = 1_000_000;
export const ACTIVITY_TYPES = ['call', 'email', 'meeting'] as const;

export type Trigger =
  | { type: 'manual' }
  | { type: 'record_event'; event: string; filter?: unknown; changed?: string[] }
  | { type: 'tracked_event'; name: string; filter?: unknown }
  | { type: 'segment_entered'; segmentId: number; enrollExisting?: boolean }
  | { type: 'segment_exited'; segmentId: number }
  | { type: 'schedule'; cron: string; segmentId: number };

/** A step as stored: its key, type and next, and the properties of its type. */
export interface Step {
  key: string;
  type: StepType;
  name?: string;
  next?: string;
  // wait
  duration?: string;
  until?: string;
  untilTimeOfDay?: string;
  /** Waits for a tracked event (filter on its properties) or a change-feed event of the contact (filter on the contact), at most `timeout`. */
  untilEvent?: UntilEvent;
  timeout?: string;
  timeoutNext?: string;
  // branch
  branches?: { filter?: unknown; next: string; percentage?: number }[];
  split?: { percentage: number; next: string }[];
  defaultNext?: string;
  // actions
  body?: string;
  textMessageId?: number;
  points?: number;
  reason?: string;
  set?: Record<string, unknown>;
  campaignId?: number;
  segmentId?: number;
  activityType?: (typeof ACTIVITY_TYPES)[number];
  subject?: string;
  due?: string;
  notes?: string;
  userId?: number;
  message?: string;
  webhookId?: number;
  url?: string;
  payload?: Record<string, unknown>;
  // goal
  filter?: unknown;
}

export type UntilEvent = { tracked: string; filter?: unknown } | { record: string; filter?: unknown };

export interface Settings {
  reenrollment: Reenrollment;
  timezone: string;
  sendWindow: SendWindow | null;
}

export interface Definition {
  trigger: Trigger;
  steps: Step[];
  settings: Settings;
}

/** The properties each step type takes besides key, type and name. */
const STEP_PROPERTIES: Record<StepType, readonly string[]> = {
  wait: ['next', 'duration', 'until', 'untilTimeOfDay', 'untilEvent', 'timeout', 'timeoutNext'],
  branch: ['branches', 'split', 'defaultNext'],
  send_sms: ['next', 'body', 'textMessageId'],
  add_points: ['next', 'points', 'reason'],
  update_contact: ['next', 'set'],
  add_to_campaign: ['next', 'campaignId'],
  remove_from_campaign: ['next', 'campaignId'],
  add_to_segment: ['next', 'segmentId'],
  remove_from_segment: ['next', 'segmentId'],
  create_activity: ['next', 'activityType', 'subject', 'due', 'notes'],
  notify_user: ['next', 'userId', 'message'],
  webhook: ['next', 'url', 'webhookId', 'payload'],
  goal: ['filter'],
  exit: [],
};

const TRIGGER_PROPERTIES: Record<TriggerType, readonly string[]> = {
  manual: [],
  record_event: ['event', 'filter', 'changed'],
  tracked_event: ['name', 'filter'],
  segment_entered: ['segmentId', 'enrollExisting'],
  segment_exited: ['segmentId'],
  schedule: ['cron', 'segmentId'],
};

/** Collects the broken rules of one definition, then throws them as one 400. */
class Problems {
  readonly details: ErrorDetail[] = [];
  add(field: string, message: string, stepKey?: string): void {
    this.details.push(stepKey === undefined ? { field, message } : { field, message: `step "${stepKey}": ${message}`, stepKey });
  }
  throwIfAny(): void {
    if (!this.details.length) return;
    const shown = this.details.slice(0, 20);
    throw new AppError('validation_failed', `Invalid workflow: ${shown.map((d) => `${d.field}: ${d.message}`).join('; ')}`, shown);
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isId = (v: unknown): v is number => Number.isInteger(v) && (v as number) > 0 && (v as number) <= 2_147_483_647;
const KEY = /^[A-Za-z0-9_-]{1,64}$/;

export function normaliseSettings(raw: unknown, p: Problems | null = null): Settings {
  const problems = p ?? new Problems();
  const out: Settings = { reenrollment: 'never', timezone: 'UTC', sendWindow: null };
  if (raw === undefined || raw === null) return out;
  if (!isObject(raw)) {
    problems.add('settings', 'must be an object');
  } else {
    for (const k of Object.keys(raw)) if (!['reenrollment', 'timezone', 'sendWindow'].includes(k)) problems.add(`settings.${k}`, 'is not a setting');
    if (raw.reenrollment !== undefined) {
      if (REENROLLMENT.includes(raw.reenrollment as Reenrollment)) out.reenrollment = raw.reenrollment as Reenrollment;
      else problems.add('settings.reenrollment', `must be one of ${REENROLLMENT.join(', ')}`);
    }
    if (raw.timezone !== undefined) {
      if (isTimeZone(raw.timezone)) out.timezone = raw.timezone;
      else problems.add('settings.timezone', 'must be an IANA time zone name, e.g. Europe/Paris');
    }
    const w = raw.sendWindow;
    if (w !== undefined && w !== null) {
      if (!isObject(w)) problems.add('settings.sendWindow', 'must be { from: "09:00", to: "20:00", days: [1..7] } or null');
      else {
        if (parseTimeOfDay(w.from) === null) problems.add('settings.sendWindow.from', 'must be a time of day HH:MM');
        if (parseTimeOfDay(w.to) === null) problems.add('settings.sendWindow.to', 'must be a time of day HH:MM');
        if (w.from === w.to) problems.add('settings.sendWindow.to', 'must differ from from');
        const days = w.days ?? [1, 2, 3, 4, 5, 6, 7];
        if (!Array.isArray(days) || !days.length || days.some((d) => !Number.isInteger(d) || (d as number) < 1 || (d as number) > 7))
          problems.add('settings.sendWindow.days', 'must be a non-empty list of ISO weekdays 1 (Monday) to 7 (Sunday)');
        out.sendWindow = { from: String(w.from), to: String(w.to), days: Array.isArray(days) ? [...new Set(days as number[])].sort() : [] };
      }
    }
  }
  if (!p) problems.throwIfAny();
  return out;
}

function checkTrigger(raw: unknown, p: Problems): Trigger {
  if (!isObject(raw)) {
    p.add('trigger', 'must be an object with a type');
    return { type: 'manual' };
  }
  const type = raw.type as string;
  if (!TRIGGER_TYPES.includes(type as TriggerType)) {
    p.add('trigger.type', `must be one of ${TRIGGER_TYPES.join(', ')}`);
    return { type: 'manual' };
  }
  for (const k of Object.keys(raw))
    if (k !== 'type' && !TRIGGER_PROPERTIES[type as TriggerType].includes(k)) p.add(`trigger.${k}`, `is not a property of a ${type} trigger`);
  if (TRIGGER_PROPERTIES[type as TriggerType].includes('segmentId') && !isId(raw.segmentId)) p.add('trigger.segmentId', 'must be a segment id');
  if (type === 'segment_entered' && raw.enrollExisting !== undefined && typeof raw.enrollExisting !== 'boolean')
    p.add('trigger.enrollExisting', 'must be a boolean');
  if (type === 'schedule' && (typeof raw.cron !== 'string' || !raw.cron.trim())) p.add('trigger.cron', 'must be a cron pattern (5 fields)');
  if (type === 'tracked_event' && (typeof raw.name !== 'string' || !raw.name.trim() || raw.name.length > TRACKED_NAME_MAX))
    p.add('trigger.name', `must be a tracked event name (1 to ${TRACKED_NAME_MAX} characters)`);
  if (type === 'record_event') {
    if (typeof raw.event !== 'string' || !Object.hasOwn(RECORD_EVENT_CONTACT, raw.event))
      p.add('trigger.event', `must be one of ${Object.keys(RECORD_EVENT_CONTACT).join(', ')}`);
    if (raw.changed !== undefined && (!Array.isArray(raw.changed) || !raw.changed.length || raw.changed.some((c) => typeof c !== 'string' || !c)))
      p.add('trigger.changed', 'must be a non-empty list of property names');
  }
  return raw as unknown as Trigger;
}

function checkStepShape(raw: Record<string, unknown>, i: number, key: string, p: Problems): void {
  const f = (name: string) => `steps.${i}.${name}`;
  const type = raw.type as StepType;
  for (const k of Object.keys(raw)) {
    if (k === 'key' || k === 'type' || k === 'name') continue;
    if (!STEP_PROPERTIES[type].includes(k)) p.add(f(k), `is not a property of a ${type} step`, key);
  }
  if (raw.name !== undefined && (typeof raw.name !== 'string' || raw.name.length > 255)) p.add(f('name'), 'must be a text of at most 255 characters', key);
  const text = (name: string, max: number, required: boolean) => {
    const v = raw[name];
    if (v === undefined && !required) return;
    if (typeof v !== 'string' || !v.trim() || v.length > max) p.add(f(name), `must be a non-empty text of at most ${max} characters`, key);
  };
  const id = (name: string) => {
    if (!isId(raw[name])) p.add(f(name), 'must be an id (a positive integer)', key);
  };
  switch (type) {
    case 'wait': {
      const given = ['duration', 'until', 'untilTimeOfDay', 'untilEvent'].filter((k) => raw[k] !== undefined);
      if (given.length !== 1) p.add(f('duration'), 'a wait takes exactly one of duration, until, untilTimeOfDay, untilEvent', key);
      if (raw.untilEvent !== undefined) checkUntilEvent(raw, f, key, p);
      else for (const k of ['timeout', 'timeoutNext']) if (raw[k] !== undefined) p.add(f(k), 'is a property of an untilEvent wait', key);
      if (raw.duration !== undefined && parseDuration(raw.duration) === null)
        p.add(f('duration'), 'must be a positive duration of at most a year: a number and s, m, h, d or w (e.g. "2d")', key);
      if (raw.until !== undefined && (typeof raw.until !== 'string' || !/[zZ]|[+-]\d{2}:\d{2}$/.test(raw.until) || Number.isNaN(Date.parse(raw.until))))
        p.add(f('until'), 'must be an ISO 8601 date-time with an offset', key);
      if (raw.untilTimeOfDay !== undefined && parseTimeOfDay(raw.untilTimeOfDay) === null) p.add(f('untilTimeOfDay'), 'must be a time of day HH:MM', key);
      break;
    }
    case 'branch': {
      const hasBranches = raw.branches !== undefined;
      const hasSplit = raw.split !== undefined;
      if (hasBranches === hasSplit) p.add(f('branches'), 'a branch takes either branches (filters) or split (percentages)', key);
      if (hasBranches) {
        const list = raw.branches;
        if (!Array.isArray(list) || !list.length || list.length > 20) p.add(f('branches'), 'must be a list of 1 to 20 { filter, next }', key);
        else
          list.forEach((b, j) => {
            if (!isObject(b) || b.filter === undefined || typeof b.next !== 'string') p.add(f(`branches.${j}`), 'must be { filter, next }', key);
          });
        if (raw.defaultNext !== undefined && typeof raw.defaultNext !== 'string') p.add(f('defaultNext'), 'must be a step key', key);
      }
      if (hasSplit) {
        const list = raw.split;
        if (!Array.isArray(list) || list.length < 2 || list.length > 10) p.add(f('split'), 'must be a list of 2 to 10 { percentage, next }', key);
        else {
          list.forEach((b, j) => {
            if (!isObject(b) || !Number.isInteger(b.percentage) || (b.percentage as number) < 0 || typeof b.next !== 'string')
              p.add(f(`split.${j}`), 'must be { percentage: a whole number, next }', key);
          });
          const sum = list.reduce((s: number, b) => s + (isObject(b) && typeof b.percentage === 'number' ? b.percentage : 0), 0);
          if (sum !== 100) p.add(f('split'), `percentages must add up to 100 (they add up to ${sum})`, key);
        }
        if (raw.defaultNext !== undefined) p.add(f('defaultNext'), 'a split takes no defaultNext', key);
      }
      break;
    }
    case 'send_sms':
      if ((raw.body === undefined) === (raw.textMessageId === undefined)) p.add(f('body'), 'takes exactly one of body, textMessageId', key);
      text('body', 1600, false);
      if (raw.textMessageId !== undefined) id('textMessageId');
      break;
    case 'add_points':
      if (!Number.isInteger(raw.points) || raw.points === 0 || Math.abs(raw.points as number) > MAX_STEP_POINTS)
        p.add(f('points'), `must be a whole number other than 0, at most ${MAX_STEP_POINTS} either way`, key);
      text('reason', 255, false);
      break;
    case 'update_contact':
      if (!isObject(raw.set) || !Object.keys(raw.set).length) p.add(f('set'), 'must be an object of contact properties (or fields.<alias>) to set', key);
      break;
    case 'add_to_campaign':
    case 'remove_from_campaign':
      id('campaignId');
      break;
    case 'add_to_segment':
    case 'remove_from_segment':
      id('segmentId');
      break;
    case 'create_activity':
      if (!ACTIVITY_TYPES.includes(raw.activityType as 'call')) p.add(f('activityType'), `must be one of ${ACTIVITY_TYPES.join(', ')}`, key);
      text('subject', 255, true);
      text('notes', 65535, false);
      if (raw.due !== undefined && parseRelative(raw.due) === null) p.add(f('due'), 'must be a time after the step runs, e.g. "+2d"', key);
      break;
    case 'notify_user':
      id('userId');
      text('message', 2000, true);
      break;
    case 'webhook':
      // `url`: the step gets its own signing subscription on save (its id is answered as webhookId);
      // `webhookId` alone: an existing subscription's URL and secret.
      if (raw.url !== undefined) {
        if (typeof raw.url !== 'string' || !/^https?:\/\//i.test(raw.url) || raw.url.length > 2048)
          p.add(f('url'), 'must be an http(s) URL of at most 2048 characters', key);
        if (raw.webhookId !== undefined) id('webhookId');
      } else id('webhookId');
      if (raw.payload !== undefined && !isObject(raw.payload)) p.add(f('payload'), 'must be a JSON object', key);
      break;
    case 'goal':
      if (raw.filter === undefined || raw.filter === null) p.add(f('filter'), 'is required (the filter over the contact that converts it)', key);
      break;
    case 'exit':
      break;
  }
}

/** `{ untilEvent: { tracked | record, filter? }, timeout, timeoutNext? }`. */
function checkUntilEvent(raw: Record<string, unknown>, f: (name: string) => string, key: string, p: Problems): void {
  const u = raw.untilEvent;
  if (!isObject(u) || (u.tracked === undefined) === (u.record === undefined)) {
    p.add(f('untilEvent'), 'must be { tracked: "<event name>", filter? } or { record: "<change event type>", filter? }', key);
    return;
  }
  for (const k of Object.keys(u)) if (!['tracked', 'record', 'filter'].includes(k)) p.add(f(`untilEvent.${k}`), 'is not a property of untilEvent', key);
  if (u.tracked !== undefined && (typeof u.tracked !== 'string' || !u.tracked.trim() || u.tracked.length > TRACKED_NAME_MAX))
    p.add(f('untilEvent.tracked'), `must be a tracked event name (1 to ${TRACKED_NAME_MAX} characters)`, key);
  if (u.record !== undefined && (typeof u.record !== 'string' || !Object.hasOwn(RECORD_EVENT_CONTACT, u.record)))
    p.add(f('untilEvent.record'), `must be one of ${Object.keys(RECORD_EVENT_CONTACT).join(', ')}`, key);
  if (raw.timeout === undefined || parseDuration(raw.timeout) === null)
    p.add(f('timeout'), 'is required: how long to wait for the event at most, e.g. "3d" (at most a year)', key);
  if (raw.timeoutNext !== undefined && typeof raw.timeoutNext !== 'string') p.add(f('timeoutNext'), 'must be a step key', key);
}

/** The keys a step leads to, with the field that names each. */
export function exitsOf(s: Step): { field: string; key: string }[] {
  const out: { field: string; key: string }[] = [];
  if (s.next !== undefined) out.push({ field: 'next', key: s.next });
  s.branches?.forEach((b, j) => out.push({ field: `branches.${j}.next`, key: b.next }));
  s.split?.forEach((b, j) => out.push({ field: `split.${j}.next`, key: b.next }));
  if (s.defaultNext !== undefined) out.push({ field: 'defaultNext', key: s.defaultNext });
  if (s.timeoutNext !== undefined) out.push({ field: 'timeoutNext', key: s.timeoutNext });
  return out;
}

function checkGraph(steps: Step[], p: Problems): void {
  const index = new Map(steps.map((s, i) => [s.key, i]));
  const flow = steps.filter((s) => s.type !== 'goal');
  if (!flow.length) {
    p.add('steps', 'must hold at least one step that is not a goal');
    return;
  }
  if (steps[0].type === 'goal') p.add('steps.0.type', 'the first step is the entry step: it cannot be a goal', steps[0].key);
  steps.forEach((s, i) => {
    for (const e of exitsOf(s)) {
      const target = index.get(e.key);
      if (target === undefined) p.add(`steps.${i}.${e.field}`, `leads to "${e.key}", which is not a step`, s.key);
      else if (steps[target].type === 'goal')
        p.add(`steps.${i}.${e.field}`, `leads to the goal "${e.key}" (goals are checked whenever the contact changes, not reached)`, s.key);
    }
  });
  if (p.details.length) return;
  // Reachability from the entry step.
  const seen = new Set<string>([steps[0].key]);
  const queue = [steps[0]];
  while (queue.length) {
    const s = queue.shift() as Step;
    for (const e of exitsOf(s)) {
      if (!seen.has(e.key)) {
        seen.add(e.key);
        queue.push(steps[index.get(e.key) as number]);
      }
    }
  }
  steps.forEach((s, i) => {
    if (s.type !== 'goal' && !seen.has(s.key)) p.add(`steps.${i}.key`, 'is not reachable from the first step', s.key);
  });
  // A cycle through steps that never wait would run forever at once: every cycle needs a wait.
  const state = new Map<string, 1 | 2>();
  const visit = (s: Step, path: string[]): boolean => {
    state.set(s.key, 1);
    for (const e of exitsOf(s)) {
      const t = steps[index.get(e.key) as number];
      if (t.type === 'wait') continue;
      if (state.get(t.key) === 1) {
        const loop = [...path.slice(path.indexOf(t.key)), t.key];
        p.add(`steps.${index.get(s.key)}.${e.field}`, `closes a cycle without a wait (${loop.join(' → ')})`, s.key);
        return true;
      }
      if (!state.has(t.key) && visit(t, [...path, t.key])) return true;
    }
    state.set(s.key, 2);
    return false;
  };
  for (const s of flow) if (s.type !== 'wait' && !state.has(s.key) && visit(s, [s.key])) break;
}

/**
 * A definition checked for its structure, normalised (settings with their defaults). Throws one 400
 * listing every broken rule, each naming its field and step key.
 */
export function checkDefinition(input: { trigger: unknown; steps: unknown; settings?: unknown }): Definition {
  const p = new Problems();
  const trigger = checkTrigger(input.trigger, p);
  const settings = normaliseSettings(input.settings, p);
  const raw = input.steps;
  if (!Array.isArray(raw) || !raw.length) {
    p.add('steps', 'must be a non-empty list of steps');
    p.throwIfAny();
  }
  const list = raw as unknown[];
  if (list.length > MAX_STEPS) {
    p.add('steps', `must hold at most ${MAX_STEPS} steps (it holds ${list.length})`);
    p.throwIfAny();
  }
  const keys = new Set<string>();
  list.forEach((s, i) => {
    if (!isObject(s)) {
      p.add(`steps.${i}`, 'must be an object { key, type, ... }');
      return;
    }
    const key = typeof s.key === 'string' ? s.key : `#${i}`;
    if (typeof s.key !== 'string' || !KEY.test(s.key)) p.add(`steps.${i}.key`, 'must be 1 to 64 letters, digits, _ or -', key);
    else if (keys.has(s.key)) p.add(`steps.${i}.key`, `is used by another step`, key);
    else keys.add(s.key);
    if (!STEP_TYPES.includes(s.type as StepType)) {
      p.add(`steps.${i}.type`, `unknown step type; one of ${STEP_TYPES.join(', ')}`, key);
      return;
    }
    checkStepShape(s, i, key, p);
    for (const k of ['next', 'defaultNext', 'timeoutNext'])
      if (s[k] !== undefined && typeof s[k] !== 'string') p.add(`steps.${i}.${k}`, 'must be a step key', key);
  });
  p.throwIfAny();
  const steps = list as Step[];
  checkGraph(steps, p);
  p.throwIfAny();
  return { trigger, steps, settings };
}

/** Adds one rule's failure as a 400 naming the step's field and key (for the checks made against the database). */
export function stepError(steps: Step[], key: string, field: string, message: string): AppError {
  const i = steps.findIndex((s) => s.key === key);
  const name = `steps.${i}.${field}`;
  return new AppError('validation_failed', `Invalid workflow: ${name}: step "${key}": ${message}`, [
    { field: name, message: `step "${key}": ${message}`, stepKey: key },
  ]);
}

export { Problems as DefinitionProblems };
