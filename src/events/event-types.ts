/**
 * The event catalogue (docs/decisions/events-and-webhooks.md): every event type the service writes, with what its `data` and
 * `previous` hold. The OpenAPI document and the README list it; the feed and the webhooks accept
 * only these names (or "*").
 */
import type { Permission } from '../common/route-access.js';

export const EVENT_CATALOGUE = {
  'contact.created': 'A contact was created. data: the contact.',
  'contact.updated':
    "A contact changed (properties, custom field values, its company: companyId set or cleared, also by company membership, a company's deletion or the companies backfill; or its do-not-contact entries, e.g. after an SMS reply STOP). data: the contact; previous: the changed properties' old values.",
  'contact.deleted': 'A contact was deleted. data: the contact as it was.',
  'contact.owner_changed': "A contact's owner changed (written beside contact.updated). data: the contact; previous: { owner }.",
  'contact.point_group_entered':
    "A change of a contact's points moved it into a published point group's range (every time it happens; written in the change's transaction; a change of points writes no contact.updated). data: { id (the contact's), contactId, pointGroup: { id, name, minimumPoints, maximumPoints, color }, points, previousPoints }.",
  'contact.point_group_left':
    "A change of a contact's points moved it out of a published point group's range (every time it happens). data: { id (the contact's), contactId, pointGroup: { id, name, minimumPoints, maximumPoints, color }, points, previousPoints }.",
  'company.created': 'A company was created (through the API or by the companies backfill). data: the company.',
  'company.updated': "A company changed (properties or custom field values). data: the company; previous: the changed properties' old values.",
  'company.deleted': 'A company was deleted (its contacts and deals were detached, each with its own update event). data: the company as it was.',
  'campaign.created': 'A campaign was created. data: the campaign.',
  'campaign.updated': "A campaign changed (including its completion by the scheduled job). data: the campaign; previous: the changed properties' old values.",
  'campaign.deleted': 'A campaign was deleted. data: the campaign as it was.',
  'campaign.contact_added': 'A contact joined a campaign. data: { campaignId, contactId, addedAt }.',
  'campaign.contact_removed': 'A contact left a campaign. data: { campaignId, contactId, addedAt }.',
  'segment.created': 'A segment was created. data: the segment (a dynamic one starts with membership.status building).',
  'segment.updated':
    "A segment's properties changed (name, description, type or filter; a filter change starts a rebuild). Membership changes write no event. data: the segment; previous: the changed properties' old values.",
  'segment.deleted': 'A segment was deleted (its memberships went with it; campaigns that mirrored it were detached). data: the segment as it was.',
  'deal.created': 'A deal was created. data: the deal.',
  'deal.updated': "A deal changed. data: the deal; previous: the changed properties' old values.",
  'deal.deleted': 'A deal was deleted. data: the deal as it was.',
  'deal.stage_changed': 'A deal moved to another stage, or pipeline (written beside deal.updated). data: the deal; previous: { stage, stage_id, pipeline_id }.',
  'deal.won': "A deal's status became won (on creation too). data: the deal; previous: { status } (null on creation).",
  'deal.lost': "A deal's status became lost (on creation too). data: the deal; previous: { status } (null on creation).",
  'pipeline.created': 'A pipeline was created. data: the pipeline with its stages.',
  'pipeline.updated':
    "A pipeline or its stages changed (stages added, renamed, reordered, re-typed or removed). data: the pipeline with its stages; previous: the changed properties' old values.",
  'pipeline.deleted': 'A pipeline was deleted. data: the pipeline as it was.',
  'activity.created': 'An activity was created. data: the activity.',
  'activity.updated': "An activity changed. data: the activity; previous: the changed properties' old values.",
  'activity.deleted': 'An activity was deleted. data: the activity as it was.',
  'text_message.created': 'A text message was created (as a draft, or before it is queued). data: the message.',
  'text_message.updated': "A draft or failed text message was edited. data: the message; previous: the changed properties' old values.",
  'text_message.deleted': 'A text message was deleted. data: the message as it was.',
  'text_message.queued': 'A text message was queued for sending. data: the message; previous: { status }.',
  'text_message.sent': 'The SMS provider accepted a text message. data: the message; previous: { status }.',
  'text_message.delivered': 'The provider reported a text message delivered. data: the message; previous: { status }.',
  'text_message.failed': 'Sending a text message failed for good. data: the message; previous: { status }.',
  'text_message.canceled':
    'A queued text message was canceled before it reached the provider (the recipient opted out: failureCode opted_out; or its broadcast was canceled: canceled). data: the message; previous: { status }.',
  'broadcast.created': 'A text message broadcast was created. data: the broadcast.',
  'broadcast.updated': "A draft or scheduled broadcast was edited. data: the broadcast; previous: the changed properties' old values.",
  'broadcast.deleted': 'A broadcast was deleted. data: the broadcast as it was.',
  'broadcast.sending':
    'A broadcast was sent: its audience was resolved and one queued text message created per recipient (each with its own text_message.queued event). data: the broadcast (recipients, skipped); previous: { status }.',
  'broadcast.completed': "None of a broadcast's messages is queued any more. data: the broadcast with its counts; previous: { status }.",
  'broadcast.canceled': 'A broadcast was canceled; its unclaimed queued messages ended canceled. data: the broadcast; previous: { status }.',
  'report.completed': 'A report run finished and its result was stored (manual or scheduled). data: the report, with result: { id, generatedAt, trigger }.',
  'import.completed':
    'An import job ended (completed, failed or canceled). data: the import (id, object, status, counts, timings), as GET /api/imports/{id} answers.',
  'asset.created': 'An asset was created. data: the asset.',
  'asset.updated': "An asset changed (properties or its file). data: the asset; previous: the changed properties' old values.",
  'asset.deleted': 'An asset was deleted. data: the asset as it was.',
  'field.created': 'A custom field was created. data: the field.',
  'field.updated': "A custom field changed. data: the field; previous: the changed properties' old values.",
  'field.deleted': 'A custom field was deleted. data: the field as it was.',
  'category.created': 'A category was created. data: the category.',
  'category.updated': "A category changed. data: the category; previous: the changed properties' old values.",
  'category.deleted': 'A category was deleted. data: the category as it was.',
  'point_group.created': 'A point group was created. data: the point group.',
  'point_group.updated': "A point group changed. data: the point group; previous: the changed properties' old values.",
  'point_group.deleted': 'A point group was deleted. data: the point group as it was.',
  'workflow.created': 'A workflow was created. data: the workflow.',
  'workflow.updated':
    "A workflow changed (properties, status, or its definition: a new version when it was not a draft). data: the workflow; previous: the changed properties' old values.",
  'workflow.deleted':
    'A workflow was deleted (its enrollments went with it, each running one exited first with workflow.exited). data: the workflow as it was.',
  'workflow.enrolled':
    'A contact entered a workflow. data: the enrollment { id, workflowId, version, contactId, status, stepKey, nextAt, enteredAt, endedAt, error }.',
  'workflow.step_completed':
    'A step of an enrollment ran (an action done, a branch decided, a wait started or ended). data: { enrollment, step: { key, type, outcome, detail } }.',
  'workflow.completed': 'An enrollment reached the end of its workflow. data: the enrollment.',
  'workflow.exited':
    'An enrollment left its workflow early (an exit step, DELETE of the enrollment, re-enrollment, the workflow deleted with force). data: the enrollment.',
  'workflow.converted': "An enrollment's contact matched one of the workflow's goals. data: the enrollment.",
  'workflow.failed': 'A step of an enrollment failed; the enrollment ended failed with the error. data: the enrollment (error says why).',
  'scoring_rule.created': 'A scoring rule was created. data: the rule.',
  'scoring_rule.updated': "A scoring rule changed. data: the rule; previous: the changed properties' old values.",
  'scoring_rule.deleted': 'A scoring rule was deleted (its ledger rows stay, with their ruleId). data: the rule as it was.',
} as const;

export type EventType = keyof typeof EVENT_CATALOGUE;
export const EVENT_TYPES = Object.keys(EVENT_CATALOGUE) as EventType[];

/**
 * The read permission an event's `data` needs, by the part of its type before the dot: an event
 * carries the record it is about, so a token reads it in the feed, or subscribes a webhook to it,
 * only when it may read that record through its own route.
 */
const READ_PERMISSION_BY_SUBJECT: Record<string, Permission> = {
  contact: 'contacts:read',
  company: 'companies:read',
  campaign: 'campaigns:read',
  segment: 'segments:read',
  deal: 'deals:read',
  pipeline: 'pipelines:read',
  activity: 'activities:read',
  text_message: 'textMessages:read',
  broadcast: 'textMessages:read',
  report: 'reports:read',
  import: 'imports:read',
  asset: 'assets:read',
  field: 'fields:read',
  category: 'categories:read',
  point_group: 'pointGroups:read',
  workflow: 'workflows:read',
  scoring_rule: 'scoring:read',
};

export function readPermissionOf(type: EventType): Permission {
  const permission = READ_PERMISSION_BY_SUBJECT[type.slice(0, type.indexOf('.'))] as Permission | undefined;
  // Every type of the catalogue has one (events.service.spec.ts checks it); an unmapped one is readable by `*` only.
  return permission ?? '*';
}

/** The event types `permissions` may read (every type for `*`). */
export function readableEventTypes(permissions: ReadonlySet<string>): EventType[] {
  if (permissions.has('*')) return EVENT_TYPES;
  return EVENT_TYPES.filter((t) => permissions.has(readPermissionOf(t)));
}

/** The read permissions `permissions` lacks for `types` ("*" meaning every type), each once. */
export function missingReadPermissions(permissions: ReadonlySet<string>, types: readonly string[]): Permission[] {
  if (permissions.has('*')) return [];
  const wanted = types.includes('*') ? EVENT_TYPES : types.filter(isEventType);
  return [...new Set(wanted.map(readPermissionOf))].filter((p) => !permissions.has(p));
}

export function isEventType(s: string): s is EventType {
  return Object.prototype.hasOwnProperty.call(EVENT_CATALOGUE, s);
}

/** An event as the feed and the webhooks hand it out. */
export interface EventRecord {
  id: string;
  type: EventType;
  occurredAt: string;
  sequence: number;
  data: Record<string, unknown>;
  previous: Record<string, unknown> | null;
}

/**
 * The properties of `after` whose value differs from `before` (compared as JSON), with their old
 * values: the `previous` of an update event. Audit stamps (modifiedAt, modifiedBy) are left out.
 * Null when nothing changed.
 */
export function changedProperties(before: object, after: object): Record<string, unknown> | null {
  const b = before as Record<string, unknown>;
  const a = after as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const k of new Set([...Object.keys(b), ...Object.keys(a)])) {
    if (k === 'modifiedAt' || k === 'dateModified' || k === 'modifiedBy' || k === 'modifiedByUser') continue;
    if (JSON.stringify(b[k]) !== JSON.stringify(a[k])) out[k] = b[k] === undefined ? null : b[k];
  }
  return Object.keys(out).length ? out : null;
}
