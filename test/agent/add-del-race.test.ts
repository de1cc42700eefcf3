/**
 * An ADD that waits for its ENI's device is tied to the address it took. When the runtime gives up
 * on it (the plugin's timeout) and goes on, DEL then ADD again as containerd does, the first ADD
 * must neither release the address the second one answered (the running pod's, with its rules)
 * nor answer an address a DEL released meanwhile. (Found by review.) The kernel is an in-memory
 * model of what the agent's ip -batch lines do; the pool is in the Kubernetes emulator.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { PatchStrategy, setHeaderOptions, type CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { Agent } from '../../src/agent/agent.js';
import type { Lease } from '../../src/agent/allocator.js';
import type { KernelPort } from '../../src/agent/datapath/kernel.js';
import type { KernelLink, KernelRoute, KernelRule, KernelView } from '../../src/agent/datapath/model.js';
import { silentLogger } from '../../src/observability/logger.js';
import type { ControlPlane } from '../../testbed/control-plane/index.js';
import { eventually } from '../helpers/ecs.js';
import { kubeWithPool } from '../helpers/kube.js';

const NODE = 'node-r';
const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const pool = (n: number) => ({
  id: `eni-${n === 1 ? 'a' : 'b'}`,
  mac: `00:16:3e:aa:00:0${n}`,
  deviceIndex: n,
  state: 'InUse',
  vSwitchCIDR: `10.1.${n}.0/24`,
  gatewayIP: `10.1.${n}.253`,
  primaryIP: `10.1.${n}.5`,
  ips: [`10.1.${n}.10`, `10.1.${n}.11`],
});
const ENI_A = pool(1);
const ENI_B = pool(2);

/** The node's links, routes and rules, changed by the agent's ip -batch lines as the kernel would. */
class MemoryKernel implements KernelPort {
  links: KernelLink[] = [{ index: 2, name: 'eth0', mac: '00:16:3e:00:00:00', mtu: 1500, up: true, addresses: [] }];
  routes: KernelRoute[] = [
    { table: 254, type: 1, dst: 'default', gateway: '192.168.0.253', dev: 'eth0', scope: 0, protocol: 3 },
  ];
  rules: KernelRule[] = [];

  /** A hot-plugged NIC appears: DOWN, MTU 1500. */
  plug(name: string, mac: string): void {
    this.links.push({ index: 10 + this.links.length, name, mac, mtu: 1500, up: false, addresses: [] });
  }

  async read(): Promise<KernelView> {
    return structuredClone({ links: this.links, routes: this.routes, rules: this.rules });
  }

  async apply(lines: string[]): Promise<Map<number, string>> {
    const failed = new Map<number, string>();
    lines.forEach((line, i) => {
      try {
        this.run(line.split(' '));
      } catch (e) {
        failed.set(i + 1, (e as Error).message);
      }
    });
    return failed;
  }

  private run(t: string[]): void {
    const arg = (k: string) => (t.includes(k) ? t[t.indexOf(k) + 1] : undefined);
    if (t[0] === 'link') {
      const l = this.links.find((x) => x.name === t[3]);
      if (!l) throw new Error(`Cannot find device "${t[3]}"`);
      if (arg('mtu')) l.mtu = Number(arg('mtu'));
      if (t.includes('up')) l.up = true;
      return;
    }
    if (t[0] === 'route') {
      const r: KernelRoute = {
        table: Number(arg('table')),
        type: 1,
        dst: t[2]!,
        ...(arg('via') ? { gateway: arg('via') } : {}),
        ...(arg('dev') ? { dev: arg('dev') } : {}),
        scope: arg('scope') === 'link' ? 253 : 0,
        protocol: Number(arg('proto')),
      };
      const same = (x: KernelRoute) =>
        x.table === r.table && x.dst === r.dst && (!r.dev || x.dev === r.dev) && x.protocol === r.protocol;
      if (t[1] === 'add') {
        const dev = this.links.find((x) => x.name === r.dev);
        if (!dev) throw new Error(`Cannot find device "${r.dev}"`);
        if (!dev.up) throw new Error('RTNETLINK answers: Network is down');
        if (this.routes.some(same)) throw new Error('RTNETLINK answers: File exists');
        this.routes.push(r);
      } else {
        const at = this.routes.findIndex(same);
        if (at < 0) throw new Error('RTNETLINK answers: No such process');
        this.routes.splice(at, 1);
      }
      return;
    }
    const r: KernelRule = {
      priority: Number(arg('priority')),
      ...(arg('from') ? { src: arg('from') } : {}),
      ...(arg('to') ? { dst: arg('to') } : {}),
      ...(arg('lookup') ? { table: Number(arg('lookup')) } : {}),
      protocol: Number(arg('protocol')),
    };
    const same = (x: KernelRule) => JSON.stringify(x) === JSON.stringify(r);
    if (t[1] === 'add') {
      if (this.rules.some(same)) throw new Error('RTNETLINK answers: File exists');
      this.rules.push(r);
    } else {
      const at = this.rules.findIndex(same);
      if (at < 0) throw new Error('RTNETLINK answers: No such file or directory');
      this.rules.splice(at, 1);
    }
  }

  /** The rules of a pod address (ingress to main, egress to its ENI's table). */
  rulesOf(ip: string): KernelRule[] {
    return this.rules.filter((r) => r.src === `${ip}/32` || r.dst === `${ip}/32`);
  }
}

let emu: ControlPlane;
let kc: KubeConfig;
let custom: CustomObjectsApi;
let kernel: MemoryKernel;
let agent: Agent;

async function publish(enis: Array<typeof ENI_A>): Promise<void> {
  await custom.patchClusterCustomObjectStatus(
    { group: 'eniipam.io', version: 'v1alpha1', plural: 'enipools', name: NODE, body: { status: { enis } } },
    merge,
  );
}

/** An ADD as eni-ipam-cni's call runs it (cni.ts: agent.addPod), settled either way. */
const add = (containerId: string) =>
  agent.addPod({ containerId, ifName: 'eth0', pod: `default/${containerId}` }).then(
    (lease) => ({ lease: lease as Lease }),
    (error: Error) => ({ error }),
  );
const held = (containerId: string) => agent.list().find((a) => a.containerId === containerId)?.ip;

beforeEach(async () => {
  ({ emu, kc, custom } = await kubeWithPool(NODE, { cidr: ENI_A.vSwitchCIDR, gateway: ENI_A.gatewayIP, ips: [] }));
  // Only eni-b at first: just attached, its device not in the node yet.
  await publish([ENI_B]);
  kernel = new MemoryKernel();
  kernel.plug('eth1', ENI_A.mac);
  agent = new Agent({
    kc,
    node: NODE,
    stateDir: mkdtempSync(join(tmpdir(), 'add-del-race-')),
    cooldownMs: 60_000,
    statusIntervalMs: 100,
    logger: silentLogger(),
    registry: new Registry(),
    datapath: { config: { tableBase: 3000, mtu: 1500 }, kernel, deviceTimeoutMs: 3000, resyncMs: 60_000 },
  });
  await agent.start();
  await eventually(() => agent.ready, 10_000);
});
afterEach(async () => {
  await agent.stop();
  await emu.close();
});

describe('an ADD still waiting for its device when the runtime has moved on', () => {
  it('does not release, when it gives up, the address a later ADD of the same container is running with', async () => {
    const first = add('c1');
    await eventually(() => held('c1'));
    expect(held('c1')).toBe('10.1.2.10');
    // eni-a joins the pool; its device is there and the agent sets it up.
    await publish([ENI_B, ENI_A]);
    await eventually(() => agent.routing!.ready().has('eni-a'));
    // The runtime gave up on ADD#1: DEL, then ADD again (containerd's teardown, the kubelet's retry).
    await agent.removePod('c1', 'eth0');
    const second = await add('c1');
    expect(second).toMatchObject({ lease: { ip: '10.1.1.10', eniId: 'eni-a' } });
    expect(kernel.rulesOf('10.1.1.10')).toHaveLength(2);
    // ADD#1 fails: its address was released by the DEL while it waited.
    expect(await first).toMatchObject({ error: { reason: 'released', transient: true } });
    // The pod that runs with ADD#2's answer keeps its address and its rules.
    expect(held('c1')).toBe('10.1.1.10');
    expect(kernel.rulesOf('10.1.1.10')).toHaveLength(2);
  }, 20_000);

  it('does not answer an address that a DEL of its container released while it waited', async () => {
    const first = add('c2');
    await eventually(() => held('c2'));
    await agent.removePod('c2', 'eth0');
    expect(held('c2')).toBeUndefined();
    kernel.plug('eth2', ENI_B.mac);
    // It fails (try again), rather than answer an address the agent released and routes nowhere.
    expect(await first).toMatchObject({ error: { reason: 'released', transient: true } });
    expect(kernel.rulesOf('10.1.2.10')).toEqual([]);
  }, 20_000);
});
