import { exec } from '../testbed/vpc/exec.js';
import { ROOT, agentHolds, type AgentProcess, type ChaosCluster } from './cluster.js';
import type { Verdict } from './invariants.js';
import { ProbePods, type ProbeSandbox } from './probe-pods.js';
import { sleep, type ScenarioContext } from './scenario.js';

/** How long the kubelet keeps trying one pod's sandbox, and a DEL, before the probe counts as lost. */
const POD_DEADLINE_MS = 60_000;

interface Link {
  ifname: string;
  address?: string;
  operstate?: string;
  addr_info?: Array<{ local: string; family: string }>;
}

async function links(netns: string): Promise<Link[]> {
  const r = await exec('ip', ['-n', netns, '-j', 'addr', 'show']);
  return r.code === 0 ? (JSON.parse(r.stdout || '[]') as Link[]) : [];
}

/** The MAC of the ENI whose primary address `ip` is (an Exclusive pool's pod address). */
const macOf = (c: ChaosCluster, ip: string) => [...c.ecs.world.enis.values()].find((e) => e.primaryIp === ip)?.mac;

/** What went on, for the verdicts. */
interface Tally {
  pods: number;
  reached: number;
  addsCut: number;
  delsCut: number;
  problems: string[];
  /** Pod address -> the probe holding it, between its ADD's answer and its DEL's. */
  live: Map<string, string>;
}

/**
 * The kubelet's way with a sandbox whose ADD failed: DEL it (again until it answers, the agent
 * may be down), then its namespace goes; the pod gets a new sandbox later.
 */
async function delUntilAnswered(sandbox: ProbeSandbox, deadline: number): Promise<number> {
  let failed = 0;
  for (;;) {
    try {
      await sandbox.del();
      return failed;
    } catch (e) {
      failed++;
      if (Date.now() > deadline)
        throw new Error(`DEL of ${sandbox.containerId} never answered: ${(e as Error).message}`);
      await sleep(500);
    }
  }
}

/**
 * One exclusive pod on the node of `a`, its agent SIGKILLed `killAfterMs` into the ADD and again
 * into the DEL, restarted a second later each time. Checks as it goes: no address (ENI) held by
 * two live pods; the pod's first ping reaches the VPC host; after the DEL that answered, the ENI's
 * device is out of the pod's namespace and on the node, down, without an address.
 */
async function podThroughKills(
  c: ChaosCluster,
  probes: ProbePods,
  a: AgentProcess,
  name: string,
  killAfterMs: number,
  t: Tally,
): Promise<void> {
  const deadline = Date.now() + POD_DEADLINE_MS;
  c.recordPod(a.node, name, undefined, { 'eniipam.io/eni': '1' });
  const killAndRestart = async () => {
    await sleep(killAfterMs);
    await c.killAgent(a, 'SIGKILL');
    await sleep(1000);
    await c.startAgents([a]);
  };
  let sandbox = await probes.sandbox(a, name);
  let kill: Promise<void> | undefined = killAndRestart();
  let ip: string | undefined;
  for (;;) {
    try {
      ip = await sandbox.add();
      break;
    } catch (e) {
      if (kill) t.addsCut++;
      await delUntilAnswered(sandbox, deadline);
      await sandbox.remove();
      await kill;
      kill = undefined;
      if (Date.now() > deadline) {
        t.problems.push(
          `${name} on ${a.node}: no ADD answered within ${POD_DEADLINE_MS / 1000} s: ${(e as Error).message}`,
        );
        c.recordPod(a.node, name, 'gone');
        return;
      }
      await sleep(500);
      sandbox = await probes.sandbox(a, name);
    }
  }
  await kill;
  t.pods++;
  if (!ip) {
    t.problems.push(`${name} on ${a.node}: ADD answered no address`);
    return;
  }
  const other = t.live.get(ip);
  if (other) t.problems.push(`${ip} is held by ${name} and ${other} at once`);
  t.live.set(ip, name);
  c.recordPod(a.node, name, ip, { 'eniipam.io/eni': '1' });
  if (await probes.reaches(sandbox.netns)) t.reached++;
  else t.problems.push(`${name} on ${a.node} (${ip}): its first ping did not reach the VPC host`);

  const delKill = killAndRestart();
  const cut = await delUntilAnswered(sandbox, deadline).catch((e: unknown) => {
    t.problems.push(`${name}: ${(e as Error).message}`);
    return 0;
  });
  if (cut) t.delsCut++;
  await delKill;
  t.live.delete(ip);
  // Home before the namespace goes: a DEL that answered has moved the device back itself.
  const mac = macOf(c, ip);
  const inPod = (await links(sandbox.netns)).find((l) => l.address === mac);
  if (inPod) t.problems.push(`${name}: after its DEL, ENI ${mac}'s device is still in the pod, as ${inPod.ifname}`);
  const onNode = (await links(a.netns!)).find((l) => l.address === mac);
  const addressed = onNode?.addr_info?.filter((x) => x.family === 'inet') ?? [];
  if (!onNode) t.problems.push(`${name}: after its DEL, ENI ${mac}'s device is not on node ${a.node}`);
  else if (onNode.operstate !== 'DOWN' || addressed.length)
    t.problems.push(
      `${name}: ENI ${mac}'s device is back on ${a.node} but ${onNode.operstate} with ${addressed.length} addresses`,
    );
  await sandbox.remove();
  c.recordPod(a.node, name, 'gone');
}

/**
 * eniMode Exclusive with the agent killed in the middle of an ADD (the ENI taken, its device on
 * its way into the pod) and of a DEL (on its way back): one pod after another on each node, the
 * kill a little later each time so that it lands at every step. Then every node's ENI devices are
 * home and the agents hold nothing.
 */
export async function agentKilledMidExclusive(ctx: ScenarioContext): Promise<Record<string, Verdict>> {
  const { c } = ctx;
  if (!c.vpc?.vpcHost || !c.network)
    return { 'exclusive-pods-work': { ok: false, detail: 'the cluster runs without the VPC emulation' } };
  const probes = new ProbePods(
    c.vpc.vpcHost.ip,
    `ecx${c.network.id}-`,
    ROOT,
    'examples/10-eni-ipam-exclusive.conflist',
  );
  const t: Tally = { pods: 0, reached: 0, addsCut: 0, delsCut: 0, problems: [], live: new Map() };
  const t0 = Date.now();
  let n = 0;
  await Promise.all(
    c.agents.map(async (a, k) => {
      // From 0 to 300 ms into the call, in steps: an ADD takes about that (a pod read, the move).
      for (let i = 0; Date.now() - t0 < ctx.faultMs; i++)
        await podThroughKills(c, probes, a, `xpod${++n}`, ((i * 7 + k * 3) % 11) * 30, t);
    }),
  );
  // Settled: each node's pool ENIs are home (on the node) and no agent holds an address. An agent
  // restarted after a DEL it saved, once that address had cooled down, takes it back from a pod
  // still showing it (absence of a word is no proof), until the pod is gone: 30 s at most.
  const settledAt = Date.now();
  let stray: string[] = [];
  do {
    stray = [];
    for (const a of c.agents) {
      const pool = c.pools().find((p) => p.metadata.name === a.node);
      const nodeLinks = await links(a.netns!);
      for (const e of pool?.status?.enis ?? [])
        if (e.state === 'InUse' && e.mac && (e.deviceIndex ?? 0) > 0 && !nodeLinks.some((l) => l.address === e.mac))
          stray.push(`${a.node}: ENI ${e.id}'s device is not on the node`);
      const held = await agentHolds(a);
      if (held === undefined) stray.push(`${a.node}: the agent does not answer`);
      else if (held.size)
        stray.push(
          `${a.node}: the agent still holds ${[...held].map(([container, ip]) => `${ip} (${container})`).join(', ')}`,
        );
    }
    if (stray.length) await sleep(1000);
  } while (stray.length && Date.now() - settledAt < 40_000);
  const homeIn = ((Date.now() - settledAt) / 1000).toFixed(0);
  const fail = (detail: string): Verdict => ({ ok: false, detail });
  const ok = (detail: string): Verdict => ({ ok: true, detail });
  return {
    'exclusive-pods-work':
      t.pods > 0 && t.reached === t.pods && !t.problems.length
        ? ok(
            `${t.pods} pods, each a whole ENI, through ${t.addsCut} cut ADDs and ${t.delsCut} cut DELs; every first ping reached the VPC host`,
          )
        : fail(
            `${t.problems.length} problems, first: ${t.problems.slice(0, 3).join('; ') || `${t.reached} of ${t.pods} reached`}`,
          ),
    'kills-landed':
      t.addsCut > 0 && t.delsCut > 0
        ? ok(`${t.addsCut} ADDs and ${t.delsCut} DELs were cut by the kill`)
        : fail(`the kills cut ${t.addsCut} ADDs and ${t.delsCut} DELs: the fault did not land in both`),
    'devices-home': stray.length
      ? fail(stray.slice(0, 3).join('; '))
      : ok(`every ENI device on its node and no allocation left, ${homeIn} s after the last pod`),
  };
}
