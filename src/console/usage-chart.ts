/**
 * The usage page's chart: requests per hour as bars (refused ones, 429, stacked in red on top of
 * the accepted ones) against the plan's hourly limit, drawn on the server as SVG. Pure functions,
 * unit-tested in usage-chart.spec.ts.
 */
import { esc } from './console.views.js';

const HOUR_MS = 3_600_000;

export interface HourCount {
  tokenId: number;
  hour: Date;
  requests: number;
  limited: number;
}

export interface UsageSeries {
  /** The start of the first hour, in ms. */
  fromMs: number;
  requests: number[];
  limited: number[];
}

/** One value per hour from `fromMs` for `hours` hours, of one token (or of every token when `tokenId` is null). */
export function hourlySeries(rows: readonly HourCount[], fromMs: number, hours: number, tokenId: number | null): UsageSeries {
  const requests = new Array<number>(hours).fill(0);
  const limited = new Array<number>(hours).fill(0);
  for (const r of rows) {
    if (tokenId !== null && r.tokenId !== tokenId) continue;
    const i = Math.floor((r.hour.getTime() - fromMs) / HOUR_MS);
    if (i < 0 || i >= hours) continue;
    requests[i] += r.requests;
    limited[i] += r.limited;
  }
  return { fromMs, requests, limited };
}

export const sum = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0);

/**
 * The vertical scale: the limit when the busiest hour comes within a quarter of it (the limit line
 * is drawn), else a scale fitted to the busiest hour so that small counts stay visible (the limit
 * is then written above the chart instead of drawn).
 */
export function scaleMax(peak: number, limitPerHour: number): { max: number; limitShown: boolean } {
  if (limitPerHour > 0 && peak * 4 >= limitPerHour) return { max: Math.max(peak, limitPerHour) * 1.1, limitShown: true };
  const want = Math.max(peak, 4) * 1.15;
  let m = 1;
  for (;;) {
    const step = [1, 2, 5].map((x) => x * m).find((x) => x >= want);
    if (step !== undefined) return { max: step, limitShown: false };
    m *= 10;
  }
}

const fmt = (n: number) => n.toLocaleString('en-US');
const hourLabel = (ms: number) => new Date(ms).toISOString().slice(11, 16);
const dayLabel = (ms: number) => new Date(ms).toISOString().slice(5, 10);

/** The chart as an SVG element (role img, titled and described); `id` makes its title and description ids unique. */
export function usageChartSvg(id: string, title: string, series: UsageSeries, limitPerHour: number): string {
  const W = 720;
  const H = 220;
  const left = 48;
  const right = 8;
  const top = 16;
  const bottom = 28;
  const n = series.requests.length;
  const plotW = W - left - right;
  const plotH = H - top - bottom;
  const peak = Math.max(0, ...series.requests);
  const { max, limitShown } = scaleMax(peak, limitPerHour);
  const y = (v: number) => top + plotH - (v / max) * plotH;
  const bw = plotW / n;
  const bars: string[] = [];
  for (let i = 0; i < n; i++) {
    const total = series.requests[i];
    if (!total) continue;
    const refused = series.limited[i];
    const x = (left + i * bw + bw * 0.1).toFixed(1);
    const w = Math.max(1, bw * 0.8).toFixed(1);
    const at = new Date(series.fromMs + i * HOUR_MS).toISOString();
    const label = `${at.slice(0, 16).replace('T', ' ')} UTC: ${fmt(total)} requests${refused ? `, ${fmt(refused)} refused (429)` : ''}`;
    const okTop = y(total - refused);
    bars.push(
      `<g class="bar" data-hour="${at}" data-requests="${total}" data-limited="${refused}"><title>${esc(label)}</title>` +
        `<rect class="bar-ok" x="${x}" y="${okTop.toFixed(1)}" width="${w}" height="${(top + plotH - okTop).toFixed(1)}"></rect>` +
        (refused ? `<rect class="bar-limited" x="${x}" y="${y(total).toFixed(1)}" width="${w}" height="${(okTop - y(total)).toFixed(1)}"></rect>` : '') +
        `</g>`,
    );
  }
  const ticks: string[] = [];
  const every = n <= 24 ? 6 : 24;
  for (let i = 0; i <= n; i += every) {
    const ms = series.fromMs + i * HOUR_MS;
    const x = (left + i * bw).toFixed(1);
    ticks.push(`<line class="grid" x1="${x}" x2="${x}" y1="${top}" y2="${top + plotH}"></line>`);
    if (i < n) ticks.push(`<text class="tick" x="${x}" y="${H - 8}">${n <= 24 ? hourLabel(ms) : dayLabel(ms)}</text>`);
  }
  const limitY = y(limitPerHour).toFixed(1);
  const limitLine = limitShown
    ? `<line class="limit" x1="${left}" x2="${W - right}" y1="${limitY}" y2="${limitY}"></line><text class="limit-label" x="${W - right - 4}" y="${(Number(limitY) - 4).toFixed(1)}" text-anchor="end">limit ${fmt(limitPerHour)}/h</text>`
    : `<text class="limit-label" x="${W - right - 4}" y="${top - 4}" text-anchor="end">limit ${fmt(limitPerHour)}/h (above this scale)</text>`;
  const total = sum(series.requests);
  const refused = sum(series.limited);
  const desc = `${fmt(total)} requests in ${n} hours, ${fmt(refused)} refused (429); busiest hour ${fmt(peak)}; plan limit ${fmt(limitPerHour)} per hour.`;
  return (
    `<svg class="chart" viewBox="0 0 ${W} ${H}" role="img" aria-labelledby="${id}-title ${id}-desc" data-total="${total}" data-limited="${refused}" data-limit="${limitPerHour}">` +
    `<title id="${id}-title">${esc(title)}</title><desc id="${id}-desc">${esc(desc)}</desc>` +
    `<line class="axis" x1="${left}" x2="${W - right}" y1="${top + plotH}" y2="${top + plotH}"></line>` +
    `<text class="tick" x="${left - 6}" y="${top + plotH}" text-anchor="end">0</text>` +
    `<text class="tick" x="${left - 6}" y="${top + 10}" text-anchor="end">${fmt(Math.round(max))}</text>` +
    ticks.join('') +
    bars.join('') +
    limitLine +
    `</svg>`
  );
}
