/**
 * Boots the API, the queue workers, or both (APP_ROLE=api|worker|all).
 * Without DATABASE_URL it first starts the embedded PostgreSQL under DATA_DIR.
 */
import 'reflect-metadata';
import { type INestApplicationContext, Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import type { Server } from 'node:http';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { AppModule } from './app.module.js';
import { type AppConfig, ConfigError, loadConfig } from './config/config.js';
import { AppLogger } from './server/logger.js';
import { type EmbeddedPostgres, startEmbeddedPostgres } from './database/embedded.js';
import { runMigrations } from './database/migrate.js';
import { configureHttp, configureServerTimeouts } from './server/http.js';
import { AppExpressAdapter } from './server/express-adapter.js';
import { MetricsMiddleware } from './metrics/metrics.middleware.js';
import { MetricsService } from './metrics/metrics.service.js';

async function main(): Promise<void> {
  let config: AppConfig;
  try {
    config = loadConfig();
  } catch (e) {
    if (e instanceof ConfigError) {
      process.stderr.write(`${e.message}\n`);
      process.exit(78);
    }
    throw e;
  }
  const appLogger = new AppLogger(config.logLevel, config.logFormat);
  Logger.overrideLogger(appLogger);
  const log = new Logger('Boot');

  let embedded: EmbeddedPostgres | null = null;
  let url = config.databaseUrl;
  if (!url) {
    embedded = await startEmbeddedPostgres(join(config.dataDir, 'postgres'), { log: (m) => log.log(m) });
    url = embedded.url;
  }
  if (config.runMigrations) await runMigrations(url, (m) => log.log(m));

  const module = AppModule.forRoot(config, url);
  let app: INestApplicationContext;
  let server: Server | null = null;
  let inFlight = 0;
  let lastRequestAt = 0;
  let draining = false;

  if (config.role === 'worker') {
    app = await NestFactory.createApplicationContext(module, { logger: appLogger });
    await app.init();
    log.log(`worker started (queues: ${config.redisUrl ? 'BullMQ on Redis' : 'in-process'})`);
    // A worker has no HTTP server; its container health check reads this file's age.
    const heartbeat = process.env.HEARTBEAT_FILE;
    if (heartbeat) {
      const beat = () => writeFileSync(heartbeat, String(Date.now()));
      beat();
      setInterval(beat, 10_000).unref();
    }
  } else {
    const http = await NestFactory.create<NestExpressApplication>(module, new AppExpressAdapter(), {
      logger: appLogger,
      bodyParser: false,
      rawBody: true,
    });
    configureHttp(http, config, new MetricsMiddleware(http.get(MetricsService)));
    configureServerTimeouts(http.getHttpServer(), config);
    await http.listen(config.port, config.host);
    server = http.getHttpServer();
    answerClientErrors(server);
    // Count in-flight requests at the HTTP server itself, so shutdown can wait for every one of them;
    // while draining, ask keep-alive clients to reconnect (to another instance) after this response.
    // One listener function for every response ('close' is emitted once per response): nothing allocated per request for it.
    const responseClosed = () => {
      inFlight--;
    };
    server.on('request', (_req, res) => {
      inFlight++;
      lastRequestAt = Date.now();
      if (draining) res.setHeader('Connection', 'close');
      res.on('close', responseClosed);
    });
    app = http;
    log.log(`API listening on ${config.host}:${config.port} (role ${config.role}, base URL ${config.baseUrl})`);
  }

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    draining = true;
    log.log(`${signal} received: draining`);
    const deadline = Date.now() + config.shutdownGraceMs;
    if (server) {
      // Stop accepting connections. Connections already accepted may still be sending their
      // request: wait until nothing is in flight and no request has arrived for a moment, and
      // only then close the connections left: idle keep-alive ones (which would otherwise stay open
      // for HTTP_KEEP_ALIVE_TIMEOUT_MS and hold up the exit) and, once the grace is over, any still busy.
      server.close();
      const QUIET_MS = 300;
      while (Date.now() < deadline && (inFlight > 0 || Date.now() - lastRequestAt < QUIET_MS)) {
        await new Promise((r) => setTimeout(r, 25));
      }
      if (inFlight > 0) log.warn(`shutdown grace over with ${inFlight} request(s) in flight`);
      server.closeAllConnections();
    }
    try {
      await app.close();
    } catch (e) {
      log.error({ msg: 'error during shutdown', err: (e as Error).message });
    }
    if (embedded) await embedded.stop();
    log.log('stopped');
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
}

/**
 * Requests Node's HTTP parser refuses before Express sees them (headers over the size limit,
 * malformed request lines) still get an answer in the error shape instead of a bare close.
 */
function answerClientErrors(server: Server): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const tooLarge = err.code === 'HPE_HEADER_OVERFLOW';
    const status = tooLarge ? 431 : 400;
    const body = JSON.stringify({
      error: tooLarge
        ? { code: 'payload_too_large', message: 'Request headers are larger than the server accepts', status }
        : { code: 'validation_failed', message: 'Malformed HTTP request', status },
    });
    socket.end(
      `HTTP/1.1 ${status} ${tooLarge ? 'Request Header Fields Too Large' : 'Bad Request'}\r\n` +
        `Content-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  });
}

main().catch((e: unknown) => {
  const err = e instanceof Error ? e : new Error(String(e));
  process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), level: 'error', msg: 'failed to start', err: err.message, stack: err.stack })}\n`);
  process.exit(1);
});
