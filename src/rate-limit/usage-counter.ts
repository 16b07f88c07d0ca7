import { Injectable } from '@nestjs/common';
import { Clock } from '../common/clock.js';

/** One token's requests in one hour, as counted in memory before ApiUsageService writes them. */
export interface UsageTally {
  tokenId: number;
  userId: number;
  /** The start of the hour, in ms since the epoch. */
  hourMs: number;
  /** Every request the rate limiter counted, refused ones included. */
  requests: number;
  /** The requests it refused (429). */
  limited: number;
}

const HOUR_MS = 3_600_000;
/** Tokens counted between two writes, at most; past it a write is asked for at once and further new tokens wait for it. */
export const MAX_TALLIES = 20_000;

/**
 * The API usage counted on the request path, in this process's memory: per token, the current
 * hour's requests and refusals. Counting is a Map lookup and two additions (no I/O, no string
 * built); ApiUsageService takes the tallies every few seconds and adds them to PostgreSQL in one
 * statement. Memory is bounded by the tokens used between two writes (MAX_TALLIES).
 */
@Injectable()
export class UsageCounter {
  private current = new Map<number, UsageTally>();
  /** Tallies of hours that ended since the last write. */
  private closed: UsageTally[] = [];
  private size = 0;
  /** Requests not counted because the counter was full (reported by the next write). */
  private droppedCount = 0;
  /** Called once when the counter fills up (ApiUsageService writes then). */
  onFull: (() => void) | null = null;

  constructor(private readonly clock: Clock) {}

  /** Counts one request of an API token (an OAuth access token counts for its parent token). */
  count(tokenId: number, userId: number, limited: boolean): void {
    const hourMs = this.clock.nowMs();
    const hour = hourMs - (hourMs % HOUR_MS);
    let t = this.current.get(tokenId);
    if (t === undefined || t.hourMs !== hour) {
      if (this.size >= MAX_TALLIES) {
        this.droppedCount++;
        return;
      }
      if (t !== undefined) this.closed.push(t);
      t = { tokenId, userId, hourMs: hour, requests: 0, limited: 0 };
      this.current.set(tokenId, t);
      if (++this.size === MAX_TALLIES) this.onFull?.();
    }
    t.requests++;
    if (limited) t.limited++;
  }

  /** Takes every tally counted so far (one per token and hour) and starts afresh; answers the requests dropped meanwhile. */
  drain(): { tallies: UsageTally[]; dropped: number } {
    const merged = new Map<string, UsageTally>();
    for (const t of [...this.closed, ...this.current.values()]) {
      const key = `${t.tokenId}:${t.hourMs}`;
      const m = merged.get(key);
      if (m) {
        m.requests += t.requests;
        m.limited += t.limited;
      } else merged.set(key, { ...t });
    }
    const dropped = this.droppedCount;
    this.current = new Map();
    this.closed = [];
    this.size = 0;
    this.droppedCount = 0;
    return { tallies: [...merged.values()], dropped };
  }

  /** Puts back tallies a write could not store (they go out with the next one), within the bound. */
  restore(tallies: readonly UsageTally[]): void {
    for (const t of tallies) {
      if (this.size >= MAX_TALLIES) {
        this.droppedCount += t.requests;
        continue;
      }
      this.closed.push(t);
      this.size++;
    }
  }
}
