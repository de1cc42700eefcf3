import ipaddr from 'ipaddr.js';

/** The gateway of an Alibaba Cloud vSwitch: the third address from the top of its CIDR (x.x.x.253 in a /24). */
export function vSwitchGateway(cidr: string): string {
  const [addr, bits] = ipaddr.IPv4.parseCIDR(cidr);
  const b = addr.toByteArray();
  const base = ((b[0]! << 24) | (b[1]! << 16) | (b[2]! << 8) | b[3]!) >>> 0;
  const mask = bits === 0 ? 0 : (~0 << (32 - bits)) >>> 0;
  const top = ((base & mask) >>> 0) + 2 ** (32 - bits) - 3;
  return [top >>> 24, (top >>> 16) & 255, (top >>> 8) & 255, top & 255].join('.');
}
