import { Injectable } from '@nestjs/common';
import { type Db, Transactions, type Tx } from '../database/transactions.js';
import { UNIQUE_VALUE_LOCK } from './field-rules.js';

/**
 * The queries on contacts' custom values (the `contacts.fields` jsonb column), which the fields
 * feature owns: checking unique-identifier values, and renaming or removing a field's key in every
 * contact when the field changes. Nothing here reads or writes another column of `contacts`
 * (ContactsRepository does).
 */
@Injectable()
export class ContactFieldValuesRepository {
  constructor(private readonly transactions: Transactions) {}

  private db(tx?: Tx): Db {
    return tx ?? this.transactions.db;
  }

  /** Takes the per-field advisory lock of "values of this field are unique", held until `tx` ends. */
  async lockUniqueValues(alias: string, tx: Tx): Promise<void> {
    await tx.query(`SELECT ${UNIQUE_VALUE_LOCK}`, [alias]);
  }

  /** Id of a contact other than `exceptId` holding `value` (JSON text) in the field, or null. */
  async holderOf(alias: string, value: string, exceptId: number | null, tx?: Tx): Promise<number | null> {
    const rows: { id: number }[] = await this.db(tx).query(
      `SELECT id FROM contacts WHERE fields @> jsonb_build_object($1::text, $2::jsonb) AND fields -> $1::text = $2::jsonb AND id <> $3 LIMIT 1`,
      [alias, value, exceptId ?? 0],
    );
    return rows[0]?.id ?? null;
  }

  /** Whether any contact holds a value of the field. */
  async anyHolds(alias: string, tx?: Tx): Promise<boolean> {
    const rows: unknown[] = await this.db(tx).query(`SELECT 1 FROM contacts WHERE fields ? $1::text LIMIT 1`, [alias]);
    return rows.length > 0;
  }

  /** A value of the field that two or more contacts share, if any (`undefined` when none). */
  async sharedValue(alias: string, tx?: Tx): Promise<unknown> {
    const rows: { value: unknown }[] = await this.db(tx).query(
      `SELECT fields -> $1::text AS value FROM contacts WHERE fields ? $1::text GROUP BY fields -> $1::text HAVING count(*) > 1 LIMIT 1`,
      [alias],
    );
    return rows.length ? rows[0].value : undefined;
  }

  /** Renames the field's key in every contact that holds a value (one statement; jsonb edited in SQL). */
  async renameKey(from: string, to: string, tx?: Tx): Promise<void> {
    await this.db(tx).query(
      `UPDATE contacts SET fields = (fields - $1::text) || jsonb_build_object($2::text, fields -> $1::text), modified_at = now() WHERE fields ? $1::text`,
      [from, to],
    );
  }

  /** Removes the field's key from every contact that holds a value. */
  async removeKey(alias: string, tx?: Tx): Promise<void> {
    await this.db(tx).query(`UPDATE contacts SET fields = fields - $1::text, modified_at = now() WHERE fields ? $1::text`, [alias]);
  }
}
