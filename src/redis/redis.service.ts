import { Inject, Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import { Redis, type RedisOptions } from 'ioredis';
import { APP_CONFIG, type AppConfig } from '../config/config.js';

/**
 * The instance's Redis connections, or none when REDIS_URL is unset. Commands fail fast while
 * Redis is unreachable (no offline queue), so callers can degrade instead of hanging; the client
 * reconnects by itself.
 */
@Injectable()
export class RedisService implements OnApplicationShutdown {
  private readonly logger = new Logger('Redis');
  readonly client: Redis | null;
  private subscriber: Redis | null = null;
  private readonly handlers = new Map<string, Set<(message: string) => void>>();

  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {
    this.client = config.redisUrl ? this.connect('commands') : null;
  }

  get enabled(): boolean {
    return this.client !== null;
  }

  /** True while the command connection is up. */
  get ready(): boolean {
    return this.client?.status === 'ready';
  }

  /** A key in this deployment's namespace. */
  key(...parts: (string | number)[]): string {
    return [this.config.redisPrefix, ...parts].join(':');
  }

  /** Options for connections other components open themselves (BullMQ wants maxRetriesPerRequest null). */
  connectionOptions(extra: RedisOptions = {}): RedisOptions {
    if (!this.config.redisUrl) throw new Error('Redis connection options asked for without REDIS_URL');
    const url = new URL(this.config.redisUrl);
    return {
      host: url.hostname,
      port: Number(url.port || 6379),
      username: url.username ? decodeURIComponent(url.username) : undefined,
      password: url.password ? decodeURIComponent(url.password) : undefined,
      db: url.pathname.length > 1 ? Number(url.pathname.slice(1)) : 0,
      tls: url.protocol === 'rediss:' ? {} : undefined,
      retryStrategy: (times) => Math.min(times * 200, 2000),
      ...extra,
    };
  }

  private connect(name: string): Redis {
    const client = new Redis(
      this.connectionOptions({
        connectionName: `${this.config.redisPrefix}-${name}`,
        enableOfflineQueue: false,
        maxRetriesPerRequest: 1,
        connectTimeout: 2000,
      }),
    );
    let down = false;
    client.on('error', (err) => {
      if (!down) this.logger.warn({ msg: `redis ${name} connection error`, err: err.message });
      down = true;
    });
    client.on('ready', () => {
      if (down) this.logger.log(`redis ${name} connection restored`);
      down = false;
    });
    return client;
  }

  async publish(channel: string, message: string): Promise<void> {
    if (!this.client) return;
    await this.client.publish(this.key('ch', channel), message);
  }

  /** Subscribes to a channel of this deployment; handlers survive reconnects. */
  subscribe(channel: string, handler: (message: string) => void): void {
    if (!this.config.redisUrl) return;
    const full = this.key('ch', channel);
    if (!this.subscriber) {
      this.subscriber = new Redis(this.connectionOptions({ connectionName: `${this.config.redisPrefix}-sub`, maxRetriesPerRequest: null }));
      this.subscriber.on('error', () => undefined);
      this.subscriber.on('message', (ch: string, msg: string) => this.handlers.get(ch)?.forEach((h) => h(msg)));
    }
    let handlers = this.handlers.get(full);
    if (!handlers) {
      handlers = new Set();
      this.handlers.set(full, handlers);
      void this.subscriber
        .subscribe(full)
        .catch((e: unknown) => this.logger.warn({ msg: 'subscribe failed', channel, err: e instanceof Error ? e.message : String(e) }));
    }
    handlers.add(handler);
  }

  async onApplicationShutdown(): Promise<void> {
    // quit() on a connection that is not up waits (offline queue) for Redis to come back: disconnect instead.
    await Promise.all(
      [this.client, this.subscriber]
        .filter((c): c is Redis => !!c)
        .map(async (c) => {
          if (c.status === 'ready') await c.quit().catch(() => c.disconnect());
          else c.disconnect();
        }),
    );
  }
}
