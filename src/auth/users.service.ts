import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import type { Plan } from '../config/config.js';
import { User } from './user.entity.js';

@Injectable()
export class UsersService {
  constructor(@InjectRepository(User) private readonly users: Repository<User>) {}

  findById(id: number): Promise<User | null> {
    return this.users.findOne({ where: { id } });
  }

  findByEmail(email: string): Promise<User | null> {
    return this.users.createQueryBuilder('u').where('lower(u.email) = lower(:email)', { email }).getOne();
  }

  list(): Promise<User[]> {
    return this.users.find({ order: { id: 'ASC' } });
  }

  async create(input: { name: string; email: string; plan?: Plan; team?: string | null }): Promise<User> {
    const user = this.users.create({ name: input.name, email: input.email, plan: input.plan ?? 'basic', team: input.team ?? null });
    return this.users.save(user);
  }

  async update(user: User, changes: { plan?: Plan; team?: string | null; name?: string }): Promise<User> {
    Object.assign(user, changes, { modifiedAt: new Date() });
    return this.users.save(user);
  }
}
