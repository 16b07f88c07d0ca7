import { Injectable } from '@nestjs/common';
import { type Db, Transactions, type Tx } from '../database/transactions.js';
import { type FieldObject, UNIQUE_VALUE_LOCK, uniqueLockKey } from './field-rules.js';

/** The table holding each object's custom values in its `fields` jsonb column (a constant map: never client text). */
const VALUE_TABLES: Record<FieldObject, string> = { contact: 'contacts', company: 'companies' };

/**
 * The queries on custom values (the `fields` jsonb column of contacts and of companies), which the
 * fields feature owns: checking unique-identifier values, and renaming or removing a field's key
 * in every record when the field changes. Nothing here reads or writes another column of those
 * tables (ContactsRepository and CompaniesRepository do). `object` defaults to contact.
 */
@Injectable()
export class ContactFieldValuesRepository {
  constructor(private readonly transactions: Transactions) {}

  private db(tx?: Tx): Db {
    return tx ?? this.transactions.db;
  }

  /** Takes the per-field advisory lock of "values of this field are unique", held until `tx` ends. */
  async lockUniqueValues(alias: string, tx: Tx, object: FieldObject = 'contact'): Promise<void> {
    await tx.query(`SELECT ${UNIQUE_VALUE_LOCK}`, [uniqueLockKey(object, alias)]);
  }

  /** Id of a record other than `exceptId` holding `value` (JSON text) in the field, or null. */
  async holderOf(alias: string, value: string, exceptId: number | null, tx?: Tx, object: FieldObject = 'contact'): Promise<number | null> {
    const rows: { id: number }[] = await this.db(tx).query(
      `SELECT id FROM ${VALUE_TABLES[object]} WHERE fields @> jsonb_build_object($1::text, $2::jsonb) AND fields -> $1::text = $2::jsonb AND id <> $3 LIMIT 1`,
      [alias, value, exceptId ?? 0],
    );
    return rows[0]?.id ?? null;
  }

  /** For each value (JSON text), the contact holding it in the field, if any: one statement over the GIN index (batch upsert by a unique field). */
  async holdersOf(alias: string, values: string[], tx?: Tx): Promise<{ key: string; id: number }[]> {
    return this.db(tx).query(
      `SELECT v.k AS key, c.id FROM unnest($2::text[]) AS v(k) JOIN contacts c ON c.fields @> jsonb_build_object($1::text, v.k::jsonb)`,
      [alias, values],
    );
  }

  /** Whether any record holds a value of the field. */
  async anyHolds(alias: string, tx?: Tx, object: FieldObject = 'contact'): Promise<boolean> {
    const rows: unknown[] = await this.db(tx).query(`SELECT 1 FROM ${VALUE_TABLES[object]} WHERE fields ? $1::text LIMIT 1`, [alias]);
    return rows.length > 0;
  }

  /** A value of the field that two or more records share, if any (`undefined` when none). */
  async sharedValue(alias: string, tx?: Tx, object: FieldObject = 'contact'): Promise<unknown> {
    const rows: { value: unknown }[] = await this.db(tx).query(
      `SELECT fields -> $1::text AS value FROM ${VALUE_TABLES[object]} WHERE fields ? $1::text GROUP BY fields -> $1::text HAVING count(*) > 1 LIMIT 1`,
      [alias],
    );
    return rows.length ? rows[0].value : undefined;
  }

  /** Renames the field's key in every record that holds a value (one statement; jsonb edited in SQL). */
  async renameKey(from: string, to: string, tx?: Tx, object: FieldObject = 'contact'): Promise<void> {
    await this.db(tx).query(
      `UPDATE ${VALUE_TABLES[object]} SET fields = (fields - $1::text) || jsonb_build_object($2::text, fields -> $1::text), modified_at = now() WHERE fields ? $1::text`,
      [from, to],
    );
  }

  /** Removes the field's key from every record that holds a value. */
  async removeKey(alias: string, tx?: Tx, object: FieldObject = 'contact'): Promise<void> {
    await this.db(tx).query(`UPDATE ${VALUE_TABLES[object]} SET fields = fields - $1::text, modified_at = now() WHERE fields ? $1::text`, [alias]);
  }
}
