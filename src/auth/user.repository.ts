import { Injectable } from '@nestjs/common';
import type { Repository } from 'typeorm';
import type { Plan } from '../config/config.js';
import { type Db, type Tx, Transactions } from '../database/transactions.js';
import { User } from './user.entity.js';

/** Every query of the users table. Exported by AuthModule for features that show users' names. */
@Injectable()
export class UsersRepository {
  constructor(private readonly transactions: Transactions) {}

  private db(tx?: Tx): Db {
    return tx ?? this.transactions.db;
  }

  private repo(): Repository<User> {
    return this.transactions.manager().getRepository(User);
  }

  findById(id: number): Promise<User | null> {
    return this.repo().findOne({ where: { id } });
  }

  /** Case-insensitive, as the users_email_lower_uq index compares. */
  findByEmail(email: string): Promise<User | null> {
    return this.repo().createQueryBuilder('u').where('lower(u.email) = lower(:email)', { email }).getOne();
  }

  list(): Promise<User[]> {
    return this.repo().find({ order: { id: 'ASC' } });
  }

  /** Whether a user exists (for references checked before a write that has no foreign key). */
  async exists(id: number, tx?: Tx): Promise<boolean> {
    const rows: unknown[] = await this.db(tx).query(`SELECT 1 FROM users WHERE id = $1`, [id]);
    return rows.length > 0;
  }

  /** Display names of users by id (ids that name no user are absent from the map). */
  async namesByIds(ids: readonly number[], tx?: Tx): Promise<Map<number, string>> {
    const unique = [...new Set(ids)];
    if (unique.length === 0) return new Map();
    const rows: { id: number; name: string }[] = await this.db(tx).query(`SELECT id, name FROM users WHERE id = ANY($1)`, [unique]);
    return new Map(rows.map((r) => [r.id, r.name]));
  }

  /** Inserts a user; a taken email (any case) is a 409 through the constraint registry (users_email_lower_uq). */
  async insert(input: { name: string; email: string; plan: Plan; team: string | null }, tx?: Tx): Promise<User> {
    const repo = this.transactions.manager(tx).getRepository(User);
    return repo.save(repo.create(input));
  }

  /** Changes only the given columns. Null when the user does not exist. */
  async update(id: number, changes: { plan?: Plan; team?: string | null; name?: string }, tx?: Tx): Promise<User | null> {
    const repo = this.transactions.manager(tx).getRepository(User);
    await repo.update({ id }, { ...changes, modifiedAt: new Date() });
    return repo.findOne({ where: { id } });
  }
}
