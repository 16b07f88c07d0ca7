import type { Response } from 'express';

/**
 * The contract between the HTTP server and the Idempotency-Key's recorded answers, declared here
 * (the server floor sits above idempotency and reads it; idempotency never imports the server): whoever attaches a recorder is handed the first answer sent
 * through res.send (the route's, through the HTTP adapter, or the exception filter's) before it is
 * sent; the HTTP adapter, which otherwise writes JSON with res.end, sends through res.send when
 * hasAnswerRecorder() says so.
 */
export interface AnswerRecorder {
  /** The first answer's body (null without one), with status and headers already on `res`; call send() once it is kept. */
  record(res: Response, body: Buffer | null, send: () => void): void;
  /** The response finished without an answer through res.send (a stream): there is nothing to keep. */
  abandon(): void;
}

const recorded = new WeakSet<Response>();

/** Hands the first answer `res` sends to `recorder` before it goes out. */
export function attachAnswerRecorder(res: Response, recorder: AnswerRecorder): void {
  const original = res.send.bind(res);
  let seen = false;
  recorded.add(res);
  res.send = ((body?: unknown): Response => {
    if (seen) return original(body);
    // res.send(object) is res.json, which stringifies and comes back here with the text.
    if (body !== null && typeof body === 'object' && !Buffer.isBuffer(body)) return res.json(body);
    seen = true;
    res.send = original;
    const bytes = body === undefined || body === null ? null : Buffer.isBuffer(body) ? body : Buffer.from(String(body as string | number | boolean));
    recorder.record(res, bytes, () => original(body));
    return res;
  }) as Response['send'];
  res.once('finish', () => {
    if (!seen) recorder.abandon();
  });
}

/** Whether a recorder waits for this response's answer (then it must be sent through res.send). */
export function hasAnswerRecorder(res: Response): boolean {
  return recorded.has(res);
}

/** An answer to send as it is (status, headers, body), thrown by a check that already knows it (a replayed answer). */
export class ReadyAnswer extends Error {
  constructor(
    readonly status: number,
    readonly headers: Record<string, string>,
    readonly body: Buffer | null,
  ) {
    super(`a ready ${status} answer`);
  }
}
