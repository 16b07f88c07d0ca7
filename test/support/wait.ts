/** Waiting helpers the end-to-end and fault suites share. */

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * The one polling helper of the suites and specs: polls `probe` every `everyMs` until it answers a
 * truthy value (returned), or fails naming `what` after `timeoutMs`.
 */
export async function waitUntil<T>(what: string, probe: () => Promise<T | null | undefined | false>, timeoutMs: number, everyMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(everyMs);
  }
}
