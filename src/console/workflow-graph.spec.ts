import { describe, expect, it } from '@jest/globals';
import { edgesOf, type GraphStep, placeSteps, workflowGraph } from './workflow-graph.js';

const step = (key: string, type: string, more: Partial<GraphStep> = {}): GraphStep => ({ key, type, waiting: 0, completed: 0, failed: 0, ...more });

describe('the workflow graph', () => {
  const steps = [
    step('check', 'branch', { branches: [{ next: 'vip' }], defaultNext: 'later' }),
    step('vip', 'update_contact', { next: 'later' }),
    step('later', 'wait', { next: 'nudge', waiting: 3 }),
    step('nudge', 'update_contact', { next: 'later', completed: 2, failed: 1 }),
    step('won', 'goal'),
  ];

  it('follows every link of a step: next, each branch, each split, the default', () => {
    expect(edgesOf(step('s', 'branch', { branches: [{ next: 'a' }, { next: 'b' }], defaultNext: 'c' }))).toEqual([
      { from: 's', to: 'a', label: 'if 1' },
      { from: 's', to: 'b', label: 'if 2' },
      { from: 's', to: 'c', label: 'else' },
    ]);
    expect(edgesOf(step('s', 'branch', { split: [{ percentage: 30, next: 'a' }] }))).toEqual([{ from: 's', to: 'a', label: '30%' }]);
  });

  it('puts each step in the row of its distance from the first; steps not linked (a goal) go last', () => {
    const { nodes, edges } = placeSteps(steps);
    expect(Object.fromEntries(nodes.map((n) => [n.step.key, n.row]))).toEqual({ check: 0, vip: 1, later: 1, nudge: 2, won: 3 });
    // Two steps in row 1 side by side, at the same height.
    const [vip, later] = ['vip', 'later'].map((k) => nodes.find((n) => n.step.key === k)!);
    expect(vip.y).toBe(later.y);
    expect(later.x).toBeGreaterThan(vip.x);
    expect(edges).toHaveLength(5);
  });

  it('draws a box per step with its counts, an arrow per link (a link back around the side), every text escaped', () => {
    const svg = workflowGraph([...steps, step('x<y>', 'exit', { name: '<script>alert(1)</script>' })], { title: 'A & B' }).html;
    expect(svg.match(/<g class="step /g)).toHaveLength(6);
    expect(svg).toContain('data-step="later" data-waiting="3" data-completed="0" data-failed="0"');
    expect(svg).toContain('2 done · 1 failed');
    expect(svg.match(/<path class="edge"/g)).toHaveLength(5);
    // nudge → later goes back up a row: right side, up the lane, into later's right side (straight segments).
    expect(svg).toMatch(/<path class="edge" d="M[\d.]+,[\d.]+ L[\d.]+,[\d.]+ L[\d.]+,[\d.]+ L[\d.]+,[\d.]+"/);
    expect(svg).toContain('<title id="wf-graph-title">A &amp; B</title>');
    expect(svg).not.toContain('<script>');
    expect(svg).toContain('&lt;script&gt;');
    expect(svg).toContain('x&lt;y&gt;');
  });

  it('an empty definition draws an empty graph', () => {
    expect(placeSteps([])).toMatchObject({ nodes: [], edges: [] });
    expect(workflowGraph([], { title: 't' }).html).toContain('<svg');
  });
});
