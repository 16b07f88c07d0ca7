import { describe, expect, it } from '@jest/globals';
import { PERMISSIONS } from '../auth/permissions.js';
import { newTokenPage } from './console.views.js';
import { permissionGroups } from './token-form.js';

const checkboxes = (html: string) => [...html.matchAll(/<input type="checkbox" name="permissions" value="([^"]+)"/g)].map((m) => m[1]);

describe('the console token form', () => {
  it('has a checkbox for every permission the API accepts (the registry), grouped by resource', () => {
    const everything = new Set<string>(PERMISSIONS);
    const html = newTokenPage({ csrf: 'x' }, { mayGrantAll: true, granted: everything, nowMs: Date.parse('2026-01-01T00:00:00Z') });
    expect(checkboxes(html).sort()).toEqual([...PERMISSIONS].sort());
    for (const p of ['imports:read', 'imports:write', 'exports:read', 'exports:write', 'events:read', 'webhooks:delete']) expect(checkboxes(html)).toContain(p);
    const groups = permissionGroups(everything);
    expect(groups.map((g) => g.resource)).toEqual(expect.arrayContaining(['contacts', 'events', 'imports', 'exports']));
    expect(groups.find((g) => g.resource === 'events')?.permissions).toEqual([{ value: 'events:read', action: 'read' }]);
    expect(html).toContain('<legend>Imports</legend>');
  });

  it('offers only what the user may grant: no * without a * token, no permission outside the granted set', () => {
    const html = newTokenPage(
      { csrf: 'x' },
      { mayGrantAll: false, granted: new Set(['contacts:read', 'exports:read']), nowMs: Date.parse('2026-01-01T00:00:00Z') },
    );
    expect(checkboxes(html)).toEqual(['contacts:read', 'exports:read']);
  });
});
