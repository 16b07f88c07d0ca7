import { describe, expect, it } from '@jest/globals';
import { AppError } from '../common/errors.js';
import { compileFilter } from '../lists/filter-sql.js';
import { CONTACT_LIST_SPEC } from '../contacts/contact.columns.js';
import { behaviourField, dependsOnTime, trackedPropertiesRegistry, windowStartDay } from './index.js';
import { parseFilterText } from '../lists/filter-syntax.js';
import { contactTraits, jsonDepth, readRequest, TRACKING_LIMITS, typesByProperty, propertyTypes } from './tracking.rules.js';

const NOW = new Date('2026-11-27T10:00:00Z');

function refused(body: unknown, route: 'batch' | 'track' | 'identify' = 'batch'): string[] {
  try {
    readRequest(body, route, NOW);
  } catch (e) {
    expect(e).toBeInstanceOf(AppError);
    return ((e as AppError).details ?? []).map((d) => d.field ?? '');
  }
  throw new Error('accepted');
}

describe('tracking rules', () => {
  it("measures a batch's size as its JSON text's (each call serialised once): 500 KB passes, one byte more is refused", () => {
    const call = (i: number, pad: string) => ({ type: 'track', event: 'é', userId: `u${i}`, messageId: `m${i}`, properties: { pad, ü: [1, { x: null }] } });
    const body = (pad: string) => ({
      sentAt: NOW.toISOString(),
      context: { library: { name: 'ß' } },
      batch: Array.from({ length: 40 }, (_, i) => call(i, i ? 'x' : pad)),
    });
    const size = (b: unknown) => Buffer.byteLength(JSON.stringify(b));
    // Pad the first call until the whole text is exactly the limit (its multi-byte characters included).
    const need = TRACKING_LIMITS.batchBytes - size(body(''));
    const euros = Math.floor(need / 3) - 10;
    const pad = '€'.repeat(euros) + 'a'.repeat(need - 3 * euros);
    expect(size(body(pad))).toBe(TRACKING_LIMITS.batchBytes);
    expect(() => readRequest(body(pad), 'batch', NOW)).toThrow(/batch\.0 is \d+ bytes; a call may be at most/);
    // Spread over calls under 32 KB each.
    const spread = (n: number) => ({ batch: Array.from({ length: 20 }, (_, i) => call(i, '€'.repeat(n + (i === 0 ? 1 : 0)))) });
    let n = 8000;
    while (size(spread(n)) > TRACKING_LIMITS.batchBytes) n--;
    const under = spread(n);
    expect(readRequest(under, 'batch', NOW)).toHaveLength(20);
    const over = { ...under, writeKey: 'k'.repeat(TRACKING_LIMITS.batchBytes - size(under) - ',"writeKey":""'.length + 1) };
    expect(size(over)).toBe(TRACKING_LIMITS.batchBytes + 1);
    expect(() => readRequest(over, 'batch', NOW)).toThrow(`is ${TRACKING_LIMITS.batchBytes + 1} bytes; a batch may be at most`);
    expect(refused(over)).toEqual(['batch']);
  });

  it('reads Segment calls: ids as strings, the client clock skew corrected by sentAt, a far future clamped', () => {
    const [call] = readRequest(
      { userId: 42, event: ' Signed Up ', properties: { plan: 'pro' }, timestamp: '2026-11-27T09:00:00Z', sentAt: '2026-11-27T09:30:00Z' },
      'track',
      NOW,
    );
    expect(call).toMatchObject({ type: 'track', name: 'Signed Up', userId: '42', anonymousId: null, properties: { plan: 'pro' } });
    // sent 30 min "early" by the client's clock: moved by the skew
    expect(call.occurredAt.toISOString()).toBe('2026-11-27T09:30:00.000Z');
    const [future] = readRequest({ anonymousId: 'a', event: 'x', timestamp: '2026-11-29T10:00:01Z' }, 'track', NOW);
    expect(future.occurredAt).toEqual(NOW);
    expect(future.clampedFrom).toBe('2026-11-29T10:00:01.000Z');
    const [within] = readRequest({ anonymousId: 'a', event: 'x', timestamp: '2026-11-28T09:00:00Z' }, 'track', NOW);
    expect(within.clampedFrom).toBeNull();
  });

  it('refuses each fault naming the call index and field', () => {
    expect(refused({ batch: [{ type: 'track', userId: 'u' }] })).toEqual(['batch.0.event']);
    expect(refused({ batch: [{ type: 'track', event: 'e' }] })).toEqual(['batch.0.userId']);
    expect(refused({ batch: [{ type: 'page', userId: 'u' }] })).toEqual(['batch.0.type']);
    expect(refused({ batch: [{ type: 'track', event: 'e', userId: 'u', properties: 'x' }] })).toEqual(['batch.0.properties']);
    expect(refused({ batch: [{ type: 'track', event: 'e', userId: 'u', timestamp: 'yesterday' }] })).toEqual(['batch.0.timestamp']);
    expect(refused({ batch: [{ type: 'identify', userId: 'u', traits: { a: { b: { c: { d: { e: { f: 1 } } } } } } }] })).toEqual(['batch.0.traits']);
    const many = Object.fromEntries(Array.from({ length: 256 }, (_, i) => [`k${i}`, i]));
    expect(refused({ batch: [{ type: 'track', event: 'e', userId: 'u', properties: many }] })).toEqual(['batch.0.properties']);
    expect(refused({ batch: [{ type: 'track', event: 'e', userId: 'u', properties: { s: 'x'.repeat(33 * 1024) } }] })).toEqual(['batch.0']);
    expect(refused({ batch: Array.from({ length: TRACKING_LIMITS.batchItems + 1 }, () => ({ type: 'track', event: 'e', userId: 'u' })) })).toEqual(['batch']);
    const big = Array.from({ length: 20 }, () => ({ type: 'track', event: 'e', userId: 'u', properties: { s: 'x'.repeat(30 * 1024) } }));
    expect(refused({ batch: big })).toEqual(['batch']);
    expect(refused({ event: 'e' }, 'track')).toEqual(['userId']);
    expect(refused({ batch: 'nope' })).toEqual(['batch']);
  });

  it('maps reserved traits and custom field aliases onto contact values', () => {
    expect(contactTraits({ firstName: 'Ada', lastName: 'L', email: 'a@x.test', company: { name: 'AE' }, plan: 'pro', other: 1 }, new Set(['plan']))).toEqual({
      values: { name: 'Ada L', email: 'a@x.test', company: 'AE' },
      fields: { plan: 'pro' },
    });
  });

  it('keeps observed property types', () => {
    expect(typesByProperty({ ...propertyTypes({ a: 1, b: 'x' }), ...propertyTypes({ a: 'y', c: null }) })).toEqual({
      a: ['number', 'string'],
      b: ['string'],
      c: ['null'],
    });
    expect(jsonDepth({ a: { b: [1] } })).toBe(3);
  });

  it('compiles behavioural fields to the daily counts, the window at the given now', () => {
    expect(behaviourField('events.Order Completed.count.7d')).toEqual({ event: 'Order Completed', measure: 'count', window: '7d' });
    expect(behaviourField('events.a.b.lastAt')).toEqual({ event: 'a.b', measure: 'lastAt', window: null });
    expect(behaviourField('events.x.count.2d')).toBeNull();
    expect(windowStartDay(NOW, 7)).toBe('2026-11-21');
    const { compiled, node } = compileFilter(
      'and(events.pricing_viewed.count.7d[gte]:3,events.trial_started.lastAt[isEmpty])',
      CONTACT_LIST_SPEC.filterable ?? {},
      NOW,
    );
    expect(compiled.sql).toContain('tracked_event_daily');
    expect(Object.values(compiled.params)).toEqual(expect.arrayContaining(['pricing_viewed', '2026-11-21', 3, 'trial_started']));
    expect(dependsOnTime(node)).toBe(true);
    expect(dependsOnTime(compileFilter('events.x.count[gte]:1', CONTACT_LIST_SPEC.filterable ?? {}, NOW).node)).toBe(false);
    expect(() => compileFilter('events.x.count[contains]:1', CONTACT_LIST_SPEC.filterable ?? {}, NOW)).toThrow(AppError);
  });

  describe('trackedPropertiesRegistry', () => {
    const compiled = (text: string) => {
      const node = parseFilterText(text);
      return compileFilter(node, trackedPropertiesRegistry(node, 'p.properties')).compiled;
    };

    it('types a property by how the filter compares it', () => {
      const c = compiled('and(properties.plan_name[eq]:pro,properties.seats[gte]:5)');
      expect(c.sql).toContain('p.properties');
      // Equality on text is a jsonb containment; an order comparison reads the key as a number.
      expect(Object.values(c.params)).toEqual(['{"plan_name":"pro"}', '5']);
      expect(c.sql).toContain("jsonb_typeof((p.properties -> 'seats')) = 'number'");
    });

    it('leaves out what is not a top-level property, so the filter fails naming it', () => {
      // Mixed case is refused too: JSON keys are written into the SQL text, and only lower-case ones are.
      for (const text of ['email[eq]:x', 'properties.a.b[eq]:x', 'properties.9lives[eq]:x', 'properties.planName[eq]:x'])
        expect(() => compiled(text)).toThrow();
    });
  });
});
