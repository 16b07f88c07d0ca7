import { statSync, readFileSync } from 'node:fs';

/**
 * The one clock (docs/decisions/clock.md). Everything that waits, expires, decays, schedules or
 * stamps a time it later compares reads `now()` from the injected Clock, never `Date.now()` or SQL
 * `now()`: a query that compares against "now" takes the clock's time as a parameter.
 *
 * Tests move time instead of sleeping: a service spec calls `clock.travel(ms)` on the instance it
 * injected; an end-to-end suite starts the server with `TEST_CLOCK_FILE=<path>` and writes an
 * offset in milliseconds into that file (see `test/support/clock.ts`). The file is read again
 * whenever its modification time changes, so every process of the suite (API and workers) moves at
 * once. The server refuses `TEST_CLOCK_FILE` when NODE_ENV is production.
 */
export class Clock {
  private offsetMs = 0;
  private fileMtimeMs = -1;

  constructor(private readonly offsetFile: string | null = null) {}

  /** The current time. */
  now(): Date {
    return new Date(this.nowMs());
  }

  /** The current time in milliseconds since the epoch. */
  nowMs(): number {
    if (this.offsetFile !== null) this.readOffsetFile(this.offsetFile);
    return Date.now() + this.offsetMs;
  }

  /** Moves this clock by `ms` (tests only; negative goes back). */
  travel(ms: number): void {
    this.offsetMs += ms;
  }

  /** The offset from the wall clock, in milliseconds. */
  get offset(): number {
    return this.offsetMs;
  }

  private readOffsetFile(file: string): void {
    let mtime: number;
    try {
      mtime = statSync(file).mtimeMs;
    } catch {
      this.fileMtimeMs = -1;
      this.offsetMs = 0;
      return;
    }
    if (mtime === this.fileMtimeMs) return;
    this.fileMtimeMs = mtime;
    const value = Number(readFileSync(file, 'utf8').trim() || '0');
    this.offsetMs = Number.isFinite(value) ? value : 0;
  }
}
