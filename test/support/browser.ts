/**
 * Chromium for the console's browser suites (playwright-core, Debian's /usr/bin/chromium or
 * CHROMIUM_PATH): a signed-in page, and `record(name)` that photographs the page at 1280 and 375 px
 * into test-artifacts/screenshots/, notes horizontal overflow at 375 px, and runs axe-core in the page
 * (serious and critical violations kept for the suite's final check).
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { ROOT } from './app.js';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const SHOTS = join(ROOT, 'test-artifacts', 'screenshots');

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: unknown }[];
}

/** axe-core's browser bundle, or null when the package is not installed. */
function axeSource(): string | null {
  try {
    return readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
  } catch {
    return null;
  }
}

/** What a page's recorder keeps: pages wider than 375 px, and each recorded page's serious and critical axe-core violations. */
export interface PageRecorder {
  /** Screenshots at both widths, the overflow check and axe-core, of the page as it is now. */
  record(name: string): Promise<void>;
  overflow: string[];
  accessibility: { page: string; violations: AxeViolation[] }[];
  /** Whether axe-core is installed. */
  axe: boolean;
}

/** A recorder for `page`: screenshots named `<prefix>-<name>-<width>.png`. */
export function pageRecorder(page: Page, prefix: string): PageRecorder {
  mkdirSync(SHOTS, { recursive: true });
  const axe = axeSource();
  const r: PageRecorder = {
    overflow: [],
    accessibility: [],
    axe: axe !== null,
    async record(name) {
      await page.setViewportSize({ width: 1280, height: 800 });
      await page.screenshot({ path: join(SHOTS, `${prefix}-${name}-1280.png`), fullPage: true });
      await page.setViewportSize({ width: 375, height: 800 });
      const widths = await page.evaluate(() => {
        const d = (globalThis as unknown as { document: { documentElement: { scrollWidth: number; clientWidth: number } } }).document;
        return { scroll: d.documentElement.scrollWidth, client: d.documentElement.clientWidth };
      });
      if (widths.scroll > widths.client + 1) r.overflow.push(`${name}: ${widths.scroll} px wide at 375`);
      await page.screenshot({ path: join(SHOTS, `${prefix}-${name}-375.png`), fullPage: true });
      await page.setViewportSize({ width: 1280, height: 800 });
      if (axe) {
        // Evaluated through the DevTools protocol, which the page's CSP does not govern (the page itself runs no inline script).
        await page.evaluate(axe);
        const violations = await page.evaluate(async () => {
          const axeApi = (globalThis as unknown as { axe: { run(o: object): Promise<{ violations: AxeViolation[] }> } }).axe;
          const result = await axeApi.run({ resultTypes: ['violations'] });
          return result.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => ({ target: n.target })) }));
        });
        r.accessibility.push({ page: name, violations: violations.filter((v) => v.impact === 'serious' || v.impact === 'critical') });
      }
    },
  };
  return r;
}

/** A headless Chromium with a profile of its own (removed by `close`), at 1280 × 800. */
export async function launchChromium(): Promise<{ context: BrowserContext; close: () => Promise<void> }> {
  if (!existsSync(CHROMIUM)) throw new Error(`Chromium not found at ${CHROMIUM}: install it (apt-get install chromium) or set CHROMIUM_PATH`);
  const profile = mkdtempSync(join(tmpdir(), 'sf-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    viewport: { width: 1280, height: 800 },
    acceptDownloads: true,
  });
  return {
    context,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

export interface ConsoleBrowser extends PageRecorder {
  context: BrowserContext;
  page: Page;
  /** Console messages about a blocked script or style (the CSP). */
  cspViolations: string[];
  close(): Promise<void>;
}

/** Launches Chromium and signs in at `baseUrl` with the given account. `prefix` names the screenshots. */
export async function openConsole(baseUrl: string, email: string, password: string, prefix: string): Promise<ConsoleBrowser> {
  const chromiumWindow = await launchChromium();
  const { context } = chromiumWindow;
  const page = context.pages()[0] ?? (await context.newPage());
  const b: ConsoleBrowser = Object.assign(pageRecorder(page, prefix), {
    context,
    page,
    cspViolations: [] as string[],
    close: () => chromiumWindow.close(),
  });
  page.on('console', (m) => {
    if (/Content[ -]Security[ -]Policy/i.test(m.text())) b.cspViolations.push(m.text());
  });
  await page.goto(`${baseUrl}/account/login`);
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForLoadState();
  return b;
}
