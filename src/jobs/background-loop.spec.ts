import { describe, expect, it } from '@jest/globals';
import { Logger } from '@nestjs/common';
import { waitUntil } from '../../test/support/wait.js';
import { BackgroundLoop, runsBackgroundWork } from './background-loop.js';

const until = (what: string, check: () => boolean): Promise<boolean> => waitUntil(what, async () => check(), 3000, 5);

/** A pass that waits until released, counting its starts. */
function gatedPass() {
  let release: (() => void) | null = null;
  const state = {
    starts: 0,
    running: false,
    fail: false,
    release: () => {
      const r = release;
      release = null;
      r?.();
    },
    pass: async () => {
      state.starts++;
      state.running = true;
      await new Promise<void>((r) => (release = r));
      state.running = false;
      if (state.fail) throw new Error('pass broke');
    },
  };
  return state;
}

/** A logger that keeps its warnings. */
class KeptLogger extends Logger {
  readonly warnings: unknown[] = [];
  override warn(message: unknown): void {
    this.warnings.push(message);
  }
}

// The interval is an hour: only start() and kick() run passes here.
const HOUR = 3_600_000;

describe('BackgroundLoop', () => {
  it('runs a pass at start; kicks while it runs make exactly one more pass after it, then none', async () => {
    const p = gatedPass();
    const loop = new BackgroundLoop('test', p.pass, HOUR, new KeptLogger());
    loop.start();
    await until('the first pass', () => p.running);
    loop.kick();
    loop.kick();
    loop.kick();
    p.release();
    await until('the second pass', () => p.starts === 2 && p.running);
    p.release();
    await until('the second pass to end', () => !p.running);
    // No third pass: the three kicks were one.
    await new Promise((r) => setImmediate(r));
    expect(p.starts).toBe(2);
    loop.kick();
    await until('a pass after a kick when idle', () => p.starts === 3);
    p.release();
    await loop.stop();
  });

  it('a pass that throws is logged and the loop goes on', async () => {
    const p = gatedPass();
    const logger = new KeptLogger();
    const loop = new BackgroundLoop('test', p.pass, HOUR, logger);
    p.fail = true;
    loop.start();
    await until('the first pass', () => p.running);
    p.release();
    await until('the warning', () => logger.warnings.length === 1);
    expect(logger.warnings[0]).toEqual({ msg: 'test pass failed', err: 'pass broke' });
    p.fail = false;
    loop.kick();
    await until('the next pass', () => p.starts === 2);
    p.release();
    await loop.stop();
  });

  it('stop waits for the running pass; after it, kicks run nothing and `stopping` is true', async () => {
    const p = gatedPass();
    const loop = new BackgroundLoop('test', p.pass, HOUR, new KeptLogger());
    loop.start();
    await until('the first pass', () => p.running);
    let stopped = false;
    const stopping = loop.stop().then(() => (stopped = true));
    expect(loop.stopping).toBe(true);
    await new Promise((r) => setImmediate(r));
    expect(stopped).toBe(false);
    p.release();
    await stopping;
    loop.kick();
    loop.start();
    await new Promise((r) => setTimeout(r, 20));
    expect(p.starts).toBe(1);
  });

  it('runs in worker and all processes that run workers', () => {
    expect(runsBackgroundWork({ role: 'all' }, { runsWorkers: true })).toBe(true);
    expect(runsBackgroundWork({ role: 'worker' }, { runsWorkers: true })).toBe(true);
    expect(runsBackgroundWork({ role: 'api' }, { runsWorkers: true })).toBe(false);
    expect(runsBackgroundWork({ role: 'all' }, { runsWorkers: false })).toBe(false);
  });
});
