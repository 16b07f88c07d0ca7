import { describe, expect, it } from '@jest/globals';
import { AppError } from '../common/errors.js';
import { checkDefinition, MAX_STEPS } from './workflow-definition.js';

const manual = { type: 'manual' };

function failure(input: { trigger?: unknown; steps: unknown; settings?: unknown }): AppError {
  try {
    checkDefinition({ trigger: input.trigger ?? manual, steps: input.steps, settings: input.settings });
  } catch (e) {
    if (e instanceof AppError) return e;
    throw e;
  }
  throw new Error('the definition was accepted');
}

describe('workflow definitions: structure and graph', () => {
  it('accepts a graph with a branch, a wait loop and a goal, and fills the settings defaults', () => {
    const d = checkDefinition({
      trigger: manual,
      steps: [
        { key: 'start', type: 'branch', branches: [{ filter: 'email[contains]:x', next: 'tag' }], defaultNext: 'wait' },
        { key: 'tag', type: 'update_contact', set: { title: 'x' }, next: 'wait' },
        { key: 'wait', type: 'wait', duration: '2d', next: 'start' },
        { key: 'won', type: 'goal', filter: 'title[eq]:won' },
      ],
    });
    expect(d.settings).toEqual({ reenrollment: 'never', timezone: 'UTC', sendWindow: null });
    expect(d.steps).toHaveLength(4);
  });

  it('names the step key and field of a next that is not a step', () => {
    const e = failure({
      steps: [
        { key: 'a', type: 'exit' },
        { key: 'b', type: 'wait', duration: '1h', next: 'nowhere' },
      ],
    });
    expect(e.status).toBe(400);
    expect(e.details).toEqual(expect.arrayContaining([expect.objectContaining({ field: 'steps.1.next', stepKey: 'b' })]));
  });

  it('refuses an unreachable step, naming it', () => {
    const e = failure({
      steps: [
        { key: 'a', type: 'exit' },
        { key: 'lost', type: 'exit' },
      ],
    });
    expect(e.details?.[0]).toMatchObject({ field: 'steps.1.key', stepKey: 'lost' });
    expect(e.details?.[0].message).toContain('not reachable');
  });

  it('refuses a cycle without a wait and accepts the same cycle through a wait', () => {
    const loop = [
      { key: 'a', type: 'update_contact', set: { title: 'a' }, next: 'b' },
      { key: 'b', type: 'update_contact', set: { title: 'b' }, next: 'a' },
    ];
    const e = failure({ steps: loop });
    expect(e.details?.[0].message).toContain('cycle without a wait');
    expect(() =>
      checkDefinition({
        trigger: manual,
        steps: [loop[0], { ...loop[1], next: 'w' }, { key: 'w', type: 'wait', duration: '1d', next: 'a' }],
      }),
    ).not.toThrow();
  });

  it('refuses more than 200 steps', () => {
    const steps = Array.from({ length: MAX_STEPS + 1 }, (_, i) => ({
      key: `s${i}`,
      type: 'wait',
      duration: '1h',
      next: i < MAX_STEPS ? `s${i + 1}` : undefined,
    }));
    expect(failure({ steps }).message).toContain('at most 200 steps');
  });

  it('refuses an unknown step type and a step property of another type', () => {
    expect(failure({ steps: [{ key: 'a', type: 'teleport' }] }).details?.[0]).toMatchObject({ field: 'steps.0.type', stepKey: 'a' });
    expect(failure({ steps: [{ key: 'a', type: 'exit', duration: '1d' }] }).details?.[0]).toMatchObject({ field: 'steps.0.duration' });
  });

  it('checks add_points, webhook, tracked_event and untilEvent shapes', () => {
    expect(checkDefinition({ trigger: manual, steps: [{ key: 'a', type: 'add_points', points: -5, reason: 'cooled' }] }).steps[0].points).toBe(-5);
    for (const points of [0, 1.5, 1_000_001, '5', undefined])
      expect(failure({ steps: [{ key: 'a', type: 'add_points', points }] }).details?.[0]).toMatchObject({ field: 'steps.0.points', stepKey: 'a' });
    expect(failure({ steps: [{ key: 'a', type: 'add_points', points: 1, reason: '' }] }).details?.[0].field).toBe('steps.0.reason');
    expect(checkDefinition({ trigger: manual, steps: [{ key: 'h', type: 'webhook', url: 'https://example.com/x', payload: { a: 1 } }] }).steps).toHaveLength(1);
    expect(failure({ steps: [{ key: 'h', type: 'webhook', url: 'mailto:x' }] }).details?.[0].field).toBe('steps.0.url');
    expect(failure({ steps: [{ key: 'h', type: 'webhook' }] }).details?.[0].field).toBe('steps.0.webhookId');
    expect(checkDefinition({ trigger: { type: 'tracked_event', name: 'Signed Up' }, steps: [{ key: 'a', type: 'exit' }] }).trigger.type).toBe('tracked_event');
    expect(failure({ trigger: { type: 'tracked_event', name: '' }, steps: [{ key: 'a', type: 'exit' }] }).details?.[0].field).toBe('trigger.name');
    const wait = (extra: Record<string, unknown>) => ({
      steps: [
        { key: 'w', type: 'wait', untilEvent: { tracked: 'Paid' }, timeout: '3d', next: 'done', ...extra },
        { key: 'done', type: 'exit' },
      ],
    });
    expect(checkDefinition({ trigger: manual, ...wait({ timeoutNext: 'done' }) }).steps[0].timeoutNext).toBe('done');
    expect(failure(wait({ timeoutNext: 'ghost' })).details?.[0].field).toBe('steps.0.timeoutNext');
    expect(failure(wait({ timeout: undefined })).details?.[0].field).toBe('steps.0.timeout');
    expect(failure(wait({ untilEvent: { tracked: 'Paid', record: 'contact.updated' } })).details?.[0].field).toBe('steps.0.untilEvent');
    expect(failure(wait({ untilEvent: { record: 'nope.happened' } })).details?.[0].field).toBe('steps.0.untilEvent.record');
    expect(failure(wait({ duration: '1d' })).details?.[0].field).toBe('steps.0.duration');
    expect(failure({ steps: [{ key: 'w', type: 'wait', duration: '1d', timeout: '1d' }] }).details?.[0].field).toBe('steps.0.timeout');
  });

  it('checks waits, splits, settings and time zones', () => {
    expect(failure({ steps: [{ key: 'w', type: 'wait', duration: '0d' }] }).details?.[0].field).toBe('steps.0.duration');
    expect(failure({ steps: [{ key: 'w', type: 'wait', until: '2026-01-01T10:00:00' }] }).details?.[0].field).toBe('steps.0.until');
    expect(failure({ steps: [{ key: 'w', type: 'wait', untilTimeOfDay: '25:00' }] }).details?.[0].field).toBe('steps.0.untilTimeOfDay');
    const split = failure({
      steps: [
        {
          key: 's',
          type: 'branch',
          split: [
            { percentage: 50, next: 'a' },
            { percentage: 40, next: 'a' },
          ],
        },
        { key: 'a', type: 'exit' },
      ],
    });
    expect(split.details?.[0].message).toContain('add up to 100');
    expect(failure({ steps: [{ key: 'a', type: 'exit' }], settings: { timezone: 'Mars/Olympus' } }).details?.[0].field).toBe('settings.timezone');
    expect(failure({ steps: [{ key: 'a', type: 'exit' }], settings: { timezone: '+02:00' } }).details?.[0].field).toBe('settings.timezone');
    expect(failure({ steps: [{ key: 'a', type: 'exit' }], settings: { sendWindow: { from: '9', to: '20:00' } } }).details?.[0].field).toBe(
      'settings.sendWindow.from',
    );
    expect(checkDefinition({ trigger: manual, steps: [{ key: 'a', type: 'exit' }], settings: { timezone: 'Europe/Paris' } }).settings.timezone).toBe(
      'Europe/Paris',
    );
  });

  it('refuses a goal as the entry step or as the target of a next', () => {
    expect(failure({ steps: [{ key: 'g', type: 'goal', filter: 'x' }] }).message).toContain('at least one step');
    const e = failure({
      steps: [
        { key: 'a', type: 'wait', duration: '1d', next: 'g' },
        { key: 'g', type: 'goal', filter: 'x' },
      ],
    });
    expect(e.details?.[0]).toMatchObject({ field: 'steps.0.next', stepKey: 'a' });
  });
});
