import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * A tracked event (a track or identify call): the TypeORM view of the partitioned table, for the
 * list helper's query builder. The intake writes rows with SQL of its own (tracking.repository.ts).
 * The table's key is (occurred_at, id) as partitioning requires; id alone is unique too.
 */
@Entity('tracked_events')
export class TrackedEvent {
  @PrimaryColumn({ type: 'bigint' })
  id: string;

  @Column({ name: 'occurred_at', type: 'timestamptz' })
  occurredAt: Date;

  @Column({ name: 'received_at', type: 'timestamptz' })
  receivedAt: Date;

  @Column({ type: 'text' })
  type: 'track' | 'identify';

  @Column({ type: 'text', nullable: true })
  name: string | null;

  @Column({ name: 'contact_id', type: 'int', nullable: true })
  contactId: number | null;

  @Column({ name: 'user_id', type: 'text', nullable: true })
  userId: string | null;

  @Column({ name: 'anonymous_id', type: 'text', nullable: true })
  anonymousId: string | null;

  @Column({ name: 'message_id', type: 'text' })
  messageId: string;

  @Column({ type: 'jsonb' })
  properties: Record<string, unknown>;

  @Column({ type: 'jsonb', nullable: true })
  context: Record<string, unknown> | null;

  @Column({ type: 'jsonb', nullable: true })
  flags: Record<string, unknown> | null;
}
