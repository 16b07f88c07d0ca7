import { Injectable } from '@nestjs/common';
import { Transactions } from '../database/transactions.js';

/** The system routes' only database access: the health check's round trip. */
@Injectable()
export class SystemRepository {
  constructor(private readonly transactions: Transactions) {}

  /** One round trip to the database; rejects when it is unreachable. */
  async ping(): Promise<void> {
    await this.transactions.db.query('SELECT 1');
  }
}
