/** The usage page: requests per hour per token against the plan's limit (see usage-chart.ts). */
import { type Chrome, h, layout, pager, raw } from './console.views.js';
import type { UsagePageData } from './console-usage.service.js';
import { sum, usageChartSvg } from './usage-chart.js';

const fmt = (n: number) => n.toLocaleString('en-US');

export function usagePage(chrome: Chrome, d: UsagePageData): string {
  const rangeLink = (r: '24h' | '7d', label: string) =>
    h`<a class="btn ${d.range === r ? 'btn-primary' : 'btn-ghost'}" href="/account/usage?range=${r}"${d.range === r ? raw(' aria-current="true"') : ''}>${label}</a>`;
  const charts = d.charts.map(
    (c, i) => h`<section class="card chart-card" aria-labelledby="chart-${i}-h">
  <h2 id="chart-${i}-h">${c.label}</h2>
  <p class="muted">${fmt(sum(c.series.requests))} requests, ${fmt(sum(c.series.limited))} refused (429), busiest hour ${fmt(Math.max(0, ...c.series.requests))}</p>
  <div class="chart-wrap">${raw(usageChartSvg(`chart-${i}`, `${c.label}: requests per hour, ${d.range === '24h' ? 'last 24 hours' : 'last 7 days'}`, c.series, d.limitPerHour))}</div>
</section>`,
  );
  return layout(
    'Usage',
    h`<section class="card" aria-labelledby="plan-h">
  <h2 id="plan-h">Plan and limit</h2>
  <p><span class="badge badge-plan">${d.plan}</span> ${fmt(d.limit)} requests per ${d.windowSeconds === 3600 ? 'hour' : `${d.windowSeconds} s`}${
    d.windowSeconds === 3600 ? '' : h` (${fmt(d.limitPerHour)} per hour)`
  }, counted for your account across all its tokens. Requests past it are refused with 429.</p>
  <p class="muted">Counts are written every few seconds by each API process, and kept 30 days. Times are UTC.</p>
</section>
<div class="actions" role="group" aria-label="Range">${rangeLink('24h', 'Last 24 hours')} ${rangeLink('7d', 'Last 7 days')}</div>
<p class="legend"><span class="swatch swatch-ok"></span> accepted <span class="swatch swatch-limited"></span> refused (429) <span class="swatch swatch-limit"></span> plan limit per hour</p>
${charts}
${d.idle.length ? h`<p class="muted">No requests in this range from: ${d.idle.join(', ')}.</p>` : ''}
${pager('Tokens', d.page, d.pageSize, d.tokenTotal, (n) => `/account/usage?range=${d.range}&page=${n}`)}`,
    { ...chrome, current: 'usage' },
  );
}
