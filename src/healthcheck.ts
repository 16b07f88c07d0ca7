/**
 * Container health check (Dockerfile, docker-compose.yml). An API process is healthy when
 * GET /health answers 200; a worker process (no HTTP server) when it refreshed HEARTBEAT_FILE
 * within the last 30 seconds.
 */
import { statSync } from 'node:fs';

const role = process.env.APP_ROLE ?? 'all';
const heartbeat = process.env.HEARTBEAT_FILE;

async function check(): Promise<boolean> {
  if (role === 'worker') {
    if (!heartbeat) return true;
    try {
      return Date.now() - statSync(heartbeat).mtimeMs < 30_000;
    } catch {
      return false;
    }
  }
  const port = process.env.PORT ?? '3000';
  try {
    const res = await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(4000) });
    return res.status === 200;
  } catch {
    return false;
  }
}

void check().then((ok) => process.exit(ok ? 0 : 1));
