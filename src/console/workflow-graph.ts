/**
 * A workflow's step graph as server-rendered SVG (no script): the steps in rows by their distance
 * from the first step, each a box with its name, type and the contacts waiting there and done
 * with it; an arrow for every `next` (branches, splits and the default too), a link back to an
 * earlier row drawn around the right-hand side.
 */
import { esc, type Html, raw } from './console.views.js';

/** A step as the graph needs it: the API record's step (key, type, name, where it leads) with its stats. */
export interface GraphStep {
  key: string;
  type: string;
  name?: string;
  next?: string;
  branches?: { next: string }[];
  split?: { percentage: number; next: string }[];
  defaultNext?: string;
  waiting: number;
  completed: number;
  failed: number;
}

export interface GraphNode {
  step: GraphStep;
  x: number;
  y: number;
  row: number;
}

export interface GraphEdge {
  from: string;
  to: string;
  label: string | null;
}

const W = 220;
const H = 74;
const GAP_X = 36;
const GAP_Y = 54;
const MARGIN = 16;
/** Room on the right for the links back to an earlier row. */
const BACK_LANE = 40;

/** Where a step leads, each with its label (a branch's number, a split's share, "else"). */
export function edgesOf(step: GraphStep): GraphEdge[] {
  const out: GraphEdge[] = [];
  if (step.next) out.push({ from: step.key, to: step.next, label: null });
  (step.branches ?? []).forEach((b, i) => out.push({ from: step.key, to: b.next, label: `if ${i + 1}` }));
  (step.split ?? []).forEach((s) => out.push({ from: step.key, to: s.next, label: `${s.percentage}%` }));
  if (step.defaultNext) out.push({ from: step.key, to: step.defaultNext, label: 'else' });
  return out;
}

/** The steps placed in rows: row n holds the steps n links away from the first (breadth first); steps not reached go last. */
export function placeSteps(steps: readonly GraphStep[]): { nodes: GraphNode[]; edges: GraphEdge[]; width: number; height: number } {
  const byKey = new Map(steps.map((s) => [s.key, s]));
  const row = new Map<string, number>();
  const queue: { step: GraphStep; row: number }[] = steps.length ? [{ step: steps[0], row: 0 }] : [];
  if (steps.length) row.set(steps[0].key, 0);
  for (let next = queue.shift(); next; next = queue.shift()) {
    for (const e of edgesOf(next.step)) {
      const to = byKey.get(e.to);
      if (to && !row.has(to.key)) {
        row.set(to.key, next.row + 1);
        queue.push({ step: to, row: next.row + 1 });
      }
    }
  }
  const last = Math.max(-1, ...row.values());
  const rows: GraphStep[][] = [];
  for (const s of steps) (rows[row.get(s.key) ?? last + 1] ??= []).push(s);
  const widest = Math.max(1, ...rows.map((r) => r?.length ?? 0));
  const inner = widest * W + (widest - 1) * GAP_X;
  const nodes: GraphNode[] = [];
  rows.forEach((r, i) => {
    if (!r) return;
    const span = r.length * W + (r.length - 1) * GAP_X;
    r.forEach((step, j) => nodes.push({ step, row: i, x: MARGIN + (inner - span) / 2 + j * (W + GAP_X), y: MARGIN + i * (H + GAP_Y) }));
  });
  const edges = steps.flatMap(edgesOf).filter((e) => byKey.has(e.to));
  return { nodes, edges, width: inner + 2 * MARGIN + BACK_LANE, height: Math.max(1, rows.length) * (H + GAP_Y) - GAP_Y + 2 * MARGIN };
}

const clip = (text: string, max: number) => (text.length > max ? `${text.slice(0, max - 1)}…` : text);

/** The SVG of a workflow's graph; `titleId`/`descId` label it for assistive technology (the page's table gives the same numbers). */
export function workflowGraph(steps: readonly GraphStep[], opts: { title: string }): Html {
  const { nodes, edges, width, height } = placeSteps(steps);
  const at = new Map(nodes.map((n) => [n.step.key, n]));
  const lanes = new Map<number, number>();
  const paths = edges.map((e) => {
    const a = at.get(e.from);
    const b = at.get(e.to);
    if (!a || !b) return '';
    let d: string;
    let lx: number;
    let ly: number;
    if (b.row > a.row) {
      const x1 = a.x + W / 2;
      const y1 = a.y + H;
      const x2 = b.x + W / 2;
      const y2 = b.y - 4;
      const mid = (y1 + y2) / 2;
      d = `M${x1},${y1} C${x1},${mid} ${x2},${mid} ${x2},${y2}`;
      lx = (x1 + x2) / 2 + 4;
      ly = mid - 4;
    } else if (b.row === a.row && b.x > a.x) {
      // To a step beside it, on the right: straight across.
      d = `M${a.x + W},${a.y + H / 2} L${b.x - 4},${b.y + H / 2}`;
      lx = a.x + W + 4;
      ly = a.y + H / 2 - 6;
    } else {
      // Back to an earlier row (or to the left in the same row): out of the right side, up the lane, into the right side.
      const lane = (lanes.get(b.row) ?? 0) + 1;
      lanes.set(b.row, lane);
      const x1 = a.x + W;
      const y1 = a.y + H / 2;
      const x2 = b.x + W + 4;
      const y2 = b.y + H / 2;
      const xl = width - BACK_LANE + Math.min(lane * 10, BACK_LANE - 6);
      d = `M${x1},${y1} L${xl},${y1} L${xl},${y2} L${x2},${y2}`;
      lx = xl - 30;
      ly = y1 - 4;
    }
    return `<path class="edge" d="${d}" marker-end="url(#wf-arrow)"></path>${e.label ? `<text class="edge-label" x="${lx}" y="${ly}">${esc(e.label)}</text>` : ''}`;
  });
  const boxes = nodes.map((n) => {
    const s = n.step;
    const label = s.name ?? s.key;
    return `<g class="step step-${esc(s.type)}" data-step="${esc(s.key)}" data-waiting="${s.waiting}" data-completed="${s.completed}" data-failed="${s.failed}">
<rect x="${n.x}" y="${n.y}" width="${W}" height="${H}" rx="6"></rect>
<text class="step-name" x="${n.x + 10}" y="${n.y + 20}">${esc(clip(label, 26))}</text>
<text class="step-type" x="${n.x + 10}" y="${n.y + 38}">${esc(clip(`${s.type.replace(/_/g, ' ')} · ${s.key}`, 32))}</text>
<text class="step-counts" x="${n.x + 10}" y="${n.y + 60}">${s.waiting} waiting · ${s.completed} done${s.failed ? ` · ${s.failed} failed` : ''}</text>
</g>`;
  });
  return raw(`<svg class="workflow-graph" xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-labelledby="wf-graph-title wf-graph-desc">
<title id="wf-graph-title">${esc(opts.title)}</title>
<desc id="wf-graph-desc">${esc(`${steps.length} steps; the table below lists each step with the contacts waiting there and done with it.`)}</desc>
<defs><marker id="wf-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path class="arrow" d="M0,0 L10,5 L0,10 z"></path></marker></defs>
${paths.join('\n')}
${boxes.join('\n')}
</svg>`);
}
