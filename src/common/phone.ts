/**
 * Phone numbers: the one rule every feature uses (contact phone, `tel` custom field values, text
 * message recipients). Pure logic, unit-tested in validation.spec.ts.
 */
import { parsePhoneNumberFromString } from 'libphonenumber-js';

/** Longest phone number text accepted (before normalizing). */
export const MAX_PHONE_LENGTH = 40;

/** Normalizes a phone number to E.164 (numbers without a country code are read as US numbers); null when it does not parse. */
export function toE164(raw: string): string | null {
  const trimmed = raw.trim();
  if (!trimmed || trimmed.length > MAX_PHONE_LENGTH) return null;
  const parsed = parsePhoneNumberFromString(trimmed, { defaultCountry: 'US' });
  if (!parsed || !parsed.isPossible()) return null;
  return parsed.number;
}
