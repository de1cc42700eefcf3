import { randomBytes } from 'node:crypto';
import { Ipv4Pool, Ipv6Pool } from './addresses.js';
import type { ScaledClock } from './clock.js';
import { apiError } from './errors.js';
import type { Faults } from './faults.js';
import type { Fixture } from './fixture.js';

export type EniStatus = 'Available' | 'Attaching' | 'InUse' | 'Detaching' | 'Deleting';
export interface Tag {
  key: string;
  value: string;
}

export interface Eni {
  id: string;
  mac: string;
  type: 'Primary' | 'Secondary';
  status: EniStatus;
  vpcId: string;
  vSwitchId: string;
  zoneId: string;
  securityGroupIds: string[];
  primaryIp: string;
  secondaryIps: string[];
  ipv4Prefixes: string[];
  ipv6: string[];
  /** IPv6 /80 prefixes, in canonical form (`2408:4005:3c0:a100:1::/80`). */
  ipv6Prefixes: string[];
  tags: Tag[];
  name?: string;
  description?: string;
  instanceId?: string;
  deviceIndex?: number;
  attachedTime?: number;
  creationTime: number;
  /** An asynchronous state change in progress, applied when the clock passes `at`. */
  pending?: { to: EniStatus | 'gone'; at: number };
}

export type VSwitch = Omit<Fixture['vSwitches'][number], 'tags' | 'foreignUsedIps'> & {
  tags: Tag[];
  creationTime: number;
  pool: Ipv4Pool;
  pool6?: Ipv6Pool;
};

export type InstanceType = Fixture['instanceTypes'][number];

export interface Instance {
  id: string;
  instanceType: string;
  zoneId: string;
  vpcId: string;
  vSwitchId: string;
  securityGroupIds: string[];
  status: string;
  hostName: string;
  creationTime: number;
  primaryEniId: string;
}

const toTags = (t?: Record<string, string>): Tag[] => Object.entries(t ?? {}).map(([key, value]) => ({ key, value }));

/** The mutable state of the emulated region, with ENI transitions applied lazily on read. */
export class World {
  readonly region: string;
  readonly vpcs = new Map<string, Fixture['vpcs'][number] & { creationTime: number }>();
  readonly vSwitches = new Map<string, VSwitch>();
  readonly securityGroups = new Map<
    string,
    Omit<Fixture['securityGroups'][number], 'tags'> & { tags: Tag[]; creationTime: number }
  >();
  readonly instanceTypes = new Map<string, InstanceType>();
  readonly instances = new Map<string, Instance>();
  readonly enis = new Map<string, Eni>();
  /**
   * Data planes that carry this world's addresses (the VPC in network namespaces): a call that
   * changes the world is answered once each of them holds the change, as the real API answers
   * an assign once the address is delivered.
   */
  readonly dataPlanes = new Set<() => Promise<void>>();
  private readonly transitioning = new Set<string>();
  private macCounter = 0;

  constructor(
    readonly fixture: Fixture,
    readonly clock: ScaledClock,
    private readonly faults: Faults,
  ) {
    const t0 = clock.now();
    this.region = fixture.region;
    for (const v of fixture.vpcs) this.vpcs.set(v.id, { ...v, creationTime: t0 });
    for (const s of fixture.vSwitches) {
      this.vSwitches.set(s.id, {
        ...s,
        tags: toTags(s.tags),
        creationTime: t0,
        pool: new Ipv4Pool(s.cidr, s.foreignUsedIps ?? 0),
        pool6: s.ipv6Cidr ? new Ipv6Pool(s.ipv6Cidr) : undefined,
      });
    }
    for (const g of fixture.securityGroups)
      this.securityGroups.set(g.id, { ...g, tags: toTags(g.tags), creationTime: t0 });
    for (const t of fixture.instanceTypes) this.instanceTypes.set(t.id, t);
    for (const i of fixture.instances) this.addInstance(i, t0);
  }

  private addInstance(i: Fixture['instances'][number], t0: number): void {
    const vsw = this.vSwitches.get(i.vSwitchId)!;
    const ip = i.primaryIp ?? vsw.pool.take(1)?.[0];
    if (!ip || (i.primaryIp && !vsw.pool.takeSpecific(ip))) {
      throw new Error(`instance ${i.id}: no primary address ${i.primaryIp ?? ''} available in ${vsw.id}`);
    }
    const eni = this.newEni({ type: 'Primary', vsw, securityGroupIds: i.securityGroupIds, primaryIp: ip, tags: [] });
    Object.assign(eni, { status: 'InUse', instanceId: i.id, deviceIndex: 0, attachedTime: t0 });
    this.instances.set(i.id, {
      id: i.id,
      instanceType: i.instanceType,
      zoneId: vsw.zoneId,
      vpcId: vsw.vpcId,
      vSwitchId: vsw.id,
      securityGroupIds: i.securityGroupIds,
      status: i.status ?? 'Running',
      hostName: i.hostName ?? i.id,
      creationTime: t0,
      primaryEniId: eni.id,
    });
  }

  newEni(o: {
    type: Eni['type'];
    vsw: VSwitch;
    securityGroupIds: string[];
    primaryIp: string;
    tags: Tag[];
    name?: string;
    description?: string;
  }): Eni {
    const eni: Eni = {
      id: `eni-${randomBytes(10).toString('hex')}`,
      mac: this.nextMac(),
      type: o.type,
      status: 'Available',
      vpcId: o.vsw.vpcId,
      vSwitchId: o.vsw.id,
      zoneId: o.vsw.zoneId,
      securityGroupIds: o.securityGroupIds,
      primaryIp: o.primaryIp,
      secondaryIps: [],
      ipv4Prefixes: [],
      ipv6: [],
      ipv6Prefixes: [],
      tags: o.tags,
      name: o.name,
      description: o.description,
      creationTime: this.clock.now(),
    };
    this.enis.set(eni.id, eni);
    return eni;
  }

  private nextMac(): string {
    const n = ++this.macCounter;
    return ['00', '16', '3e', (n >> 16) & 255, (n >> 8) & 255, n & 255]
      .map((x) => (typeof x === 'string' ? x : x.toString(16).padStart(2, '0')))
      .join(':');
  }

  /** Applies every state change whose time has come. Called before each request is served. */
  advance(): void {
    const now = this.clock.now();
    for (const id of this.transitioning) {
      const eni = this.enis.get(id);
      if (!eni?.pending) {
        this.transitioning.delete(id);
        continue;
      }
      if (eni.pending.at > now) continue;
      const to = eni.pending.to;
      eni.pending = undefined;
      this.transitioning.delete(id);
      if (to === 'gone') {
        this.releaseAddresses(eni);
        this.enis.delete(id);
        continue;
      }
      eni.status = to;
      if (to === 'Available') {
        eni.instanceId = undefined;
        eni.deviceIndex = undefined;
        eni.attachedTime = undefined;
      } else if (to === 'InUse') {
        eni.attachedTime = now;
      }
    }
  }

  /** Starts an asynchronous change: `status` now, `to` after `delayMs` (or never, for a stuck change). */
  transition(eni: Eni, status: EniStatus, to: EniStatus | 'gone' | null, delayMs: number): void {
    eni.status = status;
    if (to === null) {
      eni.pending = undefined;
      this.transitioning.delete(eni.id);
      return;
    }
    eni.pending = { to, at: this.clock.now() + delayMs };
    this.transitioning.add(eni.id);
  }

  private releaseAddresses(eni: Eni): void {
    const vsw = this.vSwitches.get(eni.vSwitchId)!;
    vsw.pool.release(eni.primaryIp);
    eni.secondaryIps.forEach((ip) => vsw.pool.release(ip));
    eni.ipv4Prefixes.forEach((p) => vsw.pool.releasePrefix(p));
    eni.ipv6.forEach((ip) => vsw.pool6?.release(ip));
    eni.ipv6Prefixes.forEach((p) => vsw.pool6?.releasePrefix(p));
  }

  get faultInjector(): Faults {
    return this.faults;
  }

  eni(id: string): Eni {
    const eni = this.enis.get(id);
    if (!eni) throw apiError('InvalidEniId.NotFound', `The specified NetworkInterfaceId "${id}" does not exist.`);
    return eni;
  }

  vSwitch(id: string): VSwitch {
    const v = this.vSwitches.get(id);
    if (!v) throw apiError('InvalidVSwitchId.NotFound', `The specified VSwitchId "${id}" does not exist.`);
    return v;
  }

  instance(id: string): Instance {
    const i = this.instances.get(id);
    if (!i) throw apiError('InvalidInstanceId.NotFound', `The specified InstanceId "${id}" does not exist.`);
    return i;
  }

  /**
   * Releases an instance, as when it is deleted or its node is scaled in: its secondary ENIs
   * are detached (Available again, still owned by the account), its primary ENI goes with it.
   */
  releaseInstance(id: string): void {
    const i = this.instance(id);
    this.advance();
    for (const e of this.enisOf(id)) {
      this.transitioning.delete(e.id);
      if (e.type === 'Primary') {
        this.releaseAddresses(e);
        this.enis.delete(e.id);
      } else
        Object.assign(e, {
          status: 'Available',
          instanceId: undefined,
          deviceIndex: undefined,
          attachedTime: undefined,
          pending: undefined,
        });
    }
    this.instances.delete(i.id);
  }

  instanceType(id: string): InstanceType {
    return this.instanceTypes.get(id)!;
  }

  /** ENIs attached or attaching to an instance, the primary included. */
  enisOf(instanceId: string): Eni[] {
    return [...this.enis.values()].filter((e) => e.instanceId === instanceId);
  }

  secondaryEniCount(): number {
    let n = 0;
    for (const e of this.enis.values()) if (e.type === 'Secondary') n++;
    return n;
  }

  /** A plain copy of the whole state, for tests and benchmarks. */
  snapshot(): WorldSnapshot {
    this.advance();
    return {
      region: this.region,
      enis: [...this.enis.values()].map(({ pending, ...e }) => ({ ...e, pendingStatus: pending?.to })),
      vSwitches: [...this.vSwitches.values()].map((v) => ({
        id: v.id,
        zoneId: v.zoneId,
        cidr: v.cidr,
        free: v.pool.free,
        capacity: v.pool.capacity,
      })),
      instances: [...this.instances.values()],
    };
  }
}

export interface WorldSnapshot {
  region: string;
  enis: Array<Omit<Eni, 'pending'> & { pendingStatus?: string }>;
  vSwitches: Array<{ id: string; zoneId: string; cidr: string; free: number; capacity: number }>;
  instances: Instance[];
}
