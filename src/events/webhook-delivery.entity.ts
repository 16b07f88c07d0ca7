import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';

/**
 * The table `webhook_deliveries`, as far as the deliveries list's query builder needs it (the
 * list's filters, ordering and counting run on it, see paginate): its key and its webhook. Every
 * other read and write of a delivery is SQL in WebhookDeliveriesRepository.
 */
@Entity('webhook_deliveries')
export class WebhookDelivery {
  /** bigserial: read as a number (ids stay far below 2^53). */
  @PrimaryGeneratedColumn({ type: 'bigint' })
  id: number;

  @Column({ name: 'webhook_id', type: 'integer' })
  webhookId: number;
}
