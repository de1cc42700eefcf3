import { agentClient } from '../src/agent/client.js';
import type { CiliumAgentStandIn } from '../testbed/cilium/agent.js';
import type { AgentProcess } from './cluster.js';

/** A pod's address from a cilium-agent: none free is an empty pool; any other failure (an ENI not in status) is one. */
function ciliumAllocate(agent: CiliumAgentStandIn, owner: string): { ip: string } | 'pool-empty' {
  try {
    return { ip: agent.allocateNext(owner).ip };
  } catch (e) {
    if (/no more IPs available|no CiliumNode yet/.test((e as Error).message)) return 'pool-empty';
    throw e;
  }
}

/** Where pods are recorded as the scheduler and kubelet record them (ChaosCluster.recordPod). */
export type PodRecorder = (node: string, name: string, ip: string | undefined | 'gone') => void;

/** A pod's address as the container runtime knows it: held from the call until its release answered. */
export interface Held {
  node: string;
  containerId: string;
  ip?: string;
}

/**
 * Pods starting and stopping on every node through the agents' sockets, as the CNI plugin
 * calls them: each node's pod count swings between `low` and `high` over `periodMs`, so that
 * pools grow and then shrink (the operator requests releases, and unassigns).
 */
export class Workload {
  readonly held = new Map<string, Held>();
  allocations = 0;
  releases = 0;
  failures = 0;
  private running = false;
  private readonly retired = new Set<string>();
  private loops: Promise<void>[] = [];
  private seq = 0;

  constructor(
    private readonly agents: AgentProcess[],
    private readonly pods: PodRecorder,
    private readonly o = { low: 1, high: 8, periodMs: 30_000, stepMs: 300 },
  ) {}

  start(): void {
    if (this.running) return;
    this.running = true;
    const t0 = Date.now();
    this.loops = this.agents.map(async (a, n) => {
      while (this.running && !this.retired.has(a.node)) {
        const phase = ((Date.now() - t0) / this.o.periodMs + n / this.agents.length) % 1;
        const target = Math.round(this.o.low + (this.o.high - this.o.low) * (phase < 0.5 ? phase * 2 : 2 - phase * 2));
        const mine = [...this.held.values()].filter((h) => h.node === a.node && h.ip);
        try {
          if (mine.length < target) await this.allocate(a);
          else if (mine.length > target) await this.release(a, mine[Math.floor(Math.random() * mine.length)]!);
        } catch {
          this.failures++;
        }
        await new Promise((r) => setTimeout(r, this.o.stepMs * (0.5 + Math.random())));
      }
    });
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
  }

  /** The node left the cluster: no more pods start there, and its pods are gone with it. */
  retire(node: string): void {
    this.retired.add(node);
    for (const [key, h] of this.held) if (h.node === node) this.held.delete(key);
  }

  /** Addresses pods hold now (including those whose allocation is in flight), by IP. */
  holders(): Map<string, string[]> {
    const out = new Map<string, string[]>();
    for (const h of this.held.values())
      if (h.ip) out.set(h.ip, [...(out.get(h.ip) ?? []), `${h.node}/default/${h.containerId}`]);
    return out;
  }

  private async allocate(a: AgentProcess): Promise<void> {
    const containerId = `c${++this.seq}`;
    const key = `${a.node}/${containerId}`;
    const h: Held = { node: a.node, containerId };
    this.held.set(key, h);
    this.pods(a.node, containerId, undefined);
    try {
      const lease = a.cilium
        ? ciliumAllocate(a.cilium, `default/${containerId}`)
        : await agentClient.allocate(a.socket, { containerId, ifName: 'eth0', pod: `default/${containerId}` }, 5000);
      if (lease === 'pool-empty') {
        this.held.delete(key);
        this.pods(a.node, containerId, 'gone');
      } else {
        h.ip = lease.ip;
        this.pods(a.node, containerId, lease.ip);
        this.allocations++;
      }
    } catch (e) {
      // The answer is unknown (the agent died mid-call): the runtime would retry ADD or DEL; we drop it.
      this.held.delete(key);
      this.pods(a.node, containerId, 'gone');
      throw e;
    }
  }

  private async release(a: AgentProcess, h: Held): Promise<void> {
    if (a.cilium) a.cilium.release(h.ip!);
    else await agentClient.release(a.socket, h.containerId, 'eth0', 5000);
    this.held.delete(`${h.node}/${h.containerId}`);
    this.pods(a.node, h.containerId, 'gone');
    this.releases++;
  }
}
