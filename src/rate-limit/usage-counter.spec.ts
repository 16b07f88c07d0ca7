import { describe, expect, it } from '@jest/globals';
import { Clock } from '../common/clock.js';
import { MAX_TALLIES, UsageCounter } from './usage-counter.js';

const H = 3_600_000;

describe('UsageCounter', () => {
  it('keeps one tally per token and hour, and hands an ended hour over with the next drain', () => {
    const clock = new Clock();
    const counter = new UsageCounter(clock);
    const hour = clock.nowMs() - (clock.nowMs() % H);
    counter.count(1, 10, false);
    counter.count(1, 10, true);
    clock.travel(H);
    counter.count(1, 10, false);
    counter.count(2, 20, true);
    const { tallies } = counter.drain();
    expect(tallies).toEqual([
      { tokenId: 1, userId: 10, hourMs: hour, requests: 2, limited: 1 },
      { tokenId: 1, userId: 10, hourMs: hour + H, requests: 1, limited: 0 },
      { tokenId: 2, userId: 20, hourMs: hour + H, requests: 1, limited: 1 },
    ]);
    expect(counter.drain()).toEqual({ tallies: [], dropped: 0 });
  });

  it('merges tallies of the same token and hour (a clock moved back, restored tallies)', () => {
    const clock = new Clock();
    const counter = new UsageCounter(clock);
    counter.count(1, 10, false);
    clock.travel(H);
    counter.count(1, 10, false);
    clock.travel(-H);
    counter.count(1, 10, true);
    const { tallies } = counter.drain();
    expect(tallies.map((t) => [t.requests, t.limited])).toEqual([
      [2, 1],
      [1, 0],
    ]);
    counter.restore(tallies);
    counter.count(1, 10, false);
    expect(counter.drain().tallies.map((t) => t.requests)).toEqual([3, 1]);
  });

  it('is bounded: at MAX_TALLIES it asks for a write once, then counts further new tokens as dropped', () => {
    const counter = new UsageCounter(new Clock());
    let full = 0;
    counter.onFull = () => full++;
    for (let i = 1; i <= MAX_TALLIES + 5; i++) counter.count(i, 1, false);
    counter.count(1, 1, false); // a token already counted still counts
    expect(full).toBe(1);
    const { tallies, dropped } = counter.drain();
    expect(tallies).toHaveLength(MAX_TALLIES);
    expect(tallies[0].requests).toBe(2);
    expect(dropped).toBe(5);
  });
});
