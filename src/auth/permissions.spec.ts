import { describe, expect, it } from '@jest/globals';
import { canGrant, hasPermission, isPermission, PERMISSIONS } from './permissions.js';

describe('permissions', () => {
  it('lists read, write and delete for every resource, plus *', () => {
    expect(PERMISSIONS).toContain('*');
    expect(PERMISSIONS).toContain('pointGroups:delete');
    expect(PERMISSIONS).toEqual(expect.arrayContaining(['companies:read', 'companies:write', 'companies:delete']));
    expect(PERMISSIONS).toContain('tokens:write');
    expect(PERMISSIONS).toContain('webhooks:delete');
    expect(PERMISSIONS).toContain('events:read');
    expect(PERMISSIONS).not.toContain('events:write');
    expect(PERMISSIONS).toEqual(expect.arrayContaining(['segments:read', 'segments:write', 'segments:delete']));
    expect(PERMISSIONS).toEqual(expect.arrayContaining(['imports:read', 'imports:write', 'exports:read', 'exports:write']));
    expect(PERMISSIONS).not.toContain('imports:delete');
    expect(PERMISSIONS).toEqual(expect.arrayContaining(['tracking:read', 'tracking:write']));
    expect(PERMISSIONS).toEqual(expect.arrayContaining(['workflows:delete', 'scoring:delete', 'pipelines:delete']));
    // *, read/write/delete of 18 resources, events:read, read/write of imports and exports, tracking:read|write.
    expect(PERMISSIONS.length).toBe(1 + 18 * 3 + 1 + 4 + 2);
    expect(isPermission('contacts:fly')).toBe(false);
  });

  it('* grants everything; otherwise exact matches only', () => {
    expect(hasPermission(new Set(['*']), 'deals:delete')).toBe(true);
    expect(hasPermission(new Set(['deals:read']), 'deals:delete')).toBe(false);
    expect(hasPermission(new Set(['deals:read']), 'deals:read')).toBe(true);
  });

  it('never lets a token grant more than it holds', () => {
    expect(canGrant(new Set(['*']), ['*'])).toBe(true);
    expect(canGrant(new Set(['contacts:read', 'contacts:write']), ['contacts:read'])).toBe(true);
    expect(canGrant(new Set(['contacts:read']), ['contacts:write'])).toBe(false);
    expect(canGrant(new Set(['contacts:read']), ['*'])).toBe(false);
  });
});
