/**
 * Keyset cursors: the `next` of a page and the `after` of the following request. A cursor names its
 * list and the binding of its query (list, order, filter and search), so it continues only its own walk.
 */
import type { CursorPosition } from './list-spec.js';

/** Longest `after` taken (the OpenAPI document states it). */
export const MAX_CURSOR = 4096;

/** A cursor: base64url of JSON [list, binding, key, id]; the list's name, so that one list refuses another's cursor by name. */
export function encodeCursor(list: string, binding: string, pos: CursorPosition): string {
  return Buffer.from(JSON.stringify([list, binding, pos.key, pos.id])).toString('base64url');
}

/** The position a cursor of the list `list` names, or why it is refused. */
export function decodeCursor(raw: string, list: string, binding: string): CursorPosition | string {
  const bad = 'is not a cursor of this list (use the `next` of a previous answer, or an empty after= to start)';
  if (raw.length > MAX_CURSOR || !/^[A-Za-z0-9_-]+$/.test(raw)) return bad;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
  } catch {
    return bad;
  }
  if (!Array.isArray(parsed) || parsed.length !== 4) return bad;
  const [l, b, key, id] = parsed as unknown[];
  if (
    typeof l !== 'string' ||
    typeof b !== 'string' ||
    (key !== null && typeof key !== 'string') ||
    typeof id !== 'number' ||
    !Number.isInteger(id) ||
    id < 0 ||
    id > 2147483647
  )
    return bad;
  if (typeof key === 'string' && (key.length > 1000 || key.includes('\u0000'))) return bad;
  if (l !== list) {
    const from = /^[a-z0-9 ]{1,100}$/i.test(l) ? `the ${l} list` : 'another list';
    return `is a cursor of ${from}, not of the ${list} list: a cursor continues only the walk it came from (start this list with an empty after=)`;
  }
  if (b !== binding) return 'was made for another orderBy, orderByDir, filter or search: a cursor continues only the walk it came from';
  return { key, id };
}
