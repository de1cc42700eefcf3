import ipaddr from 'ipaddr.js';
import { inIpv6Prefix, isIpv6PrefixKey } from './ipv6-prefix.js';

/**
 * IPv4 prefix mode: an ENI's slot (one of the IPv4 entries its instance type allows, the ENI's
 * own primary address included) holds an aligned /28 instead of one address. Every address of
 * the prefix is a pod's; the VPC routes the whole /28 to the ENI.
 */
export const PREFIX_LENGTH = 28;
/** Addresses in one /28 prefix. */
export const PREFIX_SIZE = 2 ** (32 - PREFIX_LENGTH);

/** The class's choice: one address per slot, or a /28 per slot. */
export type Ipv4Mode = 'SecondaryIP' | 'Prefix';

/** Every address of an IPv4 prefix (`a.b.c.d/28`), in order. */
export function prefixAddresses(prefix: string): string[] {
  const [addr, bits] = ipaddr.IPv4.parseCIDR(prefix);
  const b = addr.toByteArray();
  const base = (((b[0]! << 24) | (b[1]! << 16) | (b[2]! << 8) | b[3]!) >>> 0) & ((~0 << (32 - bits)) >>> 0);
  return Array.from({ length: 2 ** (32 - bits) }, (_, i) => {
    const n = base + i;
    return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
  });
}

/** Address -> the prefix holding it, for every prefix listed. */
export function prefixMembership(prefixes: Iterable<string>): Map<string, string> {
  const out = new Map<string, string>();
  for (const p of prefixes) for (const ip of prefixAddresses(p)) out.set(ip, p);
  return out;
}

/** Whether a release request's key names an IPv4 prefix (`a.b.c.d/28`) rather than one address. */
export const isPrefixKey = (key: string): boolean => key.includes('/') && !isIpv6PrefixKey(key);

/**
 * Whether a release key stands for an address: the address it names, one of a /28's 16, or any
 * of an IPv6 /80's (never listed: tested).
 */
export function keyCovers(key: string): (ip: string) => boolean {
  if (isIpv6PrefixKey(key)) return (ip) => inIpv6Prefix(ip, key);
  if (!isPrefixKey(key)) return (ip) => ip === key;
  const members = new Set(prefixAddresses(key));
  return (ip) => members.has(ip);
}

/** The addresses a release key stands for: a prefix's 16, or the one address it names. */
export const addressesOfKey = (key: string): string[] => (isPrefixKey(key) ? prefixAddresses(key) : [key]);
