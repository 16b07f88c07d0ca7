/**
 * Company rules that need no database: how a domain and a website are normalised. Kept free of
 * Nest and TypeORM so that the unit spec can import them.
 */
import { isFQDN, isURL } from 'class-validator';
import { domainToASCII } from 'node:url';

export const MAX_DOMAIN_INPUT = 2048;

/**
 * A company's domain as stored: lower case, without scheme, credentials, `www.`, port, path, query,
 * fragment or trailing dot, internationalised names in their ASCII (punycode) form; null when what
 * is left is not a hostname with a top-level domain (an IP address is not a domain).
 * `https://www.Example.com:8443/about` → `example.com`.
 */
export function normalizeDomain(raw: string): string | null {
  let s = raw.trim().toLowerCase();
  if (!s || s.length > MAX_DOMAIN_INPUT || /\s/.test(s)) return null;
  s = s.replace(/^[a-z][a-z0-9+.-]*:\/\//, '').replace(/^\/\//, '');
  s = s.split(/[/?#]/)[0];
  const at = s.lastIndexOf('@');
  if (at >= 0) s = s.slice(at + 1);
  s = s.replace(/:\d*$/, '').replace(/\.+$/, '');
  // `www.` is dropped unless that leaves a bare top-level domain (www.com stays www.com).
  if (s.startsWith('www.') && s.slice(4).includes('.')) s = s.slice(4);
  if (!s) return null;
  const ascii = domainToASCII(s);
  if (!ascii || ascii.length > 253) return null;
  if (!isFQDN(ascii, { require_tld: true, allow_underscores: false, allow_trailing_dot: false, allow_numeric_tld: false })) return null;
  return ascii;
}

/**
 * A company's website as stored: an http(s) URL; a value without a scheme gets `https://`
 * (`example.com/about` → `https://example.com/about`). Null when it is not an http(s) URL.
 */
export function normalizeWebsite(raw: string): string | null {
  const s = raw.trim();
  if (!s || s.length > MAX_DOMAIN_INPUT) return null;
  const withScheme = /^[a-z][a-z0-9+.-]*:/i.test(s) ? s : `https://${s}`;
  return isURL(withScheme, { protocols: ['http', 'https'], require_protocol: true, require_tld: true }) ? withScheme : null;
}
