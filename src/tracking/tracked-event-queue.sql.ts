/**
 * The rows TrackedEventQueue.enqueue writes (tracked-event-queue.repository.ts), as one INSERT over a relation `events` of
 * attributed track events (columns `id`, `occurred_at`, `name`), queued at `now` (an SQL
 * expression): for a statement that stores the events and queues them at once (the intake's
 * one-statement path, tracking.repository.ts). One consumer row per event and interested consumer,
 * in the events' id order.
 */
export function enqueueSql(events: string, now: string): string {
  return `INSERT INTO tracked_event_queue (consumer, event_id, occurred_at, queued_at)
    SELECT i.consumer, q.id, q.occurred_at, ${now} FROM ${events} q JOIN tracked_event_interest i ON i.name = q.name OR i.name = '*'
     ORDER BY q.id, i.consumer`;
}
