import { describe, expect, it } from '@jest/globals';
import type { RuleDefinition } from './scoring-rules.service.js';
import { PagedStream, type ReplayItem, ReplayState } from './scoring-replay.js';
import { MAX_POINTS } from './scoring.rules.js';

const HOUR = 3_600_000;

function draft(over: Partial<RuleDefinition>): RuleDefinition {
  return {
    id: -1,
    name: 'draft',
    onKind: 'trackedEvent',
    onName: 'Viewed',
    filter: null,
    delta: 1,
    repeatable: true,
    maxPerContact: null,
    cooldown: null,
    createdAt: null,
    ...over,
  };
}

describe('ReplayState (the what-if applies drafts as the engine applies rules)', () => {
  it('counts per draft and contact: not repeatable once, maxPerContact n times, a cooldown between event times', () => {
    const state = new ReplayState([draft({ delta: 10, repeatable: false }), draft({ delta: 3, maxPerContact: 2, cooldown: '1h' }), draft({ delta: 1 })]);
    const at = (hours: number, contactId = 7): ReplayItem => ({ at: hours * HOUR, contactId, drafts: [0, 1, 2] });
    for (const item of [at(0), at(0.5), at(1), at(3), at(0, 8)]) state.apply(item, 0);
    // Contact 7: 10 once; 3 at 0 h and 1 h (0.5 h is within the cooldown, 3 h past maxPerContact); 1 each time.
    expect(state.deltas.get(7)).toBe(10 + 3 + 3 + 4);
    expect(state.deltas.get(8)).toBe(10 + 3 + 1);
    expect(state.applications).toBe(1 + 2 + 4 + 3);
  });

  it('skips an application that would take the points beyond ±2^31, as the engine does, and applies the next that fits', () => {
    const state = new ReplayState([draft({ delta: 1_000 }), draft({ delta: -5 })]);
    state.apply({ at: 0, contactId: 1, drafts: [0, 1] }, MAX_POINTS - 500);
    expect(state.deltas.get(1)).toBe(-5);
    expect(state.applications).toBe(1);
  });
});

describe('PagedStream', () => {
  it('answers items page by page, skipping empty pages, until the source ends', async () => {
    const pages: (ReplayItem[] | null)[] = [[{ at: 1, contactId: 1, drafts: [] }], [], [{ at: 2, contactId: 2, drafts: [] }], null];
    let calls = 0;
    const stream = new PagedStream(() => Promise.resolve(pages[calls++]));
    const seen: number[] = [];
    for (;;) {
      if (stream.needsFill) await stream.fill();
      const item = stream.head();
      if (!item) break;
      seen.push(item.contactId);
      stream.shift();
    }
    expect(seen).toEqual([1, 2]);
    expect(calls).toBe(4);
    expect(stream.needsFill).toBe(false);
  });
});
