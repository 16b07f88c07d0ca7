/**
 * Seeds the benchmark database in bulk SQL (generate_series, set-based INSERT ... SELECT): 1,000,000
 * contacts with realistic names, emails, phones, companies and 5 custom field values; 1,000 campaigns
 * with 1,000,000 memberships; 1,000,000 deals over two years; 100,000 text messages; 50 users in 5
 * teams. The schema comes from the application's own migrations (run before this). Secondary indexes
 * of the big tables are dropped during the load and recreated from their exact definitions after it.
 */
import pg from 'pg';

// prettier-ignore
const FIRST = ['James', 'Mary', 'Robert', 'Patricia', 'John', 'Jennifer', 'Michael', 'Linda', 'David', 'Elizabeth', 'William', 'Barbara', 'Richard', 'Susan', 'Joseph', 'Jessica', 'Thomas', 'Sarah', 'Charles', 'Karen', 'Christopher', 'Lisa', 'Daniel', 'Nancy', 'Matthew', 'Betty', 'Anthony', 'Margaret', 'Mark', 'Sandra', 'Donald', 'Ashley', 'Steven', 'Kimberly', 'Paul', 'Emily', 'Andrew', 'Donna', 'Joshua', 'Michelle', 'Kenneth', 'Carol', 'Kevin', 'Amanda', 'Brian', 'Dorothy', 'George', 'Melissa', 'Timothy', 'Deborah', 'Ronald', 'Stephanie', 'Edward', 'Rebecca', 'Jason', 'Sharon', 'Jeffrey', 'Laura', 'Ryan', 'Cynthia', 'Jacob', 'Kathleen', 'Gary', 'Amy', 'Nicholas', 'Angela', 'Eric', 'Shirley', 'Jonathan', 'Anna', 'Stephen', 'Brenda', 'Larry', 'Pamela', 'Justin', 'Emma', 'Scott', 'Nicole', 'Brandon', 'Helen', 'Benjamin', 'Samantha', 'Samuel', 'Katherine', 'Gregory', 'Christine', 'Alexander', 'Debra', 'Frank', 'Rachel', 'Patrick', 'Carolyn', 'Raymond', 'Janet', 'Jack', 'Catherine', 'Dennis', 'Maria', 'Jerry', 'Heather'];
// prettier-ignore
const LAST = ['Smith', 'Johnson', 'Williams', 'Brown', 'Jones', 'Garcia', 'Miller', 'Davis', 'Rodriguez', 'Martinez', 'Hernandez', 'Lopez', 'Gonzalez', 'Wilson', 'Anderson', 'Thomas', 'Taylor', 'Moore', 'Jackson', 'Martin', 'Lee', 'Perez', 'Thompson', 'White', 'Harris', 'Sanchez', 'Clark', 'Ramirez', 'Lewis', 'Robinson', 'Walker', 'Young', 'Allen', 'King', 'Wright', 'Scott', 'Torres', 'Nguyen', 'Hill', 'Flores', 'Green', 'Adams', 'Nelson', 'Baker', 'Hall', 'Rivera', 'Campbell', 'Mitchell', 'Carter', 'Roberts', 'Gomez', 'Phillips', 'Evans', 'Turner', 'Diaz', 'Parker', 'Cruz', 'Edwards', 'Collins', 'Reyes', 'Stewart', 'Morris', 'Morales', 'Murphy', 'Cook', 'Rogers', 'Gutierrez', 'Ortiz', 'Morgan', 'Cooper', 'Peterson', 'Bailey', 'Reed', 'Kelly', 'Howard', 'Ramos', 'Kim', 'Cox', 'Ward', 'Richardson', 'Watson', 'Brooks', 'Chavez', 'Wood', 'James', 'Bennett', 'Gray', 'Mendoza', 'Ruiz', 'Hughes', 'Price', 'Alvarez', 'Castillo', 'Sanders', 'Patel', 'Myers', 'Long', 'Ross', 'Foster', 'Jimenez'];
// prettier-ignore
const ADJ = ['Blue', 'Bright', 'Global', 'Prime', 'Summit', 'Apex', 'Northern', 'Pacific', 'Silver', 'Golden', 'Rapid', 'Quantum', 'Vertex', 'Urban', 'Evergreen', 'Pioneer', 'Crystal', 'Iron', 'Nova', 'Atlas', 'Cedar', 'Harbor', 'Lunar', 'Solar', 'Granite', 'Velvet', 'Crimson', 'Emerald', 'Falcon', 'Orbit'];
// prettier-ignore
const NOUN = ['Systems', 'Labs', 'Dynamics', 'Logistics', 'Analytics', 'Foods', 'Holdings', 'Partners', 'Networks', 'Media', 'Robotics', 'Energy', 'Health', 'Capital', 'Studios', 'Works', 'Solutions', 'Ventures', 'Outfitters', 'Brewing'];
const SUFFIX = ['Inc', 'LLC', 'Ltd', 'GmbH', 'Group', 'Co'];
const TITLES = [
  'CEO',
  'CTO',
  'CFO',
  'VP Sales',
  'VP Marketing',
  'Account Executive',
  'Sales Manager',
  'Marketing Manager',
  'Engineer',
  'Product Manager',
  'Buyer',
  'Director of Operations',
  'Consultant',
  'Analyst',
  'Founder',
];
const DOMAINS = ['example.com', 'mail.test', 'corp.example', 'inbox.test', 'company.example'];
const PRODUCTS = [
  'Starter Plan',
  'Growth Plan',
  'Enterprise Plan',
  'Onboarding',
  'Training',
  'Support Gold',
  'Support Platinum',
  'API Add-on',
  'SMS Bundle 10k',
  'SMS Bundle 100k',
  'Analytics Pro',
  'Data Import',
  'Consulting Day',
  'Custom Integration',
  'Seats x10',
  'Seats x50',
  'Storage 1TB',
  'Email Warmup',
  'Landing Pages',
  'A/B Testing',
];
const TEAMS = ['EMEA', 'AMER', 'APAC', 'Enterprise', 'SMB'];
const INDUSTRIES = ['software', 'retail', 'finance', 'health', 'education', 'manufacturing', 'media', 'logistics'];
const CITIES = [
  'London',
  'Berlin',
  'Paris',
  'Madrid',
  'New York',
  'Chicago',
  'Austin',
  'Toronto',
  'Sydney',
  'Tokyo',
  'Singapore',
  'Dublin',
  'Lisbon',
  'Warsaw',
  'Oslo',
];

const arr = (xs) => `ARRAY[${xs.map((x) => `'${x.replace(/'/g, "''")}'`).join(',')}]::text[]`;

export const SIZES = {
  contacts: Number(process.env.BENCH_CONTACTS ?? 1_000_000),
  campaigns: 1000,
  memberships: Number(process.env.BENCH_MEMBERSHIPS ?? 1_000_000),
  deals: Number(process.env.BENCH_DEALS ?? 1_000_000),
  textMessages: Number(process.env.BENCH_TEXT_MESSAGES ?? 100_000),
  users: 50,
};

async function timed(log, label, fn) {
  const t = Date.now();
  await fn();
  log(`  ${label}: ${((Date.now() - t) / 1000).toFixed(1)} s`);
}

/** Drops the secondary indexes of a table, returning their definitions to recreate them. */
async function dropIndexes(db, table) {
  const { rows } = await db.query(
    `SELECT i.indexname, i.indexdef FROM pg_indexes i
      WHERE i.schemaname = 'public' AND i.tablename = $1
        AND i.indexname NOT IN (SELECT conname FROM pg_constraint WHERE conrelid = $1::regclass AND contype IN ('p','u'))`,
    [table],
  );
  for (const r of rows) await db.query(`DROP INDEX ${r.indexname}`);
  return rows.map((r) => r.indexdef);
}

export async function seed(url, log = console.log) {
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  try {
    await db.query(`SET maintenance_work_mem = '512MB'`);
    await db.query(`SET synchronous_commit = off`);
    const t0 = Date.now();
    log(`seeding ${url.replace(/:[^:@/]+@/, ':***@')}`);

    await timed(log, `${SIZES.users} users in ${TEAMS.length} teams`, () =>
      db.query(
        `INSERT INTO users (name, email, plan, team)
         SELECT (${arr(FIRST)})[1 + (i * 7) % ${FIRST.length}] || ' ' || (${arr(LAST)})[1 + (i * 13) % ${LAST.length}],
                'rep' || i || '@sales.example', 'enterprise', (${arr(TEAMS)})[1 + i % ${TEAMS.length}]
           FROM generate_series(1, ${SIZES.users}) i
         ON CONFLICT DO NOTHING`,
      ),
    );
    const { rows: userRows } = await db.query(`SELECT min(id) AS lo, max(id) AS hi FROM users WHERE email LIKE 'rep%@sales.example'`);
    const uLo = Number(userRows[0].lo);

    await timed(log, '5 custom contact fields', () =>
      db.query(`
        INSERT INTO fields (object, label, alias, type, field_order, properties, created_by_user)
        VALUES ('contact', 'Industry', 'industry', 'select', 1, '{"list": ${JSON.stringify(INDUSTRIES.map((v) => ({ label: v, value: v })))}}', 'bench'),
               ('contact', 'Lead score', 'lead_score', 'number', 2, '[]', 'bench'),
               ('contact', 'Newsletter', 'newsletter', 'boolean', 3, '[]', 'bench'),
               ('contact', 'City', 'city', 'text', 4, '[]', 'bench'),
               ('contact', 'Signup date', 'signup_date', 'date', 5, '[]', 'bench')
        ON CONFLICT DO NOTHING`),
    );

    const contactIndexes = await dropIndexes(db, 'contacts');
    await timed(log, `${SIZES.contacts.toLocaleString()} contacts`, () =>
      db.query(`
        INSERT INTO contacts (name, email, phone, company, title, owner_id, fields, created_at, created_by, created_by_user)
        SELECT f || ' ' || l,
               lower(f) || '.' || lower(l) || i || '@' || (${arr(DOMAINS)})[1 + i % ${DOMAINS.length}],
               '+1' || (200 + i % 700) || lpad(((i::bigint * 7919) % 10000000)::text, 7, '0'),
               (${arr(ADJ)})[1 + (i / 7) % ${ADJ.length}] || ' ' || (${arr(NOUN)})[1 + (i / 211) % ${NOUN.length}] || ' ' || (${arr(SUFFIX)})[1 + (i / 4219) % ${SUFFIX.length}],
               (${arr(TITLES)})[1 + (i * 3) % ${TITLES.length}],
               CASE WHEN i % 4 = 0 THEN ${uLo} + i % ${SIZES.users} END,
               jsonb_build_object('industry', (${arr(INDUSTRIES)})[1 + i % ${INDUSTRIES.length}], 'lead_score', i % 100,
                                  'newsletter', i % 3 = 0, 'city', (${arr(CITIES)})[1 + (i / 3) % ${CITIES.length}],
                                  'signup_date', to_char(date '2024-01-01' + (i % 700), 'YYYY-MM-DD')),
               now() - (i % 730) * interval '1 day', ${uLo}, 'bench'
          FROM (SELECT i, (${arr(FIRST)})[1 + (i * 31) % ${FIRST.length}] AS f, (${arr(LAST)})[1 + (i * 17 + i / ${FIRST.length}) % ${LAST.length}] AS l
                  FROM generate_series(1, ${SIZES.contacts}) i) s`),
    );
    await timed(log, `recreate ${contactIndexes.length} contact indexes`, async () => {
      for (const def of contactIndexes) await db.query(def);
    });

    await timed(log, `${SIZES.campaigns} campaigns`, () =>
      db.query(`
        INSERT INTO campaigns (name, description, type, status, start_date, end_date, created_by, created_by_user)
        SELECT 'Campaign ' || i || ' ' || (${arr(ADJ)})[1 + i % ${ADJ.length}], 'Seeded campaign ' || i,
               CASE WHEN i % 2 = 0 THEN 'email' ELSE 'sms' END, CASE WHEN i % 10 = 0 THEN 'inactive' ELSE 'active' END,
               now() - (i % 365) * interval '1 day', CASE WHEN i % 5 = 0 THEN now() + (i % 90) * interval '1 day' END, ${uLo}, 'bench'
          FROM generate_series(1, ${SIZES.campaigns}) i`),
    );
    const { rows: bounds } = await db.query(`SELECT (SELECT min(id) FROM contacts) AS c0, (SELECT min(id) FROM campaigns) AS k0`);
    const c0 = Number(bounds[0].c0);
    const k0 = Number(bounds[0].k0);

    const memberIndexes = await dropIndexes(db, 'campaign_members');
    await timed(log, `${SIZES.memberships.toLocaleString()} campaign memberships`, () =>
      db.query(`
        INSERT INTO campaign_members (campaign_id, contact_id, added_at)
        SELECT ${k0} + (i::bigint * 7919) % ${SIZES.campaigns}, ${c0} + (i - 1) % ${SIZES.contacts}, now() - (i % 300) * interval '1 hour'
          FROM generate_series(1, ${SIZES.memberships}) i
        ON CONFLICT DO NOTHING`),
    );
    for (const def of memberIndexes) await db.query(def);

    const dealIndexes = await dropIndexes(db, 'deals');
    // Deals sit in the default pipeline's first stage of their status (set here rather than by the insert trigger, row by row).
    const stages = (
      await db.query(`SELECT DISTINCT ON (s.type) s.type, s.id, s.name, p.id AS pipeline_id FROM pipelines p JOIN pipeline_stages s ON s.pipeline_id = p.id
                       WHERE p.is_default AND s.removed_at IS NULL ORDER BY s.type, s.position, s.id`)
    ).rows;
    const stageOf = (col) =>
      `CASE s ${stages.map((x) => `WHEN '${x.type}' THEN ${col === 'name' ? `'${x.name.replace(/'/g, "''")}'` : x[col]}`).join(' ')} END`;
    await timed(log, `${SIZES.deals.toLocaleString()} deals over two years`, () =>
      db.query(`
        INSERT INTO deals (title, value, contact_id, expected_close_date, pipeline_id, stage_id, stage, entered_stage_at, probability, status, product, quantity, closed_at, owner_id, created_at, created_by, created_by_user)
        SELECT 'Deal ' || i, round((100 + (i::bigint * 7919) % 50000)::numeric / 3, 2), ${c0} + (i * 13) % ${SIZES.contacts},
               (date '2025-01-01' + (i % 730)), ${stageOf('pipeline_id')}, ${stageOf('id')}, ${stageOf('name')}, now() - (i % 730) * interval '1 day',
               (i * 17) % 101, s, (${arr(PRODUCTS)})[1 + (i * 3) % ${PRODUCTS.length}], 1 + i % 10,
               CASE WHEN s <> 'open' THEN now() - ((i * 37) % (730 * 24)) * interval '1 hour' END,
               ${uLo} + i % ${SIZES.users}, now() - (i % 730) * interval '1 day', ${uLo}, 'bench'
          FROM (SELECT i, CASE WHEN i % 10 < 4 THEN 'won' WHEN i % 10 < 7 THEN 'lost' ELSE 'open' END AS s
                  FROM generate_series(1, ${SIZES.deals}) i) d`),
    );
    await timed(log, `recreate ${dealIndexes.length} deal indexes`, async () => {
      for (const def of dealIndexes) await db.query(def);
    });

    const hasTextMessages = (await db.query(`SELECT to_regclass('public.text_messages') IS NOT NULL AS ok`)).rows[0].ok;
    if (hasTextMessages) {
      await timed(log, `${SIZES.textMessages.toLocaleString()} text messages`, () =>
        db.query(`
          INSERT INTO text_messages (content, recipient, status, campaign_id, sent_at, delivered_at, created_at, created_by, created_by_user)
          SELECT 'Hello from campaign ' || (i % ${SIZES.campaigns}), '+1' || (200 + i % 700) || lpad(((i::bigint * 104729) % 10000000)::text, 7, '0'),
                 s, ${k0} + i % ${SIZES.campaigns},
                 CASE WHEN s IN ('sent','delivered','failed') THEN now() - (i % 500) * interval '1 hour' END,
                 CASE WHEN s = 'delivered' THEN now() - (i % 500) * interval '1 hour' + interval '5 seconds' END,
                 now() - (i % 500) * interval '1 hour', ${uLo}, 'bench'
            FROM (SELECT i, (ARRAY['delivered','delivered','delivered','sent','failed','draft'])[1 + i % 6] AS s
                    FROM generate_series(1, ${SIZES.textMessages}) i) t`),
      );
    } else {
      log('  text_messages table not present: skipped');
    }

    // VACUUM sets the visibility map, so id-only paging is an index-only scan (autovacuum does this in production).
    await timed(log, 'VACUUM ANALYZE', () => db.query('VACUUM ANALYZE'));
    log(`seeded in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
    return { userIdLow: uLo, contactIdLow: c0, campaignIdLow: k0 };
  } finally {
    await db.end();
  }
}
