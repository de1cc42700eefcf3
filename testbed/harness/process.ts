import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';

/** Where an operator or an agent serves, as its `"msg":"serving"` log line says (the agent adds its socket). */
export interface Serving {
  metrics: string;
  health: string;
  socket?: string;
  /** An operator's Lease identity. */
  identity?: string;
}

/** The fields of a `"msg":"serving"` JSON log line; undefined for any other line. */
export function servingOf(line: string): Serving | undefined {
  if (!line.includes('"msg":"serving"')) return undefined;
  try {
    const entry = JSON.parse(line) as Serving & { msg?: string };
    return entry.msg === 'serving' ? entry : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Waits for the serving line of an operator or an agent (an agent prints it once its socket
 * serves); its exit before that, or 30 s without it, is an error. Later lines are read and
 * dropped, so that the process never stalls on a full pipe.
 */
export async function untilServing(child: ChildProcess, what: string): Promise<Serving> {
  const lines = createInterface({ input: child.stdout! });
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    new Promise<Serving>((resolve) =>
      lines.on('line', (l) => {
        const serving = servingOf(l);
        if (serving) resolve(serving);
      }),
    ),
    once(child, 'exit').then(([code]) => {
      throw new Error(`the ${what} exited with ${code} before it served`);
    }),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`the ${what} did not serve within 30 s`)), 30_000);
    }),
  ]).finally(() => clearTimeout(timer));
}

/**
 * `eni-ipam operator` against the emulators: its kubeconfig, the ECS emulator as both OpenAPI
 * endpoints, metrics and health on free ports. Callers add what differs (leader election, log
 * level, rates).
 */
export function operatorArgs(o: { kubeconfig: string; ecs: string; clusterId: string; vpcId: string }): string[] {
  return [
    'operator',
    ...['--kubeconfig', o.kubeconfig, '--region', 'cn-hangzhou', '--vpc-id', o.vpcId, '--cluster-id', o.clusterId],
    ...['--ecs-endpoint', o.ecs, '--vpc-endpoint', o.ecs],
    ...['--metrics-addr', '127.0.0.1:0', '--health-addr', '127.0.0.1:0'],
  ];
}

/**
 * `eni-ipam agent` for one node: its kubeconfig, state folder and socket; metrics and health on
 * free ports; no node routing (these agents share the machine's network namespace, which is no
 * node's to set up).
 */
export function agentArgs(o: { node: string; kubeconfig: string; stateDir: string; socket: string }): string[] {
  return [
    'agent',
    ...['--node', o.node, '--kubeconfig', o.kubeconfig, '--state-dir', o.stateDir, '--socket', o.socket],
    ...['--metrics-addr', '127.0.0.1:0', '--health-addr', '127.0.0.1:0', '--node-routing=false'],
  ];
}
