import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';

/**
 * Webhook target rules (SSRF): `https` unless WEBHOOK_ALLOW_HTTP=true, and no target that resolves
 * to a loopback, link-local, private, shared, multicast or otherwise non-public address unless
 * WEBHOOK_ALLOW_PRIVATE=true. Checked when a webhook is created or changed, and again before every
 * delivery (DNS can change): every address the name resolves to is checked, and the delivery
 * connects to a checked address (no second lookup in between).
 */
export interface UrlRules {
  allowHttp: boolean;
  allowPrivate: boolean;
}

export class WebhookUrlError extends Error {}

/** IPv4 ranges that are not publicly routable (RFC 6890 and successors). */
const NON_PUBLIC_IPV4 = [
  ['0.0.0.0', 8], // "this" network
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // shared address space (CGNAT)
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local, cloud metadata
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const;

/**
 * IPv6 forms that carry an IPv4 address in their low 32 bits: such an address reaches what the IPv4
 * address reaches, so it is public only when that IPv4 address is. IPv4-mapped (`::ffff:a.b.c.d`),
 * and NAT64's well-known prefix (`64:ff9b::a.b.c.d`, RFC 6052).
 */
const IPV4_CARRIERS = ['::ffff:', '64:ff9b::'] as const;

/**
 * The only IPv6 ranges that may hold a public address: global unicast (2000::/3) and the IPv4
 * carriers above. Everything else is not: unspecified and loopback, IPv4-compatible (`::a.b.c.d`,
 * deprecated) and IPv4-translated (`::ffff:0:a.b.c.d`, RFC 2765) forms, the discard prefix,
 * NAT64's local-use prefix (64:ff9b:1::/48), unique local, link-local, site-local and multicast.
 */
const mayBePublicIpv6 = new BlockList();
mayBePublicIpv6.addSubnet('2000::', 3, 'ipv6');
for (const prefix of IPV4_CARRIERS) mayBePublicIpv6.addSubnet(`${prefix}0.0.0.0`, 96, 'ipv6');

/** The non-public addresses inside those ranges; checked with net.BlockList, not by hand. */
const blocked = new BlockList();
for (const [net, prefix] of NON_PUBLIC_IPV4) {
  blocked.addSubnet(net, prefix, 'ipv4');
  // The same IPv4 range carried inside IPv6: mapped and NAT64 (low 32 bits), and 6to4
  // (2002:AABB:CCDD::/48 relays to a.b.c.d, RFC 3056; the IPv4 address follows the first 16 bits).
  for (const carrier of IPV4_CARRIERS) blocked.addSubnet(`${carrier}${net}`, 96 + prefix, 'ipv6');
  const [a, b, c, d] = net.split('.').map(Number);
  blocked.addSubnet(`2002:${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}::`, 16 + prefix, 'ipv6');
}
for (const [net, prefix] of [
  ['2001::', 32], // Teredo: tunnels to an IPv4 server and client of its own, not a host reachable as such
  ['2001:2::', 48], // benchmarking
  ['2001:10::', 28], // ORCHID (deprecated)
  ['2001:20::', 28], // ORCHIDv2
  ['2001:db8::', 32], // documentation
  ['3fff::', 20], // documentation
] as const) {
  blocked.addSubnet(net, prefix, 'ipv6');
}

/** True for addresses a webhook may not reach by default (loopback, link-local, private, reserved). */
export function isPrivateAddress(ip: string): boolean {
  try {
    const family = isIP(ip);
    if (family === 4) return blocked.check(ip, 'ipv4');
    if (family === 6) return !mayBePublicIpv6.check(ip, 'ipv6') || blocked.check(ip, 'ipv6');
  } catch {
    // An address BlockList cannot read (e.g. with a zone id) is not a public one.
  }
  return true;
}

/** Checks the URL's form (scheme, no credentials); answers it parsed. */
export function checkUrlForm(raw: string, rules: UrlRules): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new WebhookUrlError('must be an absolute URL');
  }
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && rules.allowHttp)) {
    throw new WebhookUrlError(rules.allowHttp ? 'must be an http or https URL' : 'must be an https URL');
  }
  if (url.username || url.password) throw new WebhookUrlError('must not contain credentials');
  if (!url.hostname) throw new WebhookUrlError('must name a host');
  return url;
}

export interface ResolvedTarget {
  url: URL;
  address: string;
  family: 4 | 6;
}

/** Resolves the URL's host and checks every address; answers the address to connect to. */
export async function resolveTarget(raw: string, rules: UrlRules): Promise<ResolvedTarget> {
  const url = checkUrlForm(raw, rules);
  const host = url.hostname.replace(/^\[|\]$/g, '');
  let addresses: { address: string; family: number }[];
  if (isIP(host)) {
    addresses = [{ address: host, family: isIP(host) }];
  } else {
    try {
      addresses = await lookup(host, { all: true, verbatim: true });
    } catch (e) {
      throw new WebhookUrlError(`host ${host} does not resolve (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
    }
    if (!addresses.length) throw new WebhookUrlError(`host ${host} does not resolve`);
  }
  if (!rules.allowPrivate) {
    const bad = addresses.find((a) => isPrivateAddress(a.address));
    if (bad) {
      throw new WebhookUrlError(
        `resolves to ${bad.address}, a loopback, link-local or private address; such targets are refused unless WEBHOOK_ALLOW_PRIVATE=true`,
      );
    }
  }
  return { url, address: addresses[0].address, family: addresses[0].family === 6 ? 6 : 4 };
}
