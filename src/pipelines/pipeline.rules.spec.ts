import { describe, expect, it } from '@jest/globals';
import { firstStageOfType, stageListProblems } from './pipeline.rules.js';

describe('pipeline rules', () => {
  it('wants an open stage and unique names', () => {
    expect(stageListProblems([{ name: 'a', type: 'open' }])).toEqual([]);
    expect(stageListProblems([{ name: 'w', type: 'won' }]).map((p) => p.message)).toEqual(['must hold at least one open stage']);
    expect(
      stageListProblems([
        { name: 'a', type: 'open' },
        { name: 'a', type: 'lost' },
      ])[0].message,
    ).toMatch(/two stages are named "a"/);
    expect(stageListProblems([])[0].field).toBe('stages');
  });

  it('finds the first stage of a type in order', () => {
    const stages = [
      { id: 1, type: 'open' as const },
      { id: 2, type: 'won' as const },
      { id: 3, type: 'won' as const },
    ];
    expect(firstStageOfType(stages, 'won')?.id).toBe(2);
    expect(firstStageOfType(stages, 'lost')).toBeNull();
  });
});
