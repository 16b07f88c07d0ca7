/**
 * A local fake SMS gateway for the e2e suites (node:http on 127.0.0.1): records every request and
 * answers by a per-recipient script (status codes, or "hold" until released). It honours
 * Idempotency-Key as the HTTP provider contract requires: a request whose key it already took (answered
 * 2xx, or held) is answered 200 with the same id and is not a new message (`messages`).
 */
import { createHmac } from 'node:crypto';
import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';

export interface GatewayRequest {
  at: number;
  headers: IncomingMessage['headers'];
  body: { to: string; body: string; reference: string; callbackUrl: string };
}

type Step = number | 'hold';

export class FakeGateway {
  readonly requests: GatewayRequest[] = [];
  /** The messages the gateway took: the first request of each Idempotency-Key it accepted. */
  readonly messages = new Map<string, GatewayRequest>();
  private server: Server | null = null;
  private scripts = new Map<string, Step[]>();
  private held: { res: ServerResponse; reference: string }[] = [];
  url = '';
  /** How long every 2xx answer waits (a slow gateway). */
  delayMs = 0;

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        let body: GatewayRequest['body'];
        try {
          body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        } catch {
          res.writeHead(400).end();
          return;
        }
        const request = { at: Date.now(), headers: req.headers, body };
        this.requests.push(request);
        const key = req.headers['idempotency-key'];
        if (typeof key === 'string' && this.messages.has(key)) {
          this.answer(res, 200, this.messages.get(key)!.body.reference);
          return;
        }
        const script = this.scripts.get(body.to);
        const step: Step = script?.length ? script.shift()! : 200;
        if (typeof key === 'string' && (step === 'hold' || step < 300)) this.messages.set(key, request);
        if (step === 'hold') {
          this.held.push({ res, reference: body.reference });
          return;
        }
        if (this.delayMs > 0 && step < 300) setTimeout(() => this.answer(res, step, body.reference), this.delayMs);
        else this.answer(res, step, body.reference);
      });
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', () => r()));
    this.url = `http://127.0.0.1:${(this.server.address() as { port: number }).port}/messages`;
    return this;
  }

  private answer(res: ServerResponse, status: number, reference: string) {
    if (res.destroyed) return;
    res.writeHead(status, { 'Content-Type': 'application/json', ...(status === 429 ? { 'Retry-After': '1' } : {}) });
    res.end(status < 300 ? JSON.stringify({ id: `gw-${reference}` }) : JSON.stringify({ error: `status ${status}` }));
  }

  /** Answers the next requests for this recipient with these steps (then 200). */
  script(recipient: string, steps: Step[]) {
    this.scripts.set(recipient, [...steps]);
  }

  /** Answers every held request with 200. */
  release() {
    for (const h of this.held.splice(0)) this.answer(h.res, 200, h.reference);
  }

  requestsTo(recipient: string) {
    return this.requests.filter((r) => r.body.to === recipient);
  }

  /** The messages the gateway took for this recipient (one per Idempotency-Key). */
  messagesTo(recipient: string) {
    return [...this.messages.values()].filter((r) => r.body.to === recipient);
  }

  /** Requests held unanswered right now. */
  get heldCount() {
    return this.held.length;
  }

  async stop() {
    for (const h of this.held.splice(0)) h.res.destroy();
    this.server?.closeAllConnections();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }
}

/**
 * The X-Signature of a delivery report or inbound message, computed independently of the app's code:
 * `t=<unix seconds>,sha256=<hex HMAC-SHA256 of "<t>.<raw body>">`, signed at `atMs` (now by default).
 */
export function sign(secret: string, raw: string, atMs = Date.now()): string {
  const t = Math.floor(atMs / 1000);
  return `t=${t},sha256=${createHmac('sha256', secret).update(`${t}.${raw}`).digest('hex')}`;
}
