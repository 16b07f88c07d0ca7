import { Injectable } from '@nestjs/common';
import { Transactions } from '../database/transactions.js';
import type { UsageTally } from './usage-counter.js';

/** One row of api_usage_hourly as the console reads it. */
export interface UsageHour {
  tokenId: number;
  /** The start of the hour. */
  hour: Date;
  requests: number;
  limited: number;
}

/** Every query of api_usage_hourly. */
@Injectable()
export class ApiUsageRepository {
  constructor(private readonly transactions: Transactions) {}

  /** Adds the tallies (at most one per token and hour) to their rows, in one statement. */
  async add(tallies: readonly UsageTally[]): Promise<void> {
    if (!tallies.length) return;
    await this.transactions.db.query(
      `INSERT INTO api_usage_hourly (token_id, hour, user_id, requests, limited)
       SELECT * FROM unnest($1::int[], $2::timestamptz[], $3::int[], $4::int[], $5::int[])
       ON CONFLICT (token_id, hour) DO UPDATE
         SET requests = api_usage_hourly.requests + EXCLUDED.requests, limited = api_usage_hourly.limited + EXCLUDED.limited`,
      [
        tallies.map((t) => t.tokenId),
        tallies.map((t) => new Date(t.hourMs).toISOString()),
        tallies.map((t) => t.userId),
        tallies.map((t) => t.requests),
        tallies.map((t) => t.limited),
      ],
    );
  }

  /** A user's hours in [from, to), oldest first. */
  async hoursOf(userId: number, from: Date, to: Date): Promise<UsageHour[]> {
    const rows: { token_id: number; hour: Date; requests: number; limited: number }[] = await this.transactions.db.query(
      `SELECT token_id, hour, requests, limited FROM api_usage_hourly WHERE user_id = $1 AND hour >= $2 AND hour < $3 ORDER BY hour, token_id`,
      [userId, from, to],
    );
    return rows.map((r) => ({ tokenId: r.token_id, hour: new Date(r.hour), requests: r.requests, limited: r.limited }));
  }

  /** Deletes the hours that started before `before`; answers how many rows went. */
  async pruneBefore(before: Date): Promise<number> {
    const [r]: { n: string }[] = await this.transactions.db.query(
      `WITH gone AS (DELETE FROM api_usage_hourly WHERE hour < $1 RETURNING 1) SELECT count(*) AS n FROM gone`,
      [before],
    );
    return Number(r.n);
  }
}
