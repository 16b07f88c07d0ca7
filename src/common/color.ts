/**
 * Colours of categories and point groups: a 6-digit hex code, `#` optional on input, stored and
 * returned as `#rrggbb` in lower case. Pure logic, unit-tested in color.spec.ts.
 */
/**
 * A colour as the API takes it: 6 hex digits, `#` optional, surrounding white space ignored (`\s` is
 * exactly what String.prototype.trim removes). The request schemas declare this same pattern.
 */
export const COLOR_PATTERN = /^\s*#?([0-9a-fA-F]{6})\s*$/;

/** `#rrggbb` (lower case) for a valid input, or null when the value is not a 6-digit hex colour. */
export function normalizeColor(value: string): string | null {
  const m = COLOR_PATTERN.exec(value);
  return m ? `#${m[1].toLowerCase()}` : null;
}

export const COLOR_MESSAGE = 'must be a 6-digit hex colour such as #4e5d9d (the # is optional)';
