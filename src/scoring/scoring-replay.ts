/**
 * The what-if's replay (README "What-if"): draft rules applied to stored events as the engine
 * applies published rules, in memory, writing nothing. Pure rules; the reads are the caller's
 * (ScoringJobsService.whatIf feeds two {@link PagedStream}s, the change feed's record events and the
 * stored tracked events, merged by event time).
 */
import type { RuleDefinition } from './scoring-rules.service.js';
import { durationMs, MAX_POINTS, MIN_POINTS } from './scoring.rules.js';

/** One stored event as the replay applies it: when it occurred, its contact, and the drafts that apply to it (their name and filter matched). */
export interface ReplayItem {
  /** Milliseconds since the epoch (fractions for a tracked event's microseconds). */
  at: number;
  contactId: number;
  /** Indexes into the replay's drafts, in draft order. */
  drafts: number[];
}

/**
 * A stream of replay items read page by page: `head()` answers the next item without waiting once a
 * page is loaded (`fill()` loads the next when this one is used up), so a merge of two streams awaits
 * once per page, not per event.
 */
export class PagedStream {
  private items: ReplayItem[] = [];
  private at = 0;
  private ended = false;

  /** `next` answers the next page (possibly empty while more follow), or null at the end. */
  constructor(private readonly next: () => Promise<ReplayItem[] | null>) {}

  /** Loads pages until one has items or the stream ended (nothing when the current page has items left). */
  async fill(): Promise<void> {
    while (this.at >= this.items.length && !this.ended) {
      const page = await this.next();
      if (page === null) this.ended = true;
      else {
        this.items = page;
        this.at = 0;
      }
    }
  }

  /** Whether the loaded page is used up and more may follow (call fill first). */
  get needsFill(): boolean {
    return this.at >= this.items.length && !this.ended;
  }

  head(): ReplayItem | undefined {
    return this.items[this.at];
  }

  shift(): void {
    this.at++;
  }
}

/**
 * The state of a replay: per (draft, contact) how often the draft applied and when it last did (by the
 * events' times), and per contact the points it would gain. {@link apply} checks a draft on an event
 * exactly as ScoringService's rule application does: not repeatable and applied before, maxPerContact
 * reached, within the cooldown since its last application, or a delta that would leave the bounds:
 * nothing.
 */
export class ReplayState {
  /** Per contact, the points the drafts would add. */
  readonly deltas = new Map<number, number>();
  applications = 0;
  private readonly usage = new Map<number, { count: number; lastMs: number }>();
  private readonly cooldowns: (number | null)[];

  constructor(private readonly drafts: readonly RuleDefinition[]) {
    this.cooldowns = drafts.map((d) => durationMs(d.cooldown));
  }

  /** Applies the item's drafts in order, given the contact's points now (`base`). */
  apply(item: ReplayItem, base: number): void {
    for (const i of item.drafts) {
      const d = this.drafts[i];
      const key = item.contactId * 64 + i;
      const u = this.usage.get(key);
      const count = u?.count ?? 0;
      if ((!d.repeatable && count > 0) || (d.maxPerContact !== null && count >= d.maxPerContact)) continue;
      const cooldown = this.cooldowns[i];
      if (cooldown !== null && u && item.at - u.lastMs < cooldown) continue;
      const points = base + (this.deltas.get(item.contactId) ?? 0) + d.delta;
      if (points < MIN_POINTS || points > MAX_POINTS) continue;
      this.deltas.set(item.contactId, (this.deltas.get(item.contactId) ?? 0) + d.delta);
      if (u) {
        u.count++;
        u.lastMs = item.at;
      } else this.usage.set(key, { count: 1, lastMs: item.at });
      this.applications++;
    }
  }
}
