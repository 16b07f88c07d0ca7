/**
 * Colours of categories and point groups: a 6-digit hex code, `#` optional on input, stored and
 * returned as `#rrggbb` in lower case. Pure logic, unit-tested in color.spec.ts.
 */
const HEX6 = /^#?([0-9a-fA-F]{6})$/;

/** `#rrggbb` (lower case) for a valid input, or null when the value is not a 6-digit hex colour. */
export function normalizeColor(value: string): string | null {
  const m = HEX6.exec(value.trim());
  return m ? `#${m[1].toLowerCase()}` : null;
}

export const COLOR_MESSAGE = 'must be a 6-digit hex colour such as #4e5d9d (the # is optional)';
