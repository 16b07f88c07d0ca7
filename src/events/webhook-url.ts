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

const blocked = new BlockList();
for (const [net, prefix] of [
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
] as const) {
  blocked.addSubnet(net, prefix, 'ipv4');
}
for (const [net, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['ff00::', 8], // multicast
  ['2001:db8::', 32], // documentation
  ['100::', 64], // discard
] as const) {
  blocked.addSubnet(net, prefix, 'ipv6');
}

/** The IPv4 address inside an IPv4-mapped, -compatible or NAT64 IPv6 address, if any. */
function embeddedIpv4(ip: string): string | null {
  const m = /^(?:::ffff:|::|64:ff9b::)(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (m) return m[1];
  const h = /^(?:::ffff:|64:ff9b::)([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(ip);
  if (h) {
    const hi = parseInt(h[1], 16);
    const lo = parseInt(h[2], 16);
    return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  }
  return null;
}

/** True for addresses a webhook may not reach by default (loopback, link-local, private, reserved). */
export function isPrivateAddress(ip: string): boolean {
  const family = isIP(ip);
  if (family === 4) return blocked.check(ip, 'ipv4');
  if (family === 6) {
    const v4 = embeddedIpv4(ip);
    if (v4) return blocked.check(v4, 'ipv4');
    return blocked.check(ip, 'ipv6');
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
