import ipaddr from 'ipaddr.js';

/**
 * IPv6 prefix mode (`ipv6Mode: Prefix`, dual-stack): an ENI holds one /80 of its vSwitch's /64,
 * given at its creation (Ipv6PrefixCount), and every pod of the ENI takes its IPv6 address from
 * it. A /80 holds 2^48 addresses, more than any ENI has pods, so IPv6 never costs a call as the
 * pool grows; its addresses are never listed, only tested for membership.
 */
export const IPV6_PREFIX_LENGTH = 80;

/** The /80 prefixes each ENI holds at most: one serves all its pods. */
export const IPV6_PREFIXES_PER_ENI = 1;

/** IPv6 prefixes per UnassignIpv6Addresses call (ECS: Ipv6Prefix.N, N up to 10). */
export const UNASSIGN_IPV6_PREFIX_BATCH = 10;

type Spec = { ipv6Mode?: 'SecondaryIP' | 'Prefix' };

/** The class asks new ENIs for a /80 instead of single IPv6 addresses. */
export const ipv6PrefixMode = (spec: Spec): boolean => spec.ipv6Mode === 'Prefix';

/** Whether `ip` is an address of the IPv6 prefix `prefix` (`x::/80`); false for anything unparsable. */
export function inIpv6Prefix(ip: string, prefix: string): boolean {
  try {
    const addr = ipaddr.parse(ip);
    const range = ipaddr.parseCIDR(prefix);
    return addr.kind() === 'ipv6' && range[0].kind() === 'ipv6' && addr.match(range);
  } catch {
    return false;
  }
}

/** Whether `text` is an IPv6 /80 (a status or an answer holding anything else is not trusted with pods). */
export function isIpv6Prefix80(text: string): boolean {
  try {
    const [addr, bits] = ipaddr.parseCIDR(text);
    return addr.kind() === 'ipv6' && bits === IPV6_PREFIX_LENGTH;
  } catch {
    return false;
  }
}

/** The prefix of `prefixes` holding `ip`, if any. */
export const ipv6PrefixOf = (ip: string, prefixes: readonly string[]): string | undefined =>
  prefixes.find((p) => inIpv6Prefix(ip, p));

/**
 * The IPv6 addresses an ENI has for its pods: its single ones, or, with a /80, one for each of its
 * IPv4 pod addresses (a dual-stack pod takes one of each on one ENI; the single ones it still
 * holds are such partners).
 */
export const ipv6Room = (ipv4PodAddresses: number, singles: number, prefixes: number): number =>
  prefixes > 0 ? Math.max(ipv4PodAddresses, singles) : singles;

/** Whether a release key names an IPv6 prefix (`x::/80`) rather than an address. */
export const isIpv6PrefixKey = (key: string): boolean => key.includes(':') && key.includes('/');

/**
 * The `offset`th address of a prefix (offset 0 is the prefix's own first address), canonical
 * (compressed, lowercase), as the node's tools and the API print it.
 */
export function ipv6PrefixAddress(prefix: string, offset: number): string {
  const [base] = ipaddr.IPv6.parseCIDR(prefix);
  const parts = base.parts.slice();
  // Offsets stay within the low 32 bits: a node never hands out four billion addresses.
  const low = ((parts[6]! << 16) | parts[7]!) >>> 0;
  const next = (low + offset) >>> 0;
  parts[6] = next >>> 16;
  parts[7] = next & 0xffff;
  return new ipaddr.IPv6(parts).toRFC5952String();
}

/**
 * The first address of `prefix` that `taken` does not hold, from offset 1 (the prefix's first
 * address is left alone: the lowest /80 of a /64 starts with its subnet-router anycast address).
 */
export function firstFreeInIpv6Prefix(prefix: string, taken: (ip: string) => boolean): string {
  for (let offset = 1; ; offset++) {
    const ip = ipv6PrefixAddress(prefix, offset);
    if (!taken(ip)) return ip;
  }
}
