import { mkdtempSync, writeFileSync, utimesSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Clock } from './clock.js';

describe('Clock', () => {
  it('reads the wall clock and moves when told to', () => {
    const clock = new Clock();
    const before = Date.now();
    expect(clock.nowMs()).toBeGreaterThanOrEqual(before);
    clock.travel(86_400_000);
    expect(clock.nowMs() - Date.now()).toBeGreaterThanOrEqual(86_400_000 - 50);
    expect(clock.now()).toBeInstanceOf(Date);
    expect(clock.offset).toBe(86_400_000);
  });

  it('follows an offset file as soon as it changes, and falls back to no offset without one', () => {
    const dir = mkdtempSync(join(tmpdir(), 'clock-'));
    const file = join(dir, 'offset');
    try {
      const clock = new Clock(file);
      expect(Math.abs(clock.nowMs() - Date.now())).toBeLessThan(50);
      writeFileSync(file, String(3_600_000));
      expect(clock.nowMs() - Date.now()).toBeGreaterThanOrEqual(3_600_000 - 50);
      writeFileSync(file, String(7_200_000));
      // Same second on coarse file systems: a changed mtime is what the clock watches, so set one.
      utimesSync(file, new Date(), new Date(Date.now() + 1000));
      expect(clock.nowMs() - Date.now()).toBeGreaterThanOrEqual(7_200_000 - 50);
      rmSync(file);
      expect(Math.abs(clock.nowMs() - Date.now())).toBeLessThan(50);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
