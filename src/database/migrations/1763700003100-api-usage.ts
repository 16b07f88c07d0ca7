import { type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * API usage per token and hour, for the console's usage page: the requests the rate limiter let
 * through and the ones it refused (429). One row per (token, hour), written in batches by
 * ApiUsageService (never once per request) and kept 30 days, so the table stays bounded by the
 * tokens in use times 720 hours. `user_id` is the token's owner, whose plan limit the requests count against.
 */
export class ApiUsage1763700003100 implements MigrationInterface {
  name = 'ApiUsage1763700003100';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE api_usage_hourly (
        token_id integer NOT NULL,
        hour timestamptz NOT NULL,
        user_id integer NOT NULL,
        requests integer NOT NULL DEFAULT 0,
        limited integer NOT NULL DEFAULT 0,
        CONSTRAINT api_usage_hourly_pkey PRIMARY KEY (token_id, hour)
      )`);
    await q.query(`CREATE INDEX api_usage_hourly_user_idx ON api_usage_hourly (user_id, hour)`);
    await q.query(`CREATE INDEX api_usage_hourly_hour_idx ON api_usage_hourly (hour)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE api_usage_hourly`);
  }
}
