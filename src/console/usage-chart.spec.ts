import { describe, expect, it } from '@jest/globals';
import { hourlySeries, scaleMax, usageChartSvg } from './usage-chart.js';

const H = 3_600_000;
const T0 = Date.UTC(2026, 10, 27, 0, 0, 0);

describe('the usage chart', () => {
  const rows = [
    { tokenId: 1, hour: new Date(T0), requests: 10, limited: 0 },
    { tokenId: 2, hour: new Date(T0), requests: 5, limited: 2 },
    { tokenId: 1, hour: new Date(T0 + 23 * H), requests: 3, limited: 0 },
    { tokenId: 1, hour: new Date(T0 - H), requests: 99, limited: 0 }, // before the range
  ];

  it('puts each hour in its slot, per token or for all tokens', () => {
    const all = hourlySeries(rows, T0, 24, null);
    expect(all.requests[0]).toBe(15);
    expect(all.limited[0]).toBe(2);
    expect(all.requests[23]).toBe(3);
    expect(all.requests.reduce((a, b) => a + b)).toBe(18);
    expect(hourlySeries(rows, T0, 24, 2).requests[0]).toBe(5);
  });

  it('draws the limit when the busiest hour is near it, and fits small counts otherwise', () => {
    expect(scaleMax(900, 1000)).toEqual({ max: 1100, limitShown: true });
    expect(scaleMax(3, 5000)).toEqual({ max: 5, limitShown: false });
    expect(scaleMax(120, 5000)).toEqual({ max: 200, limitShown: false });
  });

  it('renders a bar per hour with requests, refused ones stacked and titled, escaped title', () => {
    const svg = usageChartSvg('c1', 'All <tokens>', hourlySeries(rows, T0, 24, null), 20);
    expect(svg).toContain('role="img"');
    expect(svg).toContain('<title id="c1-title">All &lt;tokens&gt;</title>');
    expect([...svg.matchAll(/<g class="bar" data-hour="([^"]+)" data-requests="(\d+)" data-limited="(\d+)"/g)].map((m) => [m[1], m[2], m[3]])).toEqual([
      [new Date(T0).toISOString(), '15', '2'],
      [new Date(T0 + 23 * H).toISOString(), '3', '0'],
    ]);
    expect(svg.match(/class="bar-limited"/g)).toHaveLength(1);
    expect(svg).toContain('class="limit"');
    expect(svg).toContain('limit 20/h');
    expect(svg).toContain('data-total="18"');
  });
});
