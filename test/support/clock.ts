import { mkdtempSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Moves the clock of a server started by an end-to-end suite (src/common/clock.ts): pass `env` to
 * startApp, then `travel(ms)` moves every process that shares the file, at once, without sleeping.
 */
export interface TestClock {
  /** Environment for startApp: TEST_CLOCK_FILE. */
  env: { TEST_CLOCK_FILE: string };
  /** The offset from the wall clock now, in milliseconds. */
  offsetMs: number;
  /** Moves the server's clock forward by `ms` (back when negative). */
  travel(ms: number): void;
  /** The server's current time. */
  now(): Date;
}

export function testClock(): TestClock {
  const file = join(mkdtempSync(join(tmpdir(), 'sf-clock-')), 'offset');
  let writes = 0;
  const clock: TestClock = {
    env: { TEST_CLOCK_FILE: file },
    offsetMs: 0,
    travel(ms) {
      clock.offsetMs += ms;
      writeFileSync(file, String(clock.offsetMs));
      // The server reads the file again when its modification time changes: make each write's distinct.
      writes += 1;
      const stamp = new Date(Date.UTC(2000, 0, 1) + writes * 1000);
      utimesSync(file, stamp, stamp);
    },
    now: () => new Date(Date.now() + clock.offsetMs),
  };
  return clock;
}
