/** Small HTTP helpers for the account console suites: a cookie jar and the sign-in form. */
import { spawn } from 'node:child_process';
import type { TestApp } from './app.js';
import { ROOT } from './app.js';

export class Jar {
  readonly cookies = new Map<string, string>();
  header(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }
  take(res: Response): void {
    for (const line of res.headers.getSetCookie()) {
      const [pair, ...attrs] = line.split(';');
      const i = pair.indexOf('=');
      const name = pair.slice(0, i).trim();
      const value = pair.slice(i + 1).trim();
      if (attrs.some((a) => /^\s*max-age=0\s*$/i.test(a)) || value === '') this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
  }
}

export interface Page {
  status: number;
  location: string | null;
  html: string;
  res: Response;
}

/** A browser-like request: Accept: text/html, the jar's cookies, redirects not followed. */
export async function browse(app: TestApp, jar: Jar, path: string, form?: Record<string, string | string[]>, headers: Record<string, string> = {}): Promise<Page> {
  const pairs: [string, string][] = form ? Object.entries(form).flatMap(([k, v]) => (Array.isArray(v) ? v : [v]).map((x): [string, string] => [k, x])) : [];
  const body = form ? new URLSearchParams(pairs) : undefined;
  const res = await fetch(app.url + path, {
    method: form ? 'POST' : 'GET',
    redirect: 'manual',
    headers: { Accept: 'text/html', ...(jar.cookies.size ? { Cookie: jar.header() } : {}), ...(body ? { 'Content-Type': 'application/x-www-form-urlencoded' } : {}), ...headers },
    body,
  });
  jar.take(res);
  return { status: res.status, location: res.headers.get('location'), html: await res.text(), res };
}

export const csrfOf = (html: string): string => /name="_csrf" value="([^"]*)"/.exec(html)?.[1] ?? '';
export const alertOf = (html: string): string | null => /class="alert alert-[a-z]+" role="(?:alert|status)">([^<]*)</.exec(html)?.[1] ?? null;

/** Opens the sign-in form and posts it. */
export async function signIn(app: TestApp, jar: Jar, email: string, password: string): Promise<Page> {
  const form = await browse(app, jar, '/account/login');
  return browse(app, jar, '/account/login', { _csrf: csrfOf(form.html), email, password });
}

/** Runs `cli user:password` with the password on stdin. */
export function setPassword(app: TestApp, email: string, password: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, ['dist/cli.js', 'user:password', '--email', email], { cwd: ROOT, env: app.env });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    p.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    p.on('close', (code) => resolve({ code, stdout, stderr }));
    p.stdin.end(password + '\n');
  });
}
