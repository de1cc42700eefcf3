import ipaddr from 'ipaddr.js';

const toInt = (ip: string): number => {
  const b = ipaddr.IPv4.parse(ip).toByteArray();
  return ((b[0]! << 24) | (b[1]! << 16) | (b[2]! << 8) | b[3]!) >>> 0;
};
const toIp = (n: number): string => [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');

export function parseCidr4(cidr: string): { base: number; bits: number } {
  const [addr, bits] = ipaddr.IPv4.parseCIDR(cidr);
  const mask = bits === 0 ? 0 : (~0 << (32 - bits)) >>> 0;
  return { base: (toInt(addr.toString()) & mask) >>> 0, bits };
}

export function cidrContains(outer: string, inner: string): boolean {
  const o = parseCidr4(outer);
  const i = parseCidr4(inner);
  if (i.bits < o.bits) return false;
  const mask = o.bits === 0 ? 0 : (~0 << (32 - o.bits)) >>> 0;
  return (i.base & mask) >>> 0 === o.base;
}

/**
 * The IPv4 addresses of one vSwitch. Like a VPC vSwitch, the network address and the
 * last three addresses are reserved; the gateway is the third from last.
 * `foreignUsed` addresses are taken by resources outside the emulation (other tenants'
 * servers), so that a fixture can describe a nearly full vSwitch.
 */
export class Ipv4Pool {
  private readonly base: number;
  private readonly size: number;
  private readonly used = new Set<number>();
  private cursor = 1;

  constructor(cidr: string, foreignUsed = 0) {
    const { base, bits } = parseCidr4(cidr);
    this.base = base;
    this.size = 2 ** (32 - bits);
    for (let i = 0; i < foreignUsed && i < this.capacity; i++) this.used.add(this.base + this.size - 4 - i);
  }

  get capacity(): number {
    return Math.max(0, this.size - 4);
  }

  get free(): number {
    return this.capacity - this.used.size;
  }

  get gateway(): string {
    return toIp(this.base + this.size - 3);
  }

  contains(ip: string): boolean {
    if (!ipaddr.IPv4.isValid(ip)) return false;
    const n = toInt(ip);
    return n > this.base && n < this.base + this.size - 3;
  }

  isUsed(ip: string): boolean {
    return this.used.has(toInt(ip));
  }

  /** Takes `count` free addresses, or none (null) when fewer are free. */
  take(count: number): string[] | null {
    if (count > this.free) return null;
    const out: string[] = [];
    const span = this.size - 4;
    for (let scanned = 0; out.length < count && scanned < span; scanned++) {
      const n = this.base + this.cursor;
      this.cursor = this.cursor >= span ? 1 : this.cursor + 1;
      if (!this.used.has(n)) {
        this.used.add(n);
        out.push(toIp(n));
      }
    }
    return out;
  }

  takeSpecific(ip: string): boolean {
    const n = toInt(ip);
    if (!this.contains(ip) || this.used.has(n)) return false;
    this.used.add(n);
    return true;
  }

  /** An aligned /28 whose 16 addresses are all free, as ECS's IPv4 prefix mode hands out. */
  takePrefix28(): string | null {
    for (let start = this.base; start + 16 <= this.base + this.size - 3; start += 16) {
      let ok = true;
      for (let i = 0; i < 16 && ok; i++) {
        const n = start + i;
        ok = n > this.base && !this.used.has(n);
      }
      if (ok) {
        for (let i = 0; i < 16; i++) this.used.add(start + i);
        return `${toIp(start)}/28`;
      }
    }
    return null;
  }

  release(ip: string): void {
    this.used.delete(toInt(ip));
  }

  releasePrefix(prefix: string): void {
    const { base } = parseCidr4(prefix);
    for (let i = 0; i < 16; i++) this.used.delete(base + i);
  }
}

const toBig6 = (ip: string): bigint => BigInt(`0x${Buffer.from(ipaddr.IPv6.parse(ip).toByteArray()).toString('hex')}`);
const toIp6 = (n: bigint): string =>
  ipaddr.IPv6.parse(n.toString(16).padStart(32, '0').match(/.{4}/g)!.join(':')).toString();

/** The /80s of a /64: 2^16, numbered by bits 64-79 of their addresses. */
const SLOTS_80 = 0x10000;
const slot80 = (n: bigint): number => Number((n >> 48n) & 0xffffn);

/**
 * IPv6 addresses of a vSwitch's /64, handed out in order, and its /80 prefixes. A prefix is an
 * aligned /80 that holds no address taken one by one; the first /80 of the /64 is never one (the
 * subnet's own addresses are there, and the single addresses handed out in order).
 */
export class Ipv6Pool {
  private next = 0x100n;
  private readonly prefix: bigint;
  private readonly used = new Set<string>();
  /** The /80s held as prefixes, by slot (1 to 0xffff). */
  private readonly prefixes = new Set<number>();
  private prefixCursor = 1;

  constructor(cidr: string) {
    const [addr] = ipaddr.IPv6.parseCIDR(cidr);
    this.prefix = toBig6(addr.toString()) & ~((1n << 64n) - 1n);
  }

  /** Takes `count` free addresses, none inside a prefix. */
  take(count: number): string[] {
    const out: string[] = [];
    while (out.length < count) {
      const n = this.prefix | this.next++;
      const ip = toIp6(n);
      if (!this.used.has(ip) && !this.prefixes.has(slot80(n))) {
        this.used.add(ip);
        out.push(ip);
      }
    }
    return out;
  }

  isUsed(ip: string): boolean {
    return this.used.has(ipaddr.IPv6.parse(ip).toString());
  }

  /** The held prefix an address is inside, if any. */
  prefixOf(ip: string): string | undefined {
    const n = toBig6(ip);
    return this.prefixes.has(slot80(n)) ? `${toIp6(n & ~((1n << 48n) - 1n))}/80` : undefined;
  }

  /** Holds a named address (one an ENI asked for by name); false when it is held already. */
  takeSpecific(ip: string): boolean {
    const normal = ipaddr.IPv6.parse(ip).toString();
    if (this.used.has(normal)) return false;
    this.used.add(normal);
    return true;
  }

  release(ip: string): void {
    this.used.delete(ip);
  }

  /** An aligned /80 that overlaps no held prefix and holds no held address, or null when none is left. */
  takePrefix80(): string | null {
    const occupied = new Set([...this.used].map((ip) => slot80(toBig6(ip))));
    for (let scanned = 0; scanned < SLOTS_80 - 1; scanned++) {
      const s = this.prefixCursor;
      this.prefixCursor = s >= SLOTS_80 - 1 ? 1 : s + 1;
      if (this.prefixes.has(s) || occupied.has(s)) continue;
      this.prefixes.add(s);
      return `${toIp6(this.prefix | (BigInt(s) << 48n))}/80`;
    }
    return null;
  }

  releasePrefix(prefix: string): void {
    const [addr] = ipaddr.IPv6.parseCIDR(prefix);
    this.prefixes.delete(slot80(toBig6(addr.toString())));
  }
}
