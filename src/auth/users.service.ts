import { Injectable } from '@nestjs/common';
import type { Plan } from '../config/config.js';
import type { User } from './user.entity.js';

/** A user as other features see it (the entity stays private to auth). */
export type UserAccount = User;
import { UsersRepository } from './user.repository.js';

/** Users: the accounts behind API tokens (created with the CLI). */
@Injectable()
export class UsersService {
  constructor(private readonly users: UsersRepository) {}

  findById(id: number): Promise<User | null> {
    return this.users.findById(id);
  }

  findByEmail(email: string): Promise<User | null> {
    return this.users.findByEmail(email);
  }

  list(): Promise<User[]> {
    return this.users.list();
  }

  /** A taken email (compared case-insensitively) fails on users_email_lower_uq (409 through the constraint registry). */
  create(input: { name: string; email: string; plan?: Plan; team?: string | null }): Promise<User> {
    return this.users.insert({ name: input.name, email: input.email, plan: input.plan ?? 'basic', team: input.team ?? null });
  }

  async update(user: User, changes: { plan?: Plan; team?: string | null; name?: string }): Promise<User> {
    return (await this.users.update(user.id, changes)) ?? user;
  }
}
